"""Fixtures for the tests against a real kube-apiserver (see kubecluster.py).

Importing this file moves the test process into a private network namespace: the API server
rejects loopback EndpointSlice addresses, so backends listen on 192.0.2.x there instead. The
other e2e tests only use 127.0.0.1, which works the same inside the namespace.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import harness  # noqa: E402
import kubecluster  # noqa: E402

NETNS_ERROR = kubecluster.enter_test_netns()


KubeController = kubecluster.KubeController


@pytest.fixture(scope="session")
def kube_bin() -> Path:
    if NETNS_ERROR:
        pytest.fail(f"cannot make the tests' network namespace: {NETNS_ERROR}")
    return kubecluster.build()


@pytest.fixture(scope="session")
def cluster(kube_bin, tmp_path_factory):
    with kubecluster.running(kube_bin, tmp_path_factory.mktemp("cluster")) as c:
        yield c


@pytest.fixture
def own_cluster(kube_bin, tmp_path):
    """A cluster of the test's own (its own etcd and API server): stopping its API server does
    not disturb the others, and it has no CRD the test did not install (the session's cluster
    may have the SubstitutionRuleSet or Gateway API CRDs)."""
    c = kubecluster.Cluster(kube_bin, tmp_path / "cluster")
    try:
        c.start()
        yield c
    finally:
        c.shutdown()


@pytest.fixture
def namespace(cluster) -> str:
    """A fresh namespace per test, as ingress-nginx's e2e framework does."""
    name = "t-" + uuid.uuid4().hex[:8]
    cluster.create_namespace(name)
    return name


@pytest.fixture
def kube_stack_factory(request, tmp_path):
    """make(cluster, controller_args=[...], kubeconfig=None) -> a Stack (not started) whose
    controller watches `cluster`."""
    stacks: list[harness.Stack] = []
    request.node.tidegate_stacks = stacks

    def make(cluster, controller_args=(), kubeconfig: Path | None = None) -> harness.Stack:
        root = tmp_path / f"stack{len(stacks)}"
        root.mkdir()
        s = harness.make_stack(root)
        s.controller = KubeController(root / "controller.log", s.dataplane.socket_path,
                                      kubeconfig or cluster.kubeconfig, list(controller_args))
        stacks.append(s)
        return s

    yield make
    crashed = []
    for s in stacks:
        crashed += s.crashed()
        s.shutdown()
    if crashed:
        pytest.fail("; ".join(crashed) + "\n" + "\n".join(s.dump_logs() for s in stacks))
