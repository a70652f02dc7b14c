"""The chart's RBAC is enough and no more, against a real kube-apiserver.

The chart is rendered, validated, and its ServiceAccount, (Cluster)Roles, bindings, Service,
IngressClass and CRD are created for real. A token for the ServiceAccount comes from the
TokenRequest API; the real tidegate-controller runs with the args of the rendered pod (only the
socket path and a kubeconfig holding that token change) next to a real tidegate-dataplane run with
the rendered data-plane args (listeners moved to loopback ports). It must route an Ingress, write
its status, take the Lease and post an Event with nothing refused; and with the same token, calls
it has no business making are refused (403)."""

from __future__ import annotations

import json
import re
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import chartlib
import harness
import kubeapps
from chartlib import container, flags_of, one

PUBLISHED = "192.0.2.251"


def install_without_workload(helm, cluster, namespace: str, values: dict) -> list[dict]:
    """Renders the chart (with its CRDs), validates it, creates everything but the workload (no
    kubelet here: the test runs the pod's two programs itself). Returns the rendered objects."""
    rendered = helm.template(namespace=namespace, values=values, include_crds=True).stdout
    objs = chartlib.dry_run(cluster, rendered)
    docs = [d for d in ("\n" + rendered).split("\n---\n")
            if d.strip() and not re.search(r"^kind: (Deployment|DaemonSet)$", d, re.M)]
    cluster.kubectl("apply", "-f", "-", input="\n---\n".join(docs))
    cluster.kubectl("wait", "--for=condition=Established",
                    "crd/substitutionrulesets.tidegate.io", "--timeout=30s")
    return objs


def service_account_token(cluster, namespace: str, name: str) -> str:
    status, body = cluster.api("POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
                               {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                                "spec": {"expirationSeconds": 3600}})
    assert status == 201, (status, body)
    return body["status"]["token"]


def token_kubeconfig(cluster, path: Path, token: str) -> Path:
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "sa",
           "clusters": [{"name": "e2e", "cluster": {
               "server": cluster.server, "certificate-authority": str(cluster.pki / "ca.crt")}}],
           "users": [{"name": "sa", "user": {"token": token}}],
           "contexts": [{"name": "sa", "context": {"cluster": "e2e", "user": "sa"}}]}
    path.write_text(json.dumps(cfg))
    return path


def as_token(cluster, token: str, method: str, path: str, body: dict | None = None) -> int:
    """The HTTP status the API server answers `token` for one call."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(cluster.server + path, data=data, method=method, headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    ctx = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def can_i(cluster, namespace: str, sa: str, verb: str, resource: str, ns: str | None) -> bool:
    args = ["auth", "can-i", verb, resource, f"--as=system:serviceaccount:{namespace}:{sa}"]
    args += ["-n", ns] if ns else ["--all-namespaces"]
    return cluster.kubectl(*args, check=False).strip() == "yes"


@pytest.fixture
def stacks(tmp_path):
    made: list[harness.Stack] = []
    yield made
    crashed = []
    for s in made:
        crashed += s.crashed()
        s.shutdown()
    if crashed:
        pytest.fail("; ".join(crashed) + "\n" + "\n".join(s.dump_logs() for s in made))


def run_pod(objs, kubeconfig: Path, tmp_path: Path, stacks) -> harness.Stack:
    """The rendered pod's two programs, with the rendered args."""
    workload = [o for o in objs if o["kind"] in ("Deployment", "DaemonSet")][0]
    s = harness.make_stack(tmp_path)
    stacks.append(s)
    sock = str(s.dataplane.socket_path)
    dp_args = []
    for a in container(workload, "dataplane")["args"]:
        name = a[2:].partition("=")[0]
        a = {"control-socket": f"--control-socket={sock}",
             "http-listen": f"--http-listen=127.0.0.1:{s.dataplane.http_port}",
             "https-listen": f"--https-listen=127.0.0.1:{harness.free_port()}",
             "admin-listen": f"--admin-listen=127.0.0.1:{s.dataplane.admin_port}"}.get(name, a)
        dp_args.append(a)
    s.dataplane.argv = [str(harness.binary("tidegate-dataplane")), *dp_args, "--workers=2"]
    ctl_args = [a if not a.startswith("--dataplane-socket=") else f"--dataplane-socket={sock}"
                for a in container(workload, "controller")["args"]]
    s.controller.argv = [str(harness.binary("tidegate-controller")), *ctl_args,
                         f"--kubeconfig={kubeconfig}"]
    s.start_dataplane()
    s.start_controller()
    return s


