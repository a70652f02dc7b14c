"""The Helm chart installed as users install it, on the one-node cluster: the image built from
the Dockerfile, `helm install`, an Ingress to an echo Deployment answering through the chart's
Service over HTTP and HTTPS, the status address, the security context in force on the running
container, `helm upgrade` rolling two replicas without a failed request, `helm uninstall`
leaving only the CRDs."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
import threading
import time
from pathlib import Path

import pytest

import cluster
import release
from kube import container_pid, echo_deployment, wait_for
from release import RELEASE, helm_run, install, make_helm, node_ports

pytestmark = pytest.mark.deadline(420)

HOST = "echo.example"


@pytest.fixture(scope="module")
def helm(tmp_path_factory):
    return make_helm(tmp_path_factory.mktemp("helm-home"))


def make_tls_secret(kube, ns: str, d: Path) -> Path:
    return release.make_tls_secret(kube, ns, d, "echo-tls", HOST)


def ingress(tls: bool) -> dict:
    spec = {"ingressClassName": "tidegate", "rules": [{"host": HOST, "http": {"paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": "echo", "port": {"number": 80}}}}]}}]}
    if tls:
        spec["tls"] = [{"hosts": [HOST], "secretName": "echo-tls"}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "echo"}, "spec": spec}


def get(port: int, path: str = "/", tls_ca: Path | None = None,
        timeout: float = 3) -> tuple[int, bytes, dict]:
    if tls_ca:
        ctx = ssl.create_default_context(cafile=str(tls_ca))
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        conn = http.client.HTTPSConnection(cluster.NODE_IP, port, timeout=timeout, context=ctx)
        # The certificate names echo.example, the connection goes to the node address.
        conn.sock = ctx.wrap_socket(socket.create_connection((cluster.NODE_IP, port), timeout),
                                    server_hostname=HOST)
    else:
        conn = http.client.HTTPConnection(cluster.NODE_IP, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": HOST})
        r = conn.getresponse()
        return r.status, r.read(), {k.lower(): v for k, v in r.getheaders()}
    finally:
        conn.close()


def try_get(port: int, want: int = 200, **kw):
    try:
        status, body, headers = get(port, **kw)
    except OSError:
        return None
    return (body, headers) if status == want else None


def our_objects(kube, ns: str) -> list[str]:
    sel = f"app.kubernetes.io/instance={RELEASE}"
    names = kube.kubectl("-n", ns, "get", "all,configmaps,secrets,serviceaccounts,roles,"
                         "rolebindings,poddisruptionbudgets,leases", "-l", sel, "-o", "name")
    names += kube.kubectl("get", "clusterroles,clusterrolebindings,ingressclasses", "-l", sel,
                          "-o", "name")
    return names.split()


def test_helm_install_serves_http_and_https_and_uninstalls_cleanly(kube_cluster, namespace,
                                                                  helm, tmp_path):
    kube = kube_cluster
    notes = install(helm, namespace)
    assert "tidegate" in notes
    pods = kube.wait_deployment_ready(namespace, RELEASE, 1, timeout=120)
    statuses = {c["name"]: c["ready"] for c in pods[0]["status"]["containerStatuses"]}
    assert statuses == {"controller": True, "dataplane": True}, statuses

    kube.apply(*echo_deployment("echo", 1), namespace=namespace)
    echo_pod = kube.wait_deployment_ready(namespace, "echo", 1)[0]
    ca = make_tls_secret(kube, namespace, tmp_path)
    kube.apply(ingress(tls=True), namespace=namespace)
    ports = node_ports(kube, namespace)

    # A TLS Ingress redirects plain HTTP to HTTPS (ssl-redirect, as ingress-nginx does).
    _, headers = wait_for(lambda: try_get(ports["http"], want=308, path="/plain"), 60,
                          "the Ingress to answer over HTTP through the NodePort")
    assert headers["location"] == f"https://{HOST}/plain", headers
    body, _ = wait_for(lambda: try_get(ports["https"], path="/tls", tls_ca=ca), 60,
                       "the Ingress to answer over HTTPS (TLS 1.3) with its certificate")
    reply = json.loads(body)
    assert reply["pod"] == echo_pod["metadata"]["name"] and reply["path"] == "/tls", reply

    # The test plays the load-balancer provider (as MetalLB would): the address it gives the
    # chart's LoadBalancer Service is what the controller publishes on the Ingress.
    kube.kubectl("-n", namespace, "patch", "service", RELEASE, "--subresource=status",
                 "--type=merge", "-p", json.dumps(
                     {"status": {"loadBalancer": {"ingress": [{"ip": cluster.NODE_IP}]}}}))
    wait_for(lambda: kube.get("ingress", "echo", namespace=namespace).get("status", {})
             .get("loadBalancer", {}).get("ingress") == [{"ip": cluster.NODE_IP}], 30,
             "the Ingress status to carry the Service's address")
    described = kube.kubectl("-n", namespace, "describe", "ingress", "echo")
    assert any(line.split()[:2] == ["Address:", cluster.NODE_IP]
               for line in described.splitlines()), described

    # The security context holds on the running data plane: not root, read-only root file
    # system, no capabilities; it still serves, writes its socket (above) and logs.
    pod = kube.wait_deployment_ready(namespace, RELEASE, 1)[0]
    pid = container_pid(pod, "dataplane")
    st = Path(f"/proc/{pid}/status").read_text()
    uids = next(line.split()[1:] for line in st.splitlines() if line.startswith("Uid:"))
    assert uids == ["65532"] * 4, st
    cap_eff = next(line.split()[1] for line in st.splitlines() if line.startswith("CapEff:"))
    assert int(cap_eff, 16) == 0, f"effective capabilities {cap_eff}"
    root = next(line for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines()
                if line.split()[4] == "/")
    assert "ro" in root.split()[5].split(","), root
    logs = kube.kubectl("-n", namespace, "logs", pod["metadata"]["name"], "-c", "dataplane")
    assert "/tls" in logs, logs[-2000:]

    helm_run(helm, "uninstall", RELEASE, "-n", namespace, "--wait")
    wait_for(lambda: not our_objects(kube, namespace), 60, "the release's objects to go")
    crds = kube.kubectl("get", "crd", "-o", "name")
    assert "substitutionrulesets.tidegate.io" in crds, crds


def test_helm_upgrade_rolls_two_replicas_without_a_failed_request(kube_cluster, namespace,
                                                                 helm):
    kube = kube_cluster
    install(helm, namespace, "replicaCount=2")
    before = {p["metadata"]["name"] for p in
              kube.wait_deployment_ready(namespace, RELEASE, 2, timeout=120)}
    kube.apply(*echo_deployment("echo", 2), namespace=namespace)
    kube.wait_deployment_ready(namespace, "echo", 2)
    kube.apply(ingress(tls=False), namespace=namespace)
    port = node_ports(kube, namespace)["http"]
    wait_for(lambda: try_get(port), 60, "the Ingress to answer")
    # Both replicas must serve before the roll starts (the controller of the second one has
    # pushed its first configuration when its readiness passed, but check anyway).
    pdb = kube.get("poddisruptionbudget", RELEASE, namespace=namespace)
    assert pdb["spec"].get("minAvailable") or pdb["spec"].get("maxUnavailable") is not None

    results: list[tuple[float, int | str]] = []
    stop = threading.Event()

    def client():
        while not stop.is_set():
            t = time.monotonic()
            try:
                status, _, _ = get(port, path="/during-upgrade", timeout=5)
                results.append((t, status))
            except OSError as e:
                results.append((t, f"{type(e).__name__}: {e}"))
            time.sleep(0.02)
    th = threading.Thread(target=client, daemon=True)
    th.start()
    try:
        time.sleep(1)
        helm_run(helm, "upgrade", RELEASE, str(release.chartlib.CHART), "-n", namespace,
                 "--reuse-values", "--set", "controller.extraArgs.crd-recheck-interval=20")

        def rolled():
            pods = kube.ready_pods(namespace, f"app.kubernetes.io/instance={RELEASE}")
            names = {p["metadata"]["name"] for p in pods}
            all_pods = {p["metadata"]["name"] for p in
                        kube.pods(namespace, f"app.kubernetes.io/instance={RELEASE}")}
            return len(names) == 2 and not names & before and all_pods == names
        wait_for(rolled, 240, "the upgrade to replace both pods", interval=0.5)
        time.sleep(2)
    finally:
        stop.set()
        th.join(10)
    failed = [r for r in results if r[1] != 200]
    print(f"helm upgrade: {len(results)} requests during the roll, {len(failed)} failed")
    assert len(results) > 100, len(results)
    assert not failed, failed[:10]
    args = kube.get("deployment", RELEASE, namespace=namespace)["spec"]["template"]["spec"][
        "containers"]
    controller = next(c for c in args if c["name"] == "controller")
    assert "--crd-recheck-interval=20" in controller["args"], controller["args"]
    helm_run(helm, "uninstall", RELEASE, "-n", namespace, "--wait")
