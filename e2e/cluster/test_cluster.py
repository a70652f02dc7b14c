"""The one-node cluster itself: real pods start and stop, the real EndpointSlice controller
follows them, kube-proxy routes Services, CoreDNS resolves them, and RBAC applies to pods'
ServiceAccount tokens. The last test takes the cluster down and up again."""

from __future__ import annotations

import json
import os
import time
import urllib.request

import pytest

import cluster
from kube import container_pid, echo_deployment, wait_for

pytestmark = pytest.mark.deadline(300)


def http_get(url: str, timeout: float = 5) -> tuple[int, dict]:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, json.loads(r.read())


def test_node_ready_and_deployment_endpoints(kube_cluster, namespace):
    node = kube_cluster.get("node", cluster.NODE_NAME)
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "True", conditions
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == cluster.NODE_IP
    assert node["status"]["nodeInfo"]["kubeletVersion"].startswith("v1.36.")
    assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://1.6")

    t = time.monotonic()
    # Nothing of the cluster listens beyond loopback and the node address (pods listen in their
    # own network namespaces, on the bridge).
    ours = ("etcd", "kube-apiserver", "kube-controller", "kube-scheduler", "kubelet",
            "kube-proxy", "containerd")
    listeners = cluster.run("ss", "-Hltnup").stdout.splitlines()
    for line in listeners:
        fields = line.split()
        if any(f'"{name}' in line for name in ours):
            addr = fields[4].rsplit(":", 1)[0]
            assert addr in ("127.0.0.1", cluster.NODE_IP), line
    assert any(f"{cluster.NODE_IP}:{cluster.APISERVER_PORT}" in line for line in listeners)

    kube_cluster.apply(*echo_deployment("echo", 2), namespace=namespace)
    pods = kube_cluster.wait_deployment_ready(namespace, "echo", 2)
    ready_s = time.monotonic() - t
    ips = sorted(p["status"]["podIP"] for p in pods)
    assert all(ip.startswith("198.18.16.") for ip in ips), ips

    def slice_has_both():
        eps = kube_cluster.endpoints(namespace, "echo")
        return sorted(eps) == ips and all(c.get("ready") for c in eps.values())
    wait_for(slice_has_both, 30, "the EndpointSlice to list both pods")
    print(f"2 echo pods Ready {ready_s:.1f} s after apply")


def test_scale_up_and_down_endpoint_slice_follows(kube_cluster, namespace):
    grace = 4
    kube_cluster.apply(*echo_deployment("echo", 2, grace_seconds=grace), namespace=namespace)
    kube_cluster.wait_deployment_ready(namespace, "echo", 2)

    kube_cluster.kubectl("-n", namespace, "scale", "deployment/echo", "--replicas=4")
    pods = kube_cluster.wait_deployment_ready(namespace, "echo", 4)
    four = sorted(p["status"]["podIP"] for p in pods)
    wait_for(lambda: sorted(a for a, c in kube_cluster.endpoints(namespace, "echo").items()
                            if c.get("ready")) == four, 30, "the slice to list 4 ready pods")
    pids = {p["status"]["podIP"]: container_pid(p) for p in pods}

    kube_cluster.kubectl("-n", namespace, "scale", "deployment/echo", "--replicas=2")
    t = time.monotonic()

    # While the two pods that go keep serving (grace period of the app), the slice shows them
    # as terminating, then as not serving once their readiness fails.
    def terminating():
        eps = kube_cluster.endpoints(namespace, "echo")
        going = {a: c for a, c in eps.items() if c.get("terminating")}
        return going if len(going) == 2 else None
    going = wait_for(terminating, 20, "two endpoints marked terminating", interval=0.1)
    for addr, cond in going.items():
        assert cond.get("ready") is False, (addr, cond)
        assert "serving" in cond, (addr, cond)
    # A terminating pod still answers during its grace period (the app's own).
    addr = next(iter(going))
    status, body = http_get(f"http://{addr}:8080/")
    assert status == 200 and body["pod_ip"] == addr

    # Then the slice lists only the two that stay, and the processes of the others are gone.
    stay = wait_for(lambda: (lambda e: sorted(e) if len(e) == 2 and all(
        c.get("ready") for c in e.values()) else None)(kube_cluster.endpoints(namespace, "echo")),
        grace + 30, "the slice to list the 2 remaining pods")
    gone_s = time.monotonic() - t
    assert set(stay) == set(four) - set(going)
    for addr in going:
        pid = pids[addr]
        wait_for(lambda: not os.path.exists(f"/proc/{pid}"), 10,
                 f"the process of {addr} (pid {pid}) to exit")
    assert gone_s >= grace - 1, f"pods left after {gone_s:.1f} s, before their grace of {grace} s"
    print(f"scale 4->2: pods gone {gone_s:.1f} s after the scale (app grace {grace} s)")