def exercise(cluster, s: harness.Stack, release_ns: str, app_ns: str, election_id: str) -> None:
    """Routes, status, Lease and an Event, all through the ServiceAccount's permissions."""
    host = kubeapps.backend_address()
    b = s.backend("site", host, harness.free_port(host))
    cluster.apply(kubeapps.kube_service("site", app_ns),
                  harness.endpoint_slice("site-1", "site", [b.host], b.port, namespace=app_ns),
                  kubeapps.kube_ingress("site", app_ns, "chart.example", "site"))
    s.wait_backend("/", "chart.example", "site", timeout=20)
    # --publish-service: give the chart's Service a load-balancer address (no cloud here).
    status, body = cluster.api("PATCH", f"/api/v1/namespaces/{release_ns}/services/tidegate/status",
                               {"status": {"loadBalancer": {"ingress": [{"ip": PUBLISHED}]}}},
                               content_type="application/merge-patch+json")
    assert status == 200, (status, body)
    harness.wait_until(
        lambda: cluster.kubectl("get", "ingress", "site", "-n", app_ns, "-o",
                                "jsonpath={.status.loadBalancer.ingress[0].ip}") == PUBLISHED,
        20, "the Service's address in the Ingress's status")
    lease = json.loads(cluster.kubectl("get", "lease", election_id, "-n", release_ns, "-o", "json"))
    assert lease["spec"].get("holderIdentity"), lease
    cluster.apply(kubeapps.kube_ingress("odd", app_ns, "odd.example", "site",
                                        annotations={"tidegate.io/use-regex": "maybe"}))
    kubeapps.wait_events(cluster, app_ns, "odd", lambda ev: len(ev) >= 1, timeout=20,
                         what="an Event on the Ingress odd")
    # A Secret fetched by name when an Ingress starts naming it (the one `get` on Secrets).
    cluster.apply(harness.tls_secret("late", b"not a certificate", b"not a key",
                                     namespace=app_ns),
                  harness.with_tls(kubeapps.kube_ingress("odd", app_ns, "odd.example", "site"),
                                   (["odd.example"], "late")))
    kubeapps.wait_events(cluster, app_ns, "odd",
                         lambda ev: any("spec.tls[0]" in e["message"] for e in ev), timeout=20,
                         what="an Event about the unusable certificate (the Secret was read)")
    log = s.controller.log()
    kubeapps.assert_nothing_refused(log)


