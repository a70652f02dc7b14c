"""Fixtures for tests on the one-node cluster (cluster.py): `kube_cluster` brings it up once per
test session (reusing one that is already up) and takes it down at the end unless it was up
before the session or TIDEGATE_KEEP_CLUSTER=1; `namespace` gives each test a namespace of its own
(ingress-nginx's e2e framework does the same), deleted afterwards."""

from __future__ import annotations

import os
import re
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cluster  # noqa: E402
import kube  # noqa: E402


@pytest.fixture(scope="session")
def kube_cluster():
    if os.geteuid() != 0:
        pytest.fail("the one-node cluster tests need root (network, mounts, cgroups)")
    was_up = cluster.STATE.exists() and cluster.is_up()
    try:
        cluster.up()
    except RuntimeError as e:
        logs = "\n".join(f"----- {n} -----\n{cluster.log_tail(n, 3000)}"
                         for n in cluster.COMPONENTS)
        pytest.fail(f"the one-node cluster did not come up: {e}\n{logs}", pytrace=False)
    yield kube.Kube(cluster.kubeconfig_path(), cluster.bin_dir() / "kubectl")
    if not was_up and not os.environ.get("TIDEGATE_KEEP_CLUSTER"):
        left = cluster.down()
        assert not left, f"cluster down left things behind: {left}"


@pytest.fixture
def namespace(kube_cluster, request):
    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    ns = f"{name}-{uuid.uuid4().hex[:5]}"
    kube_cluster.create_namespace(ns)
    yield ns
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        print(kube_cluster.describe_namespace(ns))
    kube_cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)
