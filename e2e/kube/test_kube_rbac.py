"""The controller as a user holding exactly the ClusterRole of deploy/clusterrole.yaml: every
feature works and nothing is refused; and as a user whose role lacks SubstitutionRuleSets: it
routes, warns once, and has no rule sets (a 403 is "not there for us", as a missing CRD is)."""

from __future__ import annotations

import json
import subprocess
import time

import harness
import pytest
from kubeapps import (SET_RULES, HtmlSite, assert_nothing_refused, html_app,
                      install_substitution_crd, kube_ingress, rule_set, start, wait_body,
                      wait_events, with_set)

ROLE_FILE = harness.REPO / "deploy" / "clusterrole.yaml"
PUBLISHED = "192.0.2.250"


@pytest.fixture
def site():
    s = HtmlSite()
    yield s
    s.stop()


def documented_role(cluster) -> dict:
    """deploy/clusterrole.yaml as JSON (kubectl reads the YAML: no YAML library needed)."""
    return json.loads(cluster.kubectl("create", "--dry-run=client", "-o", "json", "-f",
                                      str(ROLE_FILE)))


def grant(cluster, role: dict, user: str) -> None:
    """Applies `role` and binds it to `user` (cluster-wide), replacing what the user had."""
    name = role["metadata"]["name"]
    cluster.apply(role, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": f"{user}-e2e"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]})


def test_documented_role_is_enough(cluster, namespace, site, kube_stack_factory, tmp_path):
    install_substitution_crd(cluster)
    grant(cluster, documented_role(cluster), "tidegate-controller")
    kubeconfig = cluster.write_kubeconfig(tmp_path / "ctl.kubeconfig",
                                          as_user="tidegate-controller")
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace, "--publish-address",
                                           PUBLISHED, "--election-lease-seconds", "3"],
                                 kubeconfig=kubeconfig))
    cluster.apply(rule_set("common", namespace, SET_RULES),
                  *html_app(namespace, site, "rbac.example", with_set("common")))
    # Lists and watches (the rule set included), the Lease, the status, the Events.
    wait_body(s, "rbac.example", b"<p>Visit shop.clone.test today, OWN WORDS.</p>")
    # After its Service is known (applied together, the Ingress could come first and get a
    # "service not found" Event of its own).
    cluster.apply(kube_ingress("odd", namespace, "odd.example", "site",
                               annotations={"tidegate.io/use-regex": "maybe"}))
    harness.wait_until(
        lambda: cluster.kubectl("get", "ingress", "site", "-n", namespace, "-o",
                                "jsonpath={.status.loadBalancer.ingress[0].ip}") == PUBLISHED,
        15, "our address in the Ingress's status")
    wait_events(cluster, namespace, "odd", lambda ev: len(ev) == 1, what="an Event on odd")
    # A Secret fetched by name (get) when an Ingress starts naming it.
    cluster.apply(harness.tls_secret("late", b"not a certificate", b"not a key",
                                     namespace=namespace),
                  harness.with_tls(kube_ingress("odd", namespace, "odd.example", "site"),
                                   (["odd.example"], "late")))
    wait_events(cluster, namespace, "odd",
                lambda ev: any("spec.tls[0]" in e["message"] for e in ev),
                what="an Event about the unusable certificate (the Secret was read)")
    log = s.controller.log()
    assert_nothing_refused(log)


def test_role_without_rule_sets_routes_and_warns_once(cluster, namespace, site,
                                                      kube_stack_factory, tmp_path):
    install_substitution_crd(cluster)
    role = documented_role(cluster)
    role["metadata"]["name"] = "tidegate-restricted-e2e"
    role["rules"] = [r for r in role["rules"] if "tidegate.io" not in r["apiGroups"]]
    assert len(role["rules"]) == len(documented_role(cluster)["rules"]) - 1
    grant(cluster, role, "tidegate-restricted")
    kubeconfig = cluster.write_kubeconfig(tmp_path / "restricted.kubeconfig",
                                          as_user="tidegate-restricted")
    cluster.apply(rule_set("common", namespace, SET_RULES),
                  *html_app(namespace, site, "restricted.example", with_set("common")))
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace,
                                           "--crd-recheck-interval", "1"],
                                 kubeconfig=kubeconfig))
    # Routes, with the Ingress's own rules only.
    wait_body(s, "restricted.example", b"<p>Visit shop.example.com today, OWN WORDS.</p>")
    s.controller.wait_for_log(r"warn kube: list SubstitutionRuleSet in \S+ forbidden \(403 .*"
                              r"grant get, list and watch on substitutionrulesets\.tidegate\.io",
                              timeout=5)
    time.sleep(2.5)  # a few rechecks
    assert s.controller.log().count("forbidden (403") == 1, s.controller.log()[-3000:]


def test_only_the_kubeconfig_ca_vouches_for_the_api_server(cluster, kube_stack_factory, tmp_path,
                                                             monkeypatch):
    """A kubeconfig that names a CA makes it the only one trusted for the API server, as client-go
    does: the system's CA bundle (here SSL_CERT_FILE, which OpenSSL reads as the bundle) may hold
    the server's real CA and still not be believed. Then, with the kubeconfig's CA right and the
    bundle wrong, the controller connects."""
    other = tmp_path / "other-ca"
    other.mkdir()
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
                    "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=not-the-cluster-ca"],
                   cwd=other, check=True, capture_output=True)
    config = json.loads(cluster.write_kubeconfig(tmp_path / "kubeconfig").read_text())
    config["clusters"][0]["cluster"]["certificate-authority"] = str(other / "ca.crt")
    wrong = tmp_path / "wrong-ca.kubeconfig"
    wrong.write_text(json.dumps(config))

    monkeypatch.setenv("SSL_CERT_FILE", str(cluster.pki / "ca.crt"))
    s = kube_stack_factory(cluster, kubeconfig=wrong)
    s.start_dataplane()
    s.start_controller()
    harness.wait_until(lambda: "failed" in s.controller.log(), 15,
                       "the controller to report that it cannot list")
    time.sleep(1)
    log = s.controller.log()
    assert "list " in log and "failed" in log, log[-2000:]
    assert "certificate" in log.lower() or "handshake" in log.lower() or "ssl" in log.lower(), \
        log[-2000:]
    assert not s.dataplane.ready(), "configured through an API server it must not trust"

    monkeypatch.setenv("SSL_CERT_FILE", str(other / "ca.crt"))
    good = kube_stack_factory(cluster)
    good.start_dataplane()
    good.start_controller()
    good.dataplane.wait_ready(timeout=30)
