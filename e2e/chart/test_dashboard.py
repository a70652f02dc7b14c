"""deploy/grafana/tidegate.json names only series and labels the data plane exports.

A real data plane is sent traffic of every kind the dashboard shows (plain requests, 404s, a
substituted body, rate-limited requests; the connection, TLS and WebSocket series exist from the
start), then scraped; every PromQL query of the dashboard (panels and template
variables) is taken apart and each metric name and label checked against the scrape."""

from __future__ import annotations

import json
import re

import harness
import kubeapps
from harness import ingress, path, rule

import chartlib

# Prometheus' own target labels, present on every scraped series; and the histogram bucket label.
TARGET_LABELS = {"instance", "job"}
KEYWORDS = {
    # aggregations, functions and keywords of PromQL that look like identifiers
    "sum", "min", "max", "avg", "count", "stddev", "stdvar", "topk", "bottomk", "quantile",
    "count_values", "group", "by", "without", "on", "ignoring", "group_left", "group_right",
    "and", "or", "unless", "bool", "offset", "rate", "irate", "increase", "delta", "idelta",
    "histogram_quantile", "scalar", "vector", "abs", "clamp_min", "clamp_max", "time",
    "label_values", "label_replace", "sort", "sort_desc", "absent", "changes", "resets",
    "deriv", "predict_linear", "timestamp", "max_over_time", "min_over_time", "avg_over_time",
    "last_over_time", "round", "ceil", "floor", "inf", "nan",
}


def queries(dashboard: dict) -> list[tuple[str, str]]:
    """(where, PromQL) for every panel target and every query variable."""
    out = []

    def panels(ps):
        for p in ps:
            for t in p.get("targets", []):
                out.append((f"panel {p['title']!r}", t["expr"]))
            panels(p.get("panels", []))
    panels(dashboard["panels"])
    for v in dashboard["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            out.append((f"variable ${v['name']}", q))
    return out


def parse(expr: str) -> tuple[set[str], set[str]]:
    """(metric names, label names) used by a PromQL expression (the subset the dashboard uses:
    selectors, by/without/on/ignoring/group_* lists, label_values())."""
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)         # string literals
    e = re.sub(r"\[[^\]]*\]", "", e)                      # range selectors [$__rate_interval]
    labels: set[str] = set()
    for m in re.finditer(r"\{([^}]*)\}", e):              # label matchers
        labels |= set(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", m.group(1)))
    e = re.sub(r"\{[^}]*\}", " ", e)
    for m in re.finditer(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)", e):
        labels |= {x.strip() for x in m.group(1).split(",") if x.strip()}
    e = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    m = re.match(r"\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$", e)
    if m:
        labels.add(m.group(2))
        e = m.group(1)
    names = set()
    for m in re.finditer(r"(?<![\w$.])([A-Za-z_:][A-Za-z0-9_:]*)\b(?!\s*\()", e):
        tok = m.group(1)
        if tok not in KEYWORDS and not re.fullmatch(r"[0-9.e]+", tok):
            names.add(tok)
    return names, labels


def scrape_names(body: str) -> dict[str, set[str]]:
    """{series name: label names} from a Prometheus text exposition."""
    out: dict[str, set[str]] = {}
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{([^}]*)\})?\s", line)
        assert m, line
        labels = set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', m.group(3) or ""))
        out.setdefault(m.group(1), set()).update(labels)
    return out


def test_the_parser_sees_names_and_labels():
    names, labels = parse('histogram_quantile(0.99, sum by (le, host) (rate(a_bucket{x=~"$x",y!="1"}'
                          '[$__rate_interval]))) / on (z) b_total and c')
    assert names == {"a_bucket", "b_total", "c"}, names
    assert labels == {"le", "host", "x", "y", "z"}, labels
    assert parse('label_values(m{ns=~"$ns"}, ingress)') == ({"m"}, {"ns", "ingress"})


def test_dashboard_queries_name_only_exported_series(stack):
    site = kubeapps.HtmlSite(b"<p>Visit shop.example.com today.</p>")
    try:
        stack.manifests.write(
            "app.yaml",
            harness.service("site"),
            harness.endpoint_slice("site-1", "site", [site.host], site.port),
            ingress("plain", [rule("plain.example", path("/", "site"))]),
            ingress("sub", [rule("sub.example", path("/", "site"))],
                    annotations={"tidegate.io/substitutions":
                                 "- {match: 'shop\\.example\\.com', replace: 'shop.test'}\n"}),
            ingress("limited", [rule("limited.example", path("/", "site"))],
                    annotations={"tidegate.io/limit-rps": "1",
                                 "tidegate.io/limit-burst-multiplier": "1"}))
        stack.wait_route("/", "sub.example", lambda r: r.status == 200 and b"shop.test" in r.body,
                         what="the substituted page")
        for host in ("plain.example", "sub.example", "nowhere.example"):
            for _ in range(3):
                stack.get("/", host)
        statuses = [stack.get("/", "limited.example").status for _ in range(10)]
        assert 429 in statuses or 503 in statuses, statuses
    finally:
        site.stop()
    status, body = stack.dataplane.admin("/metrics")
    assert status == 200
    exported = scrape_names(body)
    assert "tidegate_rate_limited_requests_total" in exported, sorted(exported)
    assert "tidegate_substitution_input_bytes_total" in exported, sorted(exported)

    dashboard = json.loads(chartlib.DASHBOARD.read_text())
    found, used = problems(dashboard, exported)
    assert not found, "\n".join(found)
    harness.report(f"dashboard: {len(queries(dashboard))} queries over {len(used)} series, all "
                   f"exported (of {len(exported)} scraped)")


def problems(dashboard: dict, exported: dict[str, set[str]]) -> tuple[list[str], set[str]]:
    """(what the dashboard names that `exported` lacks, the series it uses)."""
    out = []
    used: set[str] = set()
    for where, expr in queries(dashboard):
        names, labels = parse(expr)
        if not names:
            out.append(f"{where}: no series found in {expr!r}")
        for n in sorted(names - set(exported)):
            out.append(f"{where}: series {n} is not exported")
        known = set().union(*(exported.get(n, set()) for n in names)) | TARGET_LABELS
        for label in sorted(labels - known):
            out.append(f"{where}: label {label!r} is not on {sorted(names)}")
        used |= names
    return out, used


def test_the_check_catches_unknown_series_and_labels():
    exported = scrape_names('a_total{ingress="x",host="y"} 1\nb 2\n')
    dash = {"panels": [{"title": "p", "targets": [
        {"expr": 'sum by (ingress) (rate(a_total[5m]))'},
        {"expr": 'sum by (pod) (rate(a_total{host="y"}[5m]))'},
        {"expr": 'rate(nginx_ingress_controller_requests[5m])'}]}],
        "templating": {"list": [{"type": "query", "name": "v",
                                 "query": {"query": "label_values(b, namespace)"}}]}}
    found, _ = problems(dash, exported)
    assert found == ["panel 'p': label 'pod' is not on ['a_total']",
                     "panel 'p': series nginx_ingress_controller_requests is not exported",
                     "variable $v: label 'namespace' is not on ['b']"], found