def test_pod_ip_and_node_port_answer_from_the_host(kube_cluster, namespace):
    objs = echo_deployment("echo", 1)
    objs[1]["spec"]["type"] = "NodePort"
    kube_cluster.apply(*objs, namespace=namespace)
    pod = kube_cluster.wait_deployment_ready(namespace, "echo", 1)[0]
    ip, name = pod["status"]["podIP"], pod["metadata"]["name"]

    status, body = http_get(f"http://{ip}:8080/hello")
    assert (status, body["pod"], body["path"]) == (200, name, "/hello")

    svc = kube_cluster.get("service", "echo", namespace=namespace)
    node_port = svc["spec"]["ports"][0]["nodePort"]
    # kube-proxy programs the NodePort a moment after the endpoint is ready.
    body = wait_for(lambda: _try_get(f"http://{cluster.NODE_IP}:{node_port}/np"), 30,
                    "the NodePort to answer")
    assert (body["pod"], body["path"]) == (name, "/np")


def _try_get(url: str):
    try:
        return http_get(url, timeout=2)[1]
    except OSError:
        return None


def test_dns_cluster_ip_and_service_account_rbac(kube_cluster, namespace):
    cluster.wait_dns_ready()
    kube_cluster.apply(*echo_deployment("echo", 1), namespace=namespace)
    pod = kube_cluster.wait_deployment_ready(namespace, "echo", 1)[0]
    svc = kube_cluster.get("service", "echo", namespace=namespace)

    # A pod resolves the Service by its DNS name and reaches it on its ClusterIP.
    fqdn = f"echo.{namespace}.svc.cluster.local"
    phase, out = kube_cluster.run_pod(namespace, "dns", ["dns", fqdn, "echo"])
    assert phase == "Succeeded", out
    assert f"{fqdn} {svc['spec']['clusterIP']}" in out and \
        f"echo {svc['spec']['clusterIP']}" in out, out
    phase, out = kube_cluster.run_pod(namespace, "get-svc", ["get", "http://echo/via-dns"])
    assert phase == "Succeeded" and "status 200" in out, out
    assert json.loads(out.split("\n", 1)[1])["pod"] == pod["metadata"]["name"], out

    # Through the `kubernetes` Service with the pod's token: allowed by a Role, refused without.
    sa = "/var/run/secrets/kubernetes.io/serviceaccount"
    kube_cluster.apply(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "lister"}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": "list-services"},
         "rules": [{"apiGroups": [""], "resources": ["services"], "verbs": ["list"]}]},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": "lister"},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                     "name": "list-services"},
         "subjects": [{"kind": "ServiceAccount", "name": "lister", "namespace": namespace}]},
        namespace=namespace)
    url = f"https://kubernetes.default.svc/api/v1/namespaces/{namespace}/services"
    args = ["get", "-token-file", f"{sa}/token", "-ca-file", f"{sa}/ca.crt", url]
    phase, out = kube_cluster.run_pod(namespace, "list-allowed", args, service_account="lister")
    assert phase == "Succeeded" and "status 200" in out, out
    items = json.loads(out.split("\n", 1)[1])["items"]
    assert [s["metadata"]["name"] for s in items] == ["echo"], out
    phase, out = kube_cluster.run_pod(namespace, "list-refused", args)
    assert phase == "Succeeded" and "status 403" in out, out
    assert f"system:serviceaccount:{namespace}:default" in out, out


def test_down_leaves_nothing_behind_and_up_works_again(kube_cluster):
    """Runs last in this file: down, check the machine, up again (warm) within 15 s."""
    left = cluster.down()
    assert left == [], left
    assert cluster.leftovers() == []
    t = time.monotonic()
    cluster.up()
    times = json.loads((cluster.STATE / "times.json").read_text())
    total = time.monotonic() - t
    print(f"up after down: node Ready {times['up_to_node_ready_s']} s after start, "
          f"{total:.1f} s in all")
    assert times["up_to_node_ready_s"] <= 15, times
