"""Fixtures for the chart tests: helm (built once by build-tools.sh, cached in
~/.cache/tidegate/chart) and a real kube-apiserver + etcd (e2e/kube) to validate what the chart
renders and to run the controller with the chart's RBAC."""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "kube"))

import chartlib  # noqa: E402
import kubecluster  # noqa: E402

# Backends of the RBAC test listen on 192.0.2.x (the API server refuses loopback endpoints), as
# in e2e/kube; idempotent when e2e/kube/conftest.py already did it.
NETNS_ERROR = kubecluster.enter_test_netns()


@pytest.fixture(scope="session")
def helm(tmp_path_factory) -> chartlib.Helm:
    return chartlib.Helm(chartlib.build_helm(), tmp_path_factory.mktemp("helm-home"))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory):
    if NETNS_ERROR:
        pytest.fail(f"cannot make the tests' network namespace: {NETNS_ERROR}")
    with kubecluster.running(kubecluster.build(), tmp_path_factory.mktemp("chart-cluster")) as c:
        yield c


@pytest.fixture
def namespace(cluster) -> str:
    """A fresh namespace per test (the chart's release namespace)."""
    name = "tg-" + uuid.uuid4().hex[:8]
    cluster.create_namespace(name)
    return name
