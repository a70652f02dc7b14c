"""SubstitutionRuleSets from a real kube-apiserver (issue 5): the CRD installed from crds/, an
Ingress naming a rule set, its rules applied by the data plane; the set changed or deleted
without touching the Ingress; an invalid rule reported as an Event on the Ingress; and a
controller started before the CRD exists, which routes normally and picks the rule sets up once
the CRD is installed."""

from __future__ import annotations

import re
import time

import harness
import pytest
from kubeapps import (SET_RULES, SUBSTITUTION_CRD_NAME, HtmlSite, html_app,
                      install_substitution_crd, rule_set, start, wait_body, wait_events,
                      with_set)


@pytest.fixture
def site():
    s = HtmlSite()
    yield s
    s.stop()


@pytest.fixture
def crd(cluster):
    """The CRD in the session's cluster (an apply: a no-op when a test already installed it)."""
    install_substitution_crd(cluster)


def test_rule_set_applies_follows_changes_and_deletion(cluster, crd, namespace, site,
                                                       kube_stack_factory):
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace, "--log-level",
                                           "debug"]))
    cluster.apply(rule_set("common", namespace, SET_RULES),
                  *html_app(namespace, site, "srs.example", with_set("common")))
    # The set's rule first, then the Ingress's own.
    wait_body(s, "srs.example", b"<p>Visit shop.clone.test today, OWN WORDS.</p>")
    version = cluster.kubectl("get", "ingress", "site", "-n", namespace, "-o",
                              "jsonpath={.metadata.resourceVersion}")

    # A rule set no Ingress names costs no rebuild.
    cluster.apply(rule_set("unused", namespace, SET_RULES))
    s.controller.wait_for_log(r"SubstitutionRuleSet changed: no effect", timeout=10)

    # The set changes; the Ingress is not touched.
    cluster.apply(rule_set("common", namespace, [
        {"match": r"shop\.example\.com", "replace": "v2.clone.test"},
        {"match": "today", "replace": "TODAY", "flags": "i"}]))
    wait_body(s, "srs.example", b"<p>Visit v2.clone.test TODAY, OWN WORDS.</p>")
    assert cluster.kubectl("get", "ingress", "site", "-n", namespace, "-o",
                           "jsonpath={.metadata.resourceVersion}") == version

    # Deleted: the Ingress keeps routing with its own rules, and its Event says the set is gone.
    cluster.delete("substitutionruleset", "common", namespace)
    wait_body(s, "srs.example", b"<p>Visit shop.example.com today, OWN WORDS.</p>")
    gone = f"SubstitutionRuleSet {namespace}/common not found"
    events = wait_events(cluster, namespace, "site",
                         lambda ev: any(gone in e["message"] for e in ev),
                         what="an Event saying the rule set is missing")
    # (Applied together at the start, the Ingress may have reached the controller before its
    # set or its Service: such a moment has Events of its own.)
    missing = [e for e in events if gone in e["message"]][-1]
    assert missing["type"] == "Warning" and missing["reason"] == "InvalidConfiguration", missing

    # Created again: applied again.
    cluster.apply(rule_set("common", namespace, SET_RULES))
    wait_body(s, "srs.example", b"<p>Visit shop.clone.test today, OWN WORDS.</p>")


