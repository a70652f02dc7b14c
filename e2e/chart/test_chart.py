"""helm/tidegate: lint, render with default and non-default values, validate what it renders
against a real kube-apiserver (server-side dry run), check the pod's flags against the binaries'
own --help, the schema's refusals, and the copies that must not drift (crds/, the dashboard,
deploy/tidegate.yaml)."""

from __future__ import annotations

import json

import pytest

import chartlib
import harness
from chartlib import by_kind, container, flags_of, one

# A non-default set touching most templates: a DaemonSet on host ports 80/443 (so
# NET_BIND_SERVICE and the sysctl), NodePort with fixed nodePorts, one watched namespace (Roles),
# the dashboard, a ServiceMonitor where its CRD is served, extra args and env for both containers.
DAEMONSET_VALUES = {
    "kind": "DaemonSet",
    "podAnnotations": {"example.com/team": "edge"},
    "podLabels": {"example.com/tier": "edge"},
    "priorityClassName": "system-cluster-critical",
    "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
                     "effect": "NoSchedule"}],
    "nodeSelector": {"kubernetes.io/os": "linux", "example.com/edge": "true"},
    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64", "arm64"]}]}]}}},
    "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}},
    "controller": {"scope": {"enabled": True}, "electionID": "edge-leader",
                   "extraArgs": {"crd-recheck-interval": 10, "nginx-annotations": True},
                   "extraEnv": [{"name": "TZ", "value": "UTC"}], "logLevel": "debug"},
    "dataplane": {"containerPorts": {"http": 80, "https": 443}, "workers": 2, "drainTimeout": 20,
                  "hostPort": {"enabled": True},
                  "trustedProxies": ["10.0.0.0/8", "192.168.0.0/16"], "accessLog": "text",
                  "extraArgs": {"access-log-queue-bytes": 2097152},
                  "extraEnv": [{"name": "MALLOC_ARENA_MAX", "value": "2"}],
                  "resources": {"requests": {"cpu": "200m", "memory": "128Mi"},
                                "limits": {"cpu": "2", "memory": "512Mi"}}},
    "service": {"type": "NodePort", "externalTrafficPolicy": "Local",
                "nodePorts": {"http": 30080, "https": 30443}},
    "ingressClass": {"default": True},
    "metrics": {"serviceMonitor": {"enabled": True, "additionalLabels": {"release": "prom"}},
                "dashboard": {"enabled": True}},
}

# Another: several replicas with an HPA and its PDB, a ClusterIP Service, a default certificate,
# a ServiceMonitor asked for where its CRD is not served (skipped, not a failed install),
# topology spread, no events, no metrics.
DEPLOYMENT_VALUES = {
    "replicaCount": 3,
    "autoscaling": {"enabled": True, "minReplicas": 2, "maxReplicas": 6,
                    "targetCPUUtilizationPercentage": None,  # null removes the default
                    "targetMemoryUtilizationPercentage": 75},
    "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                   "whenUnsatisfiable": "ScheduleAnyway",
                                   "labelSelector": {"matchLabels": {
                                       "app.kubernetes.io/name": "tidegate"}}}],
    "service": {"type": "ClusterIP", "ports": {"http": 8080, "https": 8443}},
    "controller": {"events": False, "updateStatusOnShutdown": True,
                   "publishService": {"pathOverride": "edge/public-lb"}},
    "dataplane": {"defaultCertificate": {"secretName": "wildcard-tls"}, "preStopSleepSeconds": 0},
    "terminationGracePeriodSeconds": 60,
    "metrics": {"enabled": False, "serviceMonitor": {"enabled": True}},
    "imagePullSecrets": [{"name": "regcred"}],
    "image": {"tag": "test", "pullPolicy": "Never"},
}

# A minimal stand-in for prometheus-operator's CRD (written here, not copied), so that the API
# server accepts a ServiceMonitor in the dry run; its own schema is not what is being tested.
SERVICE_MONITOR_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "servicemonitors.monitoring.coreos.com"},
    "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
             "names": {"kind": "ServiceMonitor", "listKind": "ServiceMonitorList",
                       "plural": "servicemonitors", "singular": "servicemonitor"},
             "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                 "openAPIV3Schema": {"type": "object",
                                     "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture
def service_monitor_crd(cluster):
    cluster.apply(SERVICE_MONITOR_CRD)
    cluster.kubectl("wait", "--for=condition=Established",
                    "crd/servicemonitors.monitoring.coreos.com", "--timeout=30s")


@pytest.fixture(scope="module")
def edge_namespace(cluster):
    """The namespace of DEPLOYMENT_VALUES' published Service."""
    cluster.create_namespace("edge")
    return "edge"


def render_and_validate(helm, cluster, namespace, values=None, api_versions=()) -> list[dict]:
    out = helm.template(namespace=namespace, values=values, api_versions=api_versions).stdout
    return chartlib.dry_run(cluster, out)


def pod_spec(objs) -> dict:
    workloads = [o for o in objs if o["kind"] in ("Deployment", "DaemonSet")]
    assert len(workloads) == 1, [o["kind"] for o in workloads]
    return workloads[0]["spec"]["template"]["spec"]


def check_common_pod(spec: dict, drain: int, pre_stop: int) -> None:
    """What every rendering must keep: the shared socket, the probes on the admin port, a grace
    longer than the drain, and the restricted security context."""
    names = [c["name"] for c in spec["containers"]]
    assert names == ["controller", "dataplane"], names
    ctl, dp = spec["containers"]
    control = [v for v in spec["volumes"] if v["name"] == "control"]
    assert control and "emptyDir" in control[0], spec["volumes"]
    for c in (ctl, dp):
        assert {"name": "control", "mountPath": "/run/tidegate"} in c["volumeMounts"]
    assert flags_of(ctl["args"])["dataplane-socket"] == "/run/tidegate/control.sock"
    dpf = flags_of(dp["args"])
    assert dpf["control-socket"] == "/run/tidegate/control.sock"
    admin = [p for p in dp["ports"] if p["name"] == "admin"][0]["containerPort"]
    host, _, port = dpf["admin-listen"].rpartition(":")
    assert host in ("0.0.0.0", "[::]") and int(port) == admin, dpf["admin-listen"]
    assert dp["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert dp["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert dp["livenessProbe"]["httpGet"]["port"] == "admin"
    assert int(dpf["drain-timeout"]) == drain
    assert spec["terminationGracePeriodSeconds"] > drain + pre_stop
    if pre_stop:
        assert dp["lifecycle"]["preStop"] == {"sleep": {"seconds": pre_stop}}
    else:
        assert "lifecycle" not in dp
    psc = spec["securityContext"]
    assert psc["runAsNonRoot"] is True and psc["runAsUser"] == 65532
    assert psc["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in (ctl, dp):
        sc = c["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False and sc["readOnlyRootFilesystem"] is True
        assert sc["runAsNonRoot"] is True and sc["capabilities"]["drop"] == ["ALL"]
        assert sc["seccompProfile"] == {"type": "RuntimeDefault"}
    assert "add" not in ctl["securityContext"]["capabilities"]


def test_lint_strict(helm):
    for values in (None, DAEMONSET_VALUES, DEPLOYMENT_VALUES):
        r = helm.lint(values)
        assert "1 chart(s) linted, 0 chart(s) failed" in r.stdout, r.stdout
        assert "[WARNING]" not in r.stdout and "[ERROR]" not in r.stdout, r.stdout


def test_defaults_validate_against_the_api_server(helm, cluster, namespace):
    objs = render_and_validate(helm, cluster, namespace)
    kinds = sorted(o["kind"] for o in objs)
    assert kinds == sorted(["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role",
                            "RoleBinding", "Service", "Service", "Deployment", "IngressClass"]), kinds
    dep = one(objs, "Deployment")
    assert dep["spec"]["replicas"] == 1
    spec = pod_spec(objs)
    check_common_pod(spec, drain=30, pre_stop=5)
    assert spec["serviceAccountName"] == "tidegate"
    ctl, dp = spec["containers"]
    assert dp["image"] == ctl["image"] == f"docker.io/tidegate/tidegate:{chart_app_version()}"
    assert "add" not in dp["securityContext"]["capabilities"]  # 8080/8443: no capability
    assert "sysctls" not in spec["securityContext"]
    cf = flags_of(ctl["args"])
    assert cf["publish-service"] == f"{namespace}/tidegate"
    assert cf["election-id"] == "tidegate-leader" and cf["election-namespace"] == namespace
    assert cf["ingress-class"] == "tidegate"
    assert cf["controller-name"] == "tidegate.io/ingress-controller"
    assert "watch-namespace" not in cf
    svc = one(objs, "Service", "tidegate")
    assert svc["spec"]["type"] == "LoadBalancer"
    assert [(p["name"], p["port"], p["targetPort"]) for p in svc["spec"]["ports"]] == [
        ("http", 80, "http"), ("https", 443, "https")]
    ic = one(objs, "IngressClass")
    assert ic["metadata"]["name"] == "tidegate"
    assert ic["spec"]["controller"] == "tidegate.io/ingress-controller"
    assert "ingressclass.kubernetes.io/is-default-class" not in ic["metadata"].get("annotations", {})
    ann = spec_annotations(dep)
    assert ann["prometheus.io/scrape"] == "true" and ann["prometheus.io/port"] == "10254"
    assert flags_of(dp["args"])["metrics"] == "on"


def spec_annotations(workload: dict) -> dict:
    return workload["spec"]["template"]["metadata"].get("annotations", {})


def chart_app_version() -> str:
    for line in (chartlib.CHART / "Chart.yaml").read_text().splitlines():
        if line.startswith("appVersion:"):
            return line.split(":", 1)[1].strip().strip('"')
    raise AssertionError("no appVersion")


def test_daemonset_nodeport_scoped_validates(helm, cluster, namespace, service_monitor_crd):
    objs = render_and_validate(helm, cluster, namespace, DAEMONSET_VALUES,
                               api_versions=(chartlib.SERVICE_MONITOR_API,))
    k = by_kind(objs)
    assert "Deployment" not in k and "HorizontalPodAutoscaler" not in k
    assert "PodDisruptionBudget" not in k
    ds = one(objs, "DaemonSet")
    spec = pod_spec(objs)
    check_common_pod(spec, drain=20, pre_stop=5)
    ctl, dp = spec["containers"]
    # Ports below 1024: the capability, and the sysctl that lets a non-root process use it.
    assert dp["securityContext"]["capabilities"]["add"] == ["NET_BIND_SERVICE"]
    assert {"name": "net.ipv4.ip_unprivileged_port_start", "value": "80"} in \
        spec["securityContext"]["sysctls"]
    assert {p["name"]: p.get("hostPort") for p in dp["ports"]} == {"http": 80, "https": 443,
                                                                   "admin": None}
    dpf = flags_of(dp["args"])
    assert dpf["http-listen"] == "0.0.0.0:80" and dpf["https-listen"] == "0.0.0.0:443"
    assert dpf["workers"] == "2" and dpf["trusted-proxies"] == "10.0.0.0/8,192.168.0.0/16"
    assert dpf["access-log"] == "text" and dpf["access-log-queue-bytes"] == "2097152"
    assert {"name": "MALLOC_ARENA_MAX", "value": "2"} in dp["env"]
    assert dp["resources"]["limits"] == {"cpu": "2", "memory": "512Mi"}
    cf = flags_of(ctl["args"])
    assert cf["watch-namespace"] == namespace and cf["election-id"] == "edge-leader"
    assert cf["crd-recheck-interval"] == "10" and "nginx-annotations" in cf
    assert cf["log-level"] == "debug" and {"name": "TZ", "value": "UTC"} in ctl["env"]
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["nodeSelector"]["example.com/edge"] == "true"
    assert spec["tolerations"][0]["key"] == "node-role.kubernetes.io/control-plane"
    assert "nodeAffinity" in spec["affinity"]
    assert ds["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == 1
    assert ds["spec"]["template"]["metadata"]["labels"]["example.com/tier"] == "edge"
    assert spec_annotations(ds)["example.com/team"] == "edge"
    svc = one(objs, "Service", "tidegate")
    assert svc["spec"]["type"] == "NodePort" and svc["spec"]["externalTrafficPolicy"] == "Local"
    assert {p["name"]: p["nodePort"] for p in svc["spec"]["ports"]} == {"http": 30080,
                                                                         "https": 30443}
    assert svc["spec"]["ports"][0]["targetPort"] == "http"
    ic = one(objs, "IngressClass")
    assert ic["metadata"]["annotations"]["ingressclass.kubernetes.io/is-default-class"] == "true"
    # Scope mode: the watched kinds in a Role; the ClusterRole only has the cluster-scoped kinds
    # (IngressClasses, GatewayClasses and their status, Namespaces for allowedRoutes selectors).
    cr = one(objs, "ClusterRole")
    assert [r["resources"] for r in cr["rules"]] == [["ingressclasses"], ["gatewayclasses"],
                                                     ["gatewayclasses/status"], ["namespaces"]]
    watch = one(objs, "Role", "tidegate-watch")
    assert watch["metadata"]["namespace"] == namespace
    assert any("ingresses" in r["resources"] for r in watch["rules"])
    sm = one(objs, "ServiceMonitor")
    assert sm["metadata"]["labels"]["release"] == "prom"
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    metrics_svc = one(objs, "Service", "tidegate-metrics")
    for key, value in sm["spec"]["selector"]["matchLabels"].items():
        assert metrics_svc["metadata"]["labels"][key] == value
    cm = one(objs, "ConfigMap", "tidegate-dashboard")
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(cm["data"]["tidegate.json"]) == json.loads(chartlib.DASHBOARD.read_text())


def test_deployment_hpa_clusterip_validates(helm, cluster, namespace, edge_namespace):
    objs = render_and_validate(helm, cluster, namespace, DEPLOYMENT_VALUES)
    k = by_kind(objs)
    assert "ServiceMonitor" not in k  # asked for, but the API server does not serve it here
    dep = one(objs, "Deployment")
    assert "replicas" not in dep["spec"] or dep["spec"]["replicas"] == 1  # the HPA owns it
    hpa = one(objs, "HorizontalPodAutoscaler")
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 6)
    assert [m["resource"]["name"] for m in hpa["spec"]["metrics"]] == ["memory"]
    assert hpa["spec"]["scaleTargetRef"]["name"] == dep["metadata"]["name"]
    pdb = one(objs, "PodDisruptionBudget")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == dep["spec"]["selector"]["matchLabels"]
    spec = pod_spec(objs)
    check_common_pod(spec, drain=30, pre_stop=0)
    assert spec["terminationGracePeriodSeconds"] == 60
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]
    assert spec["topologySpreadConstraints"][0]["topologyKey"] == "kubernetes.io/hostname"
    ctl, dp = spec["containers"]
    assert dp["image"] == "docker.io/tidegate/tidegate:test" and dp["imagePullPolicy"] == "Never"
    cf = flags_of(ctl["args"])
    assert "disable-events" in cf and "update-status-on-shutdown" in cf
    assert cf["publish-service"] == "edge/public-lb"
    dpf = flags_of(dp["args"])
    assert dpf["metrics"] == "off"
    assert dpf["default-ssl-certificate"] == "/etc/tidegate/default-certificate/tls.crt"
    assert {"name": "default-certificate", "secret": {"secretName": "wildcard-tls",
                                                      "defaultMode": 420}} in spec["volumes"]
    assert "prometheus.io/scrape" not in spec_annotations(dep)
    assert "tidegate-metrics" not in [o["metadata"]["name"] for o in k["Service"]]
    svc = one(objs, "Service", "tidegate")
    assert svc["spec"]["type"] == "ClusterIP"
    assert all("nodePort" not in p for p in svc["spec"]["ports"])
    # No Events: no rule for them. The published Service is read in its own namespace.
    cr = one(objs, "ClusterRole")
    assert not any("events" in r["resources"] for r in cr["rules"])
    publish = one(objs, "Role", "tidegate-publish")
    assert publish["metadata"]["namespace"] == "edge"
    # With gatewayClass.listenerPorts (the default), the controller also keeps one Service per
    # Gateway in that namespace.
    assert publish["rules"] == [{"apiGroups": [""], "resources": ["services"],
                                 "resourceNames": ["public-lb"], "verbs": ["get"]},
                                {"apiGroups": [""], "resources": ["services"],
                                 "verbs": ["get", "list", "create", "patch", "delete"]}]


def test_every_flag_exists_in_the_binaries(helm, cluster, namespace, service_monitor_crd,
                                           edge_namespace):
    """The chart passes only flags the binaries define (their --help), and the schema's list of
    extraArgs flags is theirs too."""
    real = {"controller": chartlib.help_flags("tidegate-controller"),
            "dataplane": chartlib.help_flags("tidegate-dataplane")}
    for values in (None, DAEMONSET_VALUES, DEPLOYMENT_VALUES):
        objs = render_and_validate(helm, cluster, namespace, values,
                                   api_versions=(chartlib.SERVICE_MONITOR_API,))
        for c in pod_spec(objs)["containers"]:
            unknown = set(flags_of(c["args"])) - real[c["name"]]
            assert not unknown, f"{c['name']}: flags the binary does not have: {unknown}"
    schema = json.loads((chartlib.CHART / "values.schema.json").read_text())
    for name in ("controller", "dataplane"):
        allowed = set(schema["properties"][name]["properties"]["extraArgs"]["properties"])
        assert allowed <= real[name], allowed - real[name]
        # Every real flag but those the chart owns (the socket, the source) and the one-shot
        # migration check is allowed.
        owned = {"controller": {"dataplane-socket", "manifests", "help",
                                "check-nginx-annotations"},
                 "dataplane": {"control-socket", "help"}}[name]
        assert real[name] - owned <= allowed, (real[name] - owned) - allowed


BAD_VALUES = [
    (["kind=StatefulSet"], "at '/kind': value must be one of 'Deployment', 'DaemonSet'"),
    (["service.type=External"], "at '/service/type': value must be one of 'LoadBalancer'"),
    (["replicaCount=-1"], "at '/replicaCount': minimum: got -1, want 0"),
    (["replicas=2"], "additional properties 'replicas' not allowed"),  # a typo: unknown keys fail
    (["image.pullPolicy=Sometimes"], "at '/image/pullPolicy': value must be one of"),
    (["controller.extraArgs.no-such-flag=1"],
     "at '/controller/extraArgs': additional properties 'no-such-flag' not allowed"),
    (["dataplane.containerPorts.http=70000"], "at '/dataplane/containerPorts/http': maximum"),
    (["dataplane.bindAddress=localhost"], "'localhost' is not valid ipv4"),
    (["service.externalTrafficPolicy=local"], "at '/service/externalTrafficPolicy'"),
    (["dataplane.accessLog=xml"], "at '/dataplane/accessLog': value must be one of"),
    (["controller.publishService.pathOverride=just-a-name"],
     "at '/controller/publishService/pathOverride': 'just-a-name' does not match"),
    (["terminationGracePeriodSeconds=20"],
     "terminationGracePeriodSeconds (20) must be longer than dataplane.preStopSleepSeconds + "
     "dataplane.drainTimeout (35)"),
    (["kind=DaemonSet", "autoscaling.enabled=true"], "autoscaling.enabled needs kind: Deployment"),
    (["autoscaling.enabled=true", "autoscaling.minReplicas=5", "autoscaling.maxReplicas=2"],
     "autoscaling.maxReplicas (2) is below autoscaling.minReplicas (5)"),
    (["dataplane.admin.port=8080"], "dataplane.admin.port must differ"),
]


@pytest.mark.parametrize("sets,message", BAD_VALUES, ids=[" ".join(s) for s, _ in BAD_VALUES])
def test_schema_refuses_bad_values(helm, sets, message):
    r = helm.template(*sets, check=False)
    assert r.returncode != 0, f"{sets} was accepted:\n{r.stdout[:2000]}"
    assert message in r.stderr, r.stderr


def test_chart_crds_are_the_top_level_crds():
    top = sorted(p.name for p in (harness.REPO / "crds").glob("*.yaml"))
    chart = sorted(p.name for p in (chartlib.CHART / "crds").glob("*.yaml"))
    assert top == chart, (top, chart)
    for name in top:
        assert (harness.REPO / "crds" / name).read_bytes() == \
            (chartlib.CHART / "crds" / name).read_bytes(), \
            f"helm/tidegate/crds/{name} differs from crds/{name}: copy crds/{name} over it"


def test_chart_dashboard_is_deploy_grafana():
    assert (chartlib.CHART / "dashboards" / "tidegate.json").read_bytes() == \
        chartlib.DASHBOARD.read_bytes(), \
        "helm/tidegate/dashboards/tidegate.json differs: copy deploy/grafana/tidegate.json over it"


def test_deploy_manifest_is_helm_template(helm, cluster):
    want = chartlib.render_deploy_manifest(helm)
    have = chartlib.DEPLOY.read_text()
    assert have == want, ("deploy/tidegate.yaml drifted from `helm template` with default "
                          "values: run e2e/chart/render-deploy.sh")
    # And the API server accepts every object of it (a dry run does not create the Namespace
    # the others are in, so it is made first).
    cluster.create_namespace("tidegate")
    objs = chartlib.dry_run(cluster, have)
    kinds = {o["kind"] for o in objs}
    assert {"Namespace", "CustomResourceDefinition", "Deployment", "Service", "IngressClass",
            "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
            "ServiceAccount"} <= kinds, kinds


def test_helm_install_notes_and_uninstall(helm, cluster, namespace):
    """A real `helm install` against the API server (no kubelet: the pod is not run, that is the
    one-node cluster's test): NOTES.txt tells how to reach the ingress and the first Ingress; the
    ServiceMonitor asked for without its CRD is reported, not a failure; `helm upgrade` to a new
    extraArg changes the pod template; `helm uninstall` leaves nothing of ours but the CRD
    (Helm's convention)."""
    cluster.kubectl("delete", "crd", "servicemonitors.monitoring.coreos.com", "--ignore-not-found",
                    "--wait=true", "--timeout=30s")
    kc = ["--kubeconfig", str(cluster.kubeconfig), "--namespace", namespace]
    r = helm.run("install", "tidegate", str(chartlib.CHART), *kc, "--set",
                 "service.type=NodePort,metrics.serviceMonitor.enabled=true,"
                 "metrics.dashboard.enabled=true,controller.scope.enabled=true")
    notes = r.stdout
    for want in ("STATUS: deployed", f"kubectl -n {namespace} get service tidegate",
                 "jsonpath='{.spec.ports[?(@.name==\"http\")].nodePort}'",
                 "ingressClassName: tidegate", "kubectl create ingress demo --class=tidegate",
                 f"watching namespace {namespace} only",
                 "does not serve\nmonitoring.coreos.com/v1 ServiceMonitor",
                 f"ConfigMap {namespace}/tidegate-dashboard"):
        assert want in notes, f"{want!r} not in NOTES:\n{notes}"
    selector = "app.kubernetes.io/instance=tidegate"
    kinds = ("deployments,services,serviceaccounts,roles,rolebindings,configmaps")
    have = cluster.kubectl("get", kinds, "-n", namespace, "-l", selector, "-o", "name").split()
    assert sorted(have) == sorted([
        "deployment.apps/tidegate", "service/tidegate", "service/tidegate-metrics",
        "serviceaccount/tidegate", "role.rbac.authorization.k8s.io/tidegate",
        "role.rbac.authorization.k8s.io/tidegate-watch",
        "rolebinding.rbac.authorization.k8s.io/tidegate",
        "rolebinding.rbac.authorization.k8s.io/tidegate-watch",
        "configmap/tidegate-dashboard"]), have
    cluster_scoped = "clusterroles,clusterrolebindings,ingressclasses"
    assert sorted(cluster.kubectl("get", cluster_scoped, "-l", selector, "-o", "name").split()) == [
        "clusterrole.rbac.authorization.k8s.io/tidegate",
        "clusterrolebinding.rbac.authorization.k8s.io/tidegate",
        "ingressclass.networking.k8s.io/tidegate"]
    # An upgrade to a changed value changes the pod template (the cluster's test rolls the pod).
    before = json.loads(cluster.kubectl("get", "deployment", "tidegate", "-n", namespace, "-o", "json"))
    helm.run("upgrade", "tidegate", str(chartlib.CHART), *kc, "--reuse-values", "--set",
             "controller.extraArgs.crd-recheck-interval=10")
    after = json.loads(cluster.kubectl("get", "deployment", "tidegate", "-n", namespace, "-o", "json"))
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert "--crd-recheck-interval=10" in container(after, "controller")["args"]
    assert after["spec"]["selector"] == before["spec"]["selector"]
    helm.run("uninstall", "tidegate", *kc, "--wait", "--timeout", "60s")
    left = cluster.kubectl("get", kinds + ",poddisruptionbudgets,horizontalpodautoscalers",
                           "-n", namespace, "-l", selector, "-o", "name").split()
    left += cluster.kubectl("get", cluster_scoped, "-l", selector, "-o", "name").split()
    assert left == [], left
    assert cluster.kubectl("get", "crd", "substitutionrulesets.tidegate.io", "-o", "name").strip()


def grants(rules: list[dict]) -> set[tuple[str, str, str]]:
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
            for v in rule["verbs"]}


def test_deploy_clusterrole_grants_what_the_chart_grants(helm, cluster, namespace):
    """deploy/clusterrole.yaml (one ClusterRole, for installs by hand and e2e/kube) and the
    chart's roles grant the same (group, resource, verb) triples; the chart only narrows some
    by namespace and resourceNames."""
    objs = render_and_validate(helm, cluster, namespace)
    chart = set()
    for o in objs:
        if o["kind"] in ("ClusterRole", "Role"):
            chart |= grants(o["rules"])
    documented = chartlib.dry_run(cluster, (harness.REPO / "deploy" / "clusterrole.yaml").read_text())
    assert grants(documented[0]["rules"]) == chart, (grants(documented[0]["rules"]) ^ chart)


@pytest.mark.parametrize("sets", [(), ("dataplane.containerPorts.http=80",
                                       "dataplane.containerPorts.https=443")],
                         ids=["defaults", "ports 80 and 443"])
def test_pod_meets_the_restricted_pod_security_standard(helm, cluster, namespace, sets):
    """The API server's PodSecurity admission judges the pod template: in a namespace labelled
    to warn at `restricted`, it warns about any workload whose pods would be refused there. The
    chart's pod passes, also with ports below 1024 (NET_BIND_SERVICE is the one capability
    `restricted` allows; the unprivileged-port sysctl is a safe one)."""
    cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/warn=restricted",
                    "pod-security.kubernetes.io/warn-version=latest")
    warnings: list[str] = []
    objs = chartlib.dry_run(cluster, helm.template(*sets, namespace=namespace).stdout, warnings)
    assert any(o["kind"] == "Deployment" for o in objs)
    assert not [w for w in warnings if "PodSecurity" in w], warnings
    # The check is live: a pod that breaks the standard is warned about.
    bad: list[str] = []
    chartlib.dry_run(cluster, helm.template("dataplane.securityContext.allowPrivilegeEscalation=true",
                                            namespace=namespace).stdout, bad)
    assert any('would violate PodSecurity "restricted:latest"' in w and
               "allowPrivilegeEscalation" in w for w in bad), bad