def test_cluster_role_is_enough_and_no_more(helm, cluster, namespace, tmp_path, stacks):
    app_ns = namespace + "-app"
    cluster.create_namespace(app_ns)
    objs = install_without_workload(helm, cluster, namespace, {})
    sa = one(objs, "ServiceAccount")["metadata"]["name"]
    token = service_account_token(cluster, namespace, sa)
    kubeconfig = token_kubeconfig(cluster, tmp_path / "sa.kubeconfig", token)
    s = run_pod(objs, kubeconfig, tmp_path, stacks)
    assert "--watch-namespace" not in " ".join(s.controller.argv)
    exercise(cluster, s, namespace, app_ns, "tidegate-leader")
    # ConfigMaps are read for the CA bundles BackendTLSPolicies name (only those are kept).
    assert as_token(cluster, token, "GET", "/api/v1/configmaps") == 200
    # Refused: what the controller never needs.
    assert as_token(cluster, token, "GET", "/api/v1/pods") == 403
    assert as_token(cluster, token, "GET", f"/api/v1/namespaces/{app_ns}/serviceaccounts") == 403
    assert as_token(cluster, token, "POST", f"/api/v1/namespaces/{app_ns}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
        "spec": {"containers": [{"name": "x", "image": "x"}]}}) == 403
    assert as_token(cluster, token, "DELETE", f"/api/v1/namespaces/{app_ns}/secrets/late") == 403
    assert as_token(cluster, token, "PUT", f"/apis/networking.k8s.io/v1/namespaces/{app_ns}"
                    "/ingresses/site", {}) == 403  # only the status subresource, by patch
    assert as_token(cluster, token, "GET", "/api/v1/nodes") == 403
    # The Lease: only in the release namespace, and only ours by name.
    assert as_token(cluster, token, "GET", f"/apis/coordination.k8s.io/v1/namespaces/{app_ns}"
                    "/leases/tidegate-leader") == 403
    assert as_token(cluster, token, "PUT", f"/apis/coordination.k8s.io/v1/namespaces/{namespace}"
                    "/leases/someone-else", {}) == 403
    # kubectl auth can-i agrees on the grants that matter.
    assert can_i(cluster, namespace, sa, "list", "secrets", None)
    assert can_i(cluster, namespace, sa, "list", "configmaps", None)
    assert not can_i(cluster, namespace, sa, "list", "pods", None)
    assert not can_i(cluster, namespace, sa, "create", "pods", app_ns)
    assert not can_i(cluster, namespace, sa, "update", "ingresses", app_ns)
    # One Service per Gateway (gatewayClass.listenerPorts): made beside the chart's only.
    assert can_i(cluster, namespace, sa, "create", "services", namespace)
    assert can_i(cluster, namespace, sa, "delete", "services", namespace)
    assert not can_i(cluster, namespace, sa, "create", "services", app_ns)


def test_scoped_role_is_enough_and_no_more(helm, cluster, namespace, tmp_path, stacks):
    """controller.scope.enabled: the controller watches its release namespace only (Roles), and
    Secrets elsewhere are out of its reach."""
    other = namespace + "-other"
    cluster.create_namespace(other)
    cluster.apply(harness.tls_secret("elsewhere", b"x", b"y", namespace=other))
    objs = install_without_workload(helm, cluster, namespace, {"controller": {"scope": {"enabled": True}}})
    assert not any(o["kind"] == "ClusterRole" and any(
        "secrets" in r["resources"] for r in o["rules"]) for o in objs)
    sa = one(objs, "ServiceAccount")["metadata"]["name"]
    token = service_account_token(cluster, namespace, sa)
    kubeconfig = token_kubeconfig(cluster, tmp_path / "sa.kubeconfig", token)
    s = run_pod(objs, kubeconfig, tmp_path, stacks)
    assert flags_of(s.controller.argv[1:-1])["watch-namespace"] == namespace
    exercise(cluster, s, namespace, namespace, "tidegate-leader")
    # Secrets outside the watched namespace: neither one by name nor the list; nor cluster-wide.
    assert as_token(cluster, token, "GET", f"/api/v1/namespaces/{other}/secrets/elsewhere") == 403
    assert as_token(cluster, token, "GET", f"/api/v1/namespaces/{other}/secrets") == 403
    assert as_token(cluster, token, "GET", "/api/v1/secrets") == 403
    assert as_token(cluster, token, "GET", f"/apis/networking.k8s.io/v1/namespaces/{other}"
                    "/ingresses") == 403
    assert as_token(cluster, token, "GET", f"/api/v1/namespaces/{other}/configmaps") == 403
    assert as_token(cluster, token, "GET", f"/api/v1/namespaces/{namespace}/configmaps") == 200
    assert as_token(cluster, token, "GET", f"/api/v1/namespaces/{namespace}/pods") == 403
    assert as_token(cluster, token, "POST", f"/api/v1/namespaces/{namespace}/pods", {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
        "spec": {"containers": [{"name": "x", "image": "x"}]}}) == 403
    assert as_token(cluster, token, "POST", f"/api/v1/namespaces/{other}/events", {
        "apiVersion": "v1", "kind": "Event", "metadata": {"name": "x"},
        "involvedObject": {"kind": "Pod", "name": "x", "namespace": other}}) == 403
    # Within its namespace the reads it needs work.
    assert as_token(cluster, token, "GET", f"/api/v1/namespaces/{namespace}/secrets/late") == 200
    assert can_i(cluster, namespace, sa, "list", "ingressclasses", None)