def test_invalid_rule_in_a_set_is_an_event_and_the_others_apply(cluster, crd, namespace, site,
                                                                 kube_stack_factory):
    s = start(kube_stack_factory(cluster, ["--watch-namespace", namespace]))
    # 'o*' passes the CRD's schema (a string of at least one byte) but can match the empty
    # string: the controller drops it; (?=x) is a lookahead, which RE2 lacks.
    cluster.apply(rule_set("mixed", namespace, [
        {"match": "o*", "replace": "0"},
        *SET_RULES,
        {"match": "(?=t)today", "replace": "x"}]),
        *html_app(namespace, site, "bad-set.example", with_set("mixed")))
    wait_body(s, "bad-set.example", b"<p>Visit shop.clone.test today, OWN WORDS.</p>")
    prefix = f"tidegate.io/substitution-rule-set: SubstitutionRuleSet {namespace}/mixed"

    def rule_events(ev):
        # Only the rule set's: applied together, the Ingress can reach the controller before its
        # Service, and the moment's "service not found" is an Event of its own.
        return [e for e in ev if e["message"].startswith(prefix)]
    events = rule_events(wait_events(cluster, namespace, "site",
                                     lambda ev: len(rule_events(ev)) >= 2,
                                     what="one Event per invalid rule"))
    messages = sorted(e["message"] for e in events)
    assert len(events) == 2, events
    assert all(e["reason"] == "InvalidConfiguration" for e in events), events
    assert messages[0].startswith(f'{prefix} spec.rules[0] (match "o*"): '), messages
    assert "empty string" in messages[0] and messages[0].endswith("; rule dropped"), messages
    assert messages[1].startswith(f'{prefix} spec.rules[2] (match "(?=t)today"): '), messages
    assert "lookahead" in messages[1], messages

    # Fixed in the set: every rule applies.
    cluster.apply(rule_set("mixed", namespace, [*SET_RULES,
                                                {"match": "today", "replace": "now"}]))
    wait_body(s, "bad-set.example", b"<p>Visit shop.clone.test now, OWN WORDS.</p>")


def test_without_the_crd_routes_and_picks_rule_sets_up_once_installed(own_cluster, site,
                                                                      kube_stack_factory):
    c = own_cluster
    ns = "nocrd"
    c.create_namespace(ns)
    c.apply(*html_app(ns, site, "nocrd.example", with_set("common")))
    s = start(kube_stack_factory(c, ["--watch-namespace", ns, "--crd-recheck-interval", "1",
                                     "--log-level", "debug"]))
    # Starts, routes, and applies the Ingress's own rules; the set is reported missing.
    s.dataplane.wait_ready(timeout=15)
    wait_body(s, "nocrd.example", b"<p>Visit shop.example.com today, OWN WORDS.</p>")
    log = s.controller.log()
    assert re.search(rf"{SUBSTITUTION_CRD_NAME} is not served \(404", log), log[-3000:]
    wait_events(c, ns, "site", lambda ev: any("not found" in e["message"] for e in ev),
                what="an Event saying the rule set is missing")

    # Not a hot loop: about one list a second, and said once at info level.
    start_size = s.controller.log_size()
    time.sleep(3.0)
    rechecks = re.findall(r"list SubstitutionRuleSet in nocrd: .* is not served",
                          s.controller.log(since=start_size))
    assert 1 <= len(rechecks) <= 5, rechecks
    said = re.findall(r"Z (\w+) kube: list SubstitutionRuleSet in nocrd: .* is not served",
                      s.controller.log())
    assert said[0] == "info" and set(said[1:]) == {"debug"}, said

    # The CRD arrives; the rule set is picked up without a restart.
    installed = time.monotonic()
    install_substitution_crd(c)
    c.apply(rule_set("common", ns, SET_RULES))
    wait_body(s, "nocrd.example", b"<p>Visit shop.clone.test today, OWN WORDS.</p>", timeout=20)
    harness.report(f"kube: CRD installed -> rule set applied in "
                   f"{time.monotonic() - installed:.1f} s (--crd-recheck-interval 1)")
    s.controller.wait_for_log(rf"{SUBSTITUTION_CRD_NAME} is served now", timeout=1)

    # The CRD is deleted (and with it the rule set): still routing, no substitution from it; the
    # watch is refused from then on, so the reflector relists and is back to rechecking.
    before = s.controller.log_size()
    c.kubectl("delete", "crd", SUBSTITUTION_CRD_NAME, "--wait=true", "--timeout=60s")
    wait_body(s, "nocrd.example", b"<p>Visit shop.example.com today, OWN WORDS.</p>", timeout=20)
    s.controller.wait_for_log(rf"info kube: list SubstitutionRuleSet in nocrd: "
                              rf"{SUBSTITUTION_CRD_NAME} is not served", timeout=20, since=before)
    assert not s.crashed()
