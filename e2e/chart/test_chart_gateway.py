"""The chart with gatewayClass.enabled and a controller name of one's own, against a real
kube-apiserver with the Gateway API CRDs installed: the GatewayClass it renders (validated by
the API server's own schema), the controller's --gateway-controller-name, and the RBAC rules for
the Gateway API kinds, as rendered and as the real controller uses them: run with the
ServiceAccount's token, it accepts the class, gives a Gateway its own Service, routes an
HTTPRoute through that Gateway's listener and writes every status, with nothing refused."""

from __future__ import annotations

import pytest

import chartlib
import harness
import kubeapps
from chartlib import container, flags_of, one
from test_chart_rbac import (install_without_workload, run_pod, service_account_token,
                             stacks, token_kubeconfig)  # noqa: F401 (stacks: a fixture)

CONTROLLER = "example.com/edge-gateway"
GROUP = "gateway.networking.k8s.io"


@pytest.fixture
def gateway_crds(cluster):
    """The Gateway API CRDs the controller watches, for this test only: the other chart tests
    run without them."""
    kubeapps.install_gateway_crds(cluster)
    yield
    for plural in kubeapps.GATEWAY_CRDS:
        cluster.kubectl("delete", "crd", f"{plural}.{GROUP}", "--ignore-not-found",
                        "--wait=true", "--timeout=60s")


def values(class_name: str) -> dict:
    return {"gatewayClass": {"enabled": True, "name": class_name, "controllerName": CONTROLLER}}


def gateway_rules(rules: list[dict]) -> list[tuple]:
    return [(tuple(r["resources"]), tuple(r["verbs"])) for r in rules
            if r.get("apiGroups") == [GROUP]]


def test_gateway_class_flag_and_rbac_render(helm, cluster, namespace, gateway_crds):
    class_name = "edge-" + namespace
    objs = chartlib.dry_run(cluster, helm.template(namespace=namespace,
                                                   values=values(class_name)).stdout)
    gc = one(objs, "GatewayClass")
    assert gc["apiVersion"] == f"{GROUP}/v1"
    assert gc["metadata"]["name"] == class_name
    assert gc["spec"]["controllerName"] == CONTROLLER
    assert gc["metadata"]["labels"]["app.kubernetes.io/name"] == "tidegate"
    ctl = flags_of(container(one(objs, "Deployment"), "controller")["args"])
    assert ctl["gateway-controller-name"] == CONTROLLER
    # One address per Gateway by default: the listener ports and the published Service.
    assert ctl["gateway-listener-ports"] == "20000-20999"
    assert ctl["publish-service"] == f"{namespace}/tidegate"
    # Cluster-scoped: the classes and their status; the watched kinds (cluster-wide without
    # scope mode): list and watch, get where status is written (read before each write), and
    # patch on the status subresources.
    assert gateway_rules(one(objs, "ClusterRole")["rules"]) == [
        (("gatewayclasses",), ("get", "list", "watch")),
        (("gatewayclasses/status",), ("patch",)),
        (("gateways", "httproutes", "grpcroutes", "referencegrants", "backendtlspolicies"),
         ("list", "watch")),
        (("gateways", "httproutes", "grpcroutes", "backendtlspolicies"), ("get",)),
        (("gateways/status", "httproutes/status", "grpcroutes/status",
          "backendtlspolicies/status"), ("patch",)),
    ]
    # The Services per Gateway, in the release namespace only (the published Service's, whose
    # rules join the Lease's Role there).
    publish = one(objs, "Role", "tidegate")
    assert publish["metadata"]["namespace"] == namespace
    assert {"apiGroups": [""], "resources": ["services"],
            "verbs": ["get", "list", "create", "patch", "delete"]} in publish["rules"]

    # Scope mode: the watched Gateway API kinds move to the namespace's Role; the classes stay
    # in the ClusterRole (they are cluster-scoped).
    scoped = chartlib.dry_run(cluster, helm.template(namespace=namespace, values={
        **values(class_name), "controller": {"scope": {"enabled": True}}}).stdout)
    assert gateway_rules(one(scoped, "ClusterRole")["rules"]) == [
        (("gatewayclasses",), ("get", "list", "watch")), (("gatewayclasses/status",), ("patch",))]
    assert len(gateway_rules(one(scoped, "Role", "tidegate-watch")["rules"])) == 3

    # The default controller name needs no flag (the controller's default); disabled: no class.
    default = helm.template(namespace=namespace,
                            values={"gatewayClass": {"enabled": True}}).stdout
    assert "--gateway-controller-name" not in default
    assert "controllerName: tidegate.io/gateway-controller" in default
    assert "kind: GatewayClass" not in helm.template(namespace=namespace).stdout


def test_gateway_api_through_the_charts_rbac(helm, cluster, namespace, gateway_crds, tmp_path,
                                             stacks):  # noqa: F811
    app_ns = namespace + "-app"
    cluster.create_namespace(app_ns)
    class_name = "edge-" + namespace
    objs = install_without_workload(helm, cluster, namespace, values(class_name))
    sa = one(objs, "ServiceAccount")["metadata"]["name"]
    kubeconfig = token_kubeconfig(cluster, tmp_path / "sa.kubeconfig",
                                  service_account_token(cluster, namespace, sa))
    s = run_pod(objs, kubeconfig, tmp_path, stacks)
    assert f"--gateway-controller-name={CONTROLLER}" in s.controller.argv

    host = kubeapps.backend_address()
    b = s.backend("gw-site", host, harness.free_port(host))
    cluster.apply(
        kubeapps.kube_service("site", app_ns),
        harness.endpoint_slice("site-1", "site", [b.host], b.port, namespace=app_ns),
        {"apiVersion": f"{GROUP}/v1", "kind": "Gateway",
         "metadata": {"name": "gw", "namespace": app_ns},
         "spec": {"gatewayClassName": class_name,
                  "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}]}},
        {"apiVersion": f"{GROUP}/v1", "kind": "HTTPRoute",
         "metadata": {"name": "site", "namespace": app_ns},
         "spec": {"parentRefs": [{"name": "gw"}], "hostnames": ["gw.chart.example"],
                  "rules": [{"backendRefs": [{"name": "site", "port": 80}]}]}})
    base = f"/apis/{GROUP}/v1"

    def get(path: str) -> dict:
        status, body = cluster.api("GET", path)
        assert status == 200, (status, body)
        return body

    def conditions(obj: dict) -> dict:
        return {c["type"]: c for c in obj.get("conditions", [])}

    # The class is ours by the chart's controller name, and accepted.
    harness.wait_until(lambda: conditions(get(f"{base}/gatewayclasses/{class_name}")
                                          .get("status", {})).get("Accepted", {})
                       .get("status") == "True", 30, "the GatewayClass to be accepted")

    # The Gateway's own Service, beside the chart's, leads to its listener on the data plane.
    def gateway_service():
        items = get(f"/api/v1/namespaces/{namespace}/services?labelSelector="
                    "app.kubernetes.io%2Fmanaged-by%3Dtidegate")["items"]
        return items[0] if len(items) == 1 else None
    svc = harness.wait_until(gateway_service, 30, "the Gateway's Service")
    assert svc["metadata"]["annotations"]["tidegate.io/gateway"] == f"{app_ns}/gw"
    (port,) = svc["spec"]["ports"]
    assert port["port"] == 80 and 20000 <= port["targetPort"] <= 20999

    def served() -> bool:
        try:
            r = harness.request(port["targetPort"], "GET", "/", "gw.chart.example", timeout=3.0)
        except OSError:
            return False
        return r.status == 200 and r.header("X-Backend") == "gw-site"
    harness.wait_until(served, 30, "the HTTPRoute through the Gateway's listener")

    def programmed() -> dict | None:
        gw = get(f"{base}/namespaces/{app_ns}/gateways/gw")
        st = gw.get("status", {})
        return gw if conditions(st).get("Programmed", {}).get("status") == "True" else None
    gw = harness.wait_until(programmed, 30, "the Gateway to be programmed")
    assert gw["status"]["addresses"] == [{"type": "IPAddress", "value": svc["spec"]["clusterIP"]}]
    assert [li["attachedRoutes"] for li in gw["status"]["listeners"]] == [1]

    def route_parent() -> dict | None:
        parents = get(f"{base}/namespaces/{app_ns}/httproutes/site").get("status", {}).get(
            "parents", [])
        return parents[0] if parents else None
    parent = harness.wait_until(route_parent, 30, "the HTTPRoute's status")
    assert parent["controllerName"] == CONTROLLER
    assert conditions(parent)["Accepted"]["status"] == "True"
    assert conditions(parent)["ResolvedRefs"]["status"] == "True"

    log = s.controller.log()
    kubeapps.assert_nothing_refused(log)
