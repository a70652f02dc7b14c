"""Observability on the real processes: /metrics after a configuration push, the access log
writer connecting to a collector given with --access-log-socket, losing it and reconnecting, and
the access log layouts (a text template, a JSON field list, a bad layout refused at start).
Per-request series and access log lines come from the request path."""

from __future__ import annotations

import http.client
import json
import re
import socket
import tempfile
import threading
from pathlib import Path

import pytest

import harness
from harness import ingress, path, rule, scrape_metrics, service_with_backend, wait_until

# Every test runs over HTTP/1.1 and over HTTP/2 (conftest.over_both_protocols).
pytestmark = pytest.mark.usefixtures("over_both_protocols")


scrape = scrape_metrics


def test_metrics_follow_configuration_pushes(stack):
    b = stack.backend("b")
    stack.manifests.write("app.yaml", *service_with_backend("svc-b", b),
                          ingress("app", [rule("app.example.com", path("/", "svc-b"))]))
    stack.wait_backend("/", "app.example.com", "b")
    m = scrape(stack.dataplane)
    assert m["tidegate_config_generation"] == stack.dataplane.version()
    assert m["tidegate_config_acks_total"] >= 1
    assert m["tidegate_config_nacks_total"] == 0
    assert m["tidegate_config_last_apply_timestamp_seconds"] > 1.6e9
    endpoints = {k: v for k, v in m.items() if k.startswith("tidegate_upstream_endpoints{")}
    assert any(re.fullmatch(r'tidegate_upstream_endpoints\{upstream="default/svc-b:[^"]+"\}', k)
               and v == 1 for k, v in endpoints.items()), endpoints
    # The rest of the surface is there from the start.
    for name in ("tidegate_connections_active", "tidegate_tls_handshakes_total",
                 "tidegate_websocket_tunnels_open", "tidegate_access_log_written_lines_total",
                 "tidegate_metrics_label_sets"):
        assert name in m, name


class UnixCollector:
    """Accepts connections on a Unix socket and reads whatever arrives."""

    def __init__(self, path: Path):
        self.path = path
        self.accepted = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.sock.settimeout(0.05)  # close() does not wake a blocked accept(): poll a flag
        self.stopping = False
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        while not self.stopping:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.accepted += 1
            self.conns.append(c)

    def close(self):
        self.stopping = True
        self.thread.join(5)
        # The listener goes first: a writer reconnects at once when its connection closes, and
        # must find nothing to connect to (one connect per collector is what the tests count).
        self.sock.close()
        self.path.unlink()
        for c in self.conns:
            c.close()


def test_access_log_writer_reconnects_to_a_restarted_collector(stack_factory):
    folder = Path(tempfile.mkdtemp(prefix="tg-e2e-log-"))
    sock = folder / "collector.sock"
    s = stack_factory()
    s.dataplane.argv += ["--access-log-socket", f"unix:{sock}"]
    first = UnixCollector(sock)
    s.start_dataplane()
    wait_until(lambda: first.accepted == 1, 5, "the data plane to connect to the collector")
    wait_until(lambda: scrape(s.dataplane)["tidegate_access_log_collector_connected"] == 1, 5,
               "collector_connected == 1")

    first.close()
    wait_until(lambda: scrape(s.dataplane)["tidegate_access_log_collector_connected"] == 0, 5,
               "the writer to notice the collector left")
    wait_until(lambda: scrape(s.dataplane)["tidegate_access_log_connect_failures_total"] >= 1, 5,
               "a failed reconnection attempt")

    second = UnixCollector(sock)
    try:
        wait_until(lambda: second.accepted == 1, 10, "the data plane to reconnect")
        m = scrape(s.dataplane)
        assert m["tidegate_access_log_connects_total"] == 2
        assert m["tidegate_access_log_disconnects_total"] == 1
        # SIGTERM: the writer stops with the workers and the process exits 0.
        assert s.shutdown().get("dataplane") == 0
    finally:
        second.close()


def test_each_request_is_counted_and_logged(stack):
    """The request path records every exchange: a counter cell per route/method/status class,
    duration histograms, and one JSON access log line with the route, the upstream and the
    path without its query string."""
    b = stack.backend("b")
    stack.manifests.write("app.yaml", *service_with_backend("svc-b", b),
                          ingress("obs", [rule("obs.example.com", path("/", "svc-b"))]))
    stack.wait_backend("/", "obs.example.com", "b")

    def requests_cell(m, status):
        return sum(v for k, v in m.items()
                   if k.startswith("tidegate_requests_total{") and 'ingress="obs"' in k
                   and 'namespace="default"' in k and 'service="svc-b"' in k
                   and 'method="GET"' in k and f'status="{status}"' in k)
    # An exchange is counted when it ends, which can be just after the client has read the
    # answer: the baseline waits for wait_backend's one 2xx to be counted.
    def baseline():
        m = scrape(stack.dataplane)
        return m if requests_cell(m, "2xx") == 1 else None
    before = wait_until(baseline, 5, "wait_backend's request counted")
    log_start = stack.dataplane.log_size()

    for i in range(5):
        r = stack.get(f"/item/{i}?token=secret{i}", host="obs.example.com",
                      headers={"X-Request-ID": f"req-obs-{i}"})
        assert r.status == 200
    r = stack.get("/nowhere", host="unknown.example.com")
    assert r.status == 404

    def counted():
        m = scrape(stack.dataplane)
        return m if requests_cell(m, "2xx") - requests_cell(before, "2xx") == 5 else None
    after = wait_until(counted, 5, "5 more 2xx requests counted for Ingress default/obs")
    durations = [v for k, v in after.items()
                 if k.startswith("tidegate_request_duration_seconds_count{")
                 and 'ingress="obs"' in k and 'namespace="default"' in k]
    assert durations and sum(durations) >= 5, durations

    def logged():
        lines = []
        for line in stack.dataplane.log(since=log_start).splitlines():
            if line.startswith("{"):
                rec = json.loads(line)
                if rec.get("request_id", "").startswith("req-obs-") or rec.get("status") == 404:
                    lines.append(rec)
        return lines if len(lines) >= 6 else None
    records = wait_until(logged, 5, "6 access log lines")
    by_id = {r["request_id"]: r for r in records if r.get("request_id")}
    rec = by_id["req-obs-3"]
    assert rec["path"] == "/item/3"  # the query string (a token here) is never logged
    assert "secret" not in json.dumps(records)
    assert rec["status"] == 200 and rec["method"] == "GET" and rec["host"] == "obs.example.com"
    assert rec["ingress"] == "default/obs" and rec["service"].startswith("default/svc-b:")
    assert re.fullmatch(r"127\.0\.0\.1:\d+", rec["upstream"]), rec
    assert rec["bytes_out"] > 0 and rec["bytes_in"] > 0
    assert rec["duration_ms"] >= rec["upstream_duration_ms"] >= 0, rec
    missing = [r for r in records if r.get("status") == 404]
    assert missing and missing[0]["upstream"] is None and missing[0]["ingress"] is None


def test_a_removed_ingress_leaves_metrics_and_its_label_set_is_freed(stack):
    """An Ingress that goes takes its series out of /metrics (as ingress-nginx drops a deleted
    Ingress's metrics); one created again under the same name starts from zero. The label sets
    in use go back down, so that churn never wears out the bound (docs/observability.md)."""
    b = stack.backend("b")
    stack.manifests.write("svc.yaml", *service_with_backend("svc-b", b))
    stack.manifests.write("keep.yaml", ingress("keep", [rule("keep.example.com",
                                                             path("/", "svc-b"))]))
    stack.manifests.write("gone.yaml", ingress("gone", [rule("gone.example.com",
                                                             path("/", "svc-b"))]))
    stack.wait_backend("/", "keep.example.com", "b")
    stack.wait_backend("/", "gone.example.com", "b")

    def cells(m, name):
        return sum(v for k, v in m.items()
                   if k.startswith("tidegate_requests_total{") and f'ingress="{name}"' in k)

    def counted(name, at_least):
        m = scrape(stack.dataplane)
        return m if cells(m, name) >= at_least else None
    for _ in range(3):
        assert stack.get("/", host="gone.example.com").status == 200
    m = wait_until(lambda: counted("gone", 4), 5, "the requests of Ingress gone counted")
    sets_with = m["tidegate_metrics_label_sets"]
    assert cells(m, "keep") >= 1

    stack.manifests.remove("gone.yaml")
    stack.wait_status("/", "gone.example.com", 404)

    def gone():
        m = scrape(stack.dataplane)
        return m if not any('ingress="gone"' in k for k in m) else None
    m = wait_until(gone, 5, "no series of Ingress gone")
    assert m["tidegate_metrics_label_sets"] == sets_with - 1
    assert cells(m, "keep") >= 1, "the others keep theirs"

    stack.manifests.write("gone.yaml", ingress("gone", [rule("gone.example.com",
                                                             path("/", "svc-b"))]))
    stack.wait_backend("/", "gone.example.com", "b")
    assert stack.get("/", host="gone.example.com").status == 200
    m = wait_until(lambda: counted("gone", 1), 5, "the new Ingress gone counted")
    assert cells(m, "gone") < 4, "a new series, not the removed one's"


TEXT_TEMPLATE = ('tg $remote_addr "$request_method $uri $server_protocol" $status $request_id '
                 '[$namespace/$ingress_name ${proxy_upstream_name}] $upstream_addr '
                 '"$http_user_agent" $request_time')


def one_route_stack(stack_factory, args: list[str], name: str, host: str):
    """A data plane started with `args`, the controller, and one Ingress routing `host` to a
    backend named `name`, ready."""
    s = stack_factory(dataplane_args=args)
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    b = s.backend(name)
    s.manifests.write("app.yaml", *service_with_backend(f"svc-{name}", b),
                      ingress(name, [rule(host, path("/", f"svc-{name}"))]))
    s.wait_backend("/", host, name)
    return s


def test_a_text_template_logs_the_expected_line(stack_factory):
    """--access-log text with --access-log-format: one line per request, laid out by the
    template, the query string left out and hostile header bytes escaped."""
    s = one_route_stack(stack_factory,
                        ["--access-log", "text", "--access-log-format", TEXT_TEMPLATE], "txt",
                        "txt.example.com")
    log_start = s.dataplane.log_size()
    # http.client sends str header values as Latin-1: \xff goes out as the byte 0xff.
    r = s.get("/item/7?token=s3cret", host="txt.example.com",
              headers={"X-Request-ID": "req-text-7", "User-Agent": 'evil"ua\xff'})
    assert r.status == 200
    # Over HTTP/2 the client (python3-h2) sends the value as UTF-8, which is logged as it is;
    # the lone 0xff byte of HTTP/1.1 is escaped.
    h2 = harness.PROTOCOL == "http2"
    proto, ff = ("HTTP/2\\.0", "\u00ff") if h2 else ("HTTP/1\\.1", r"\\xFF")
    want = re.compile(rf'^tg 127\.0\.0\.1 "GET /item/7 {proto}" 200 req-text-7 '
                      r'\[default/txt default-svc-txt-\w+\] 127\.0\.0\.1:\d+ '
                      rf'"evil\\x22ua{ff}" \d+\.\d{{3}}$', re.M)
    m = wait_until(lambda: want.search(s.dataplane.log(since=log_start)), 5,
                   "the text access log line of req-text-7")
    assert "s3cret" not in s.dataplane.log(since=log_start)
    assert not m.group(0).startswith("{")


def test_access_log_fields_select_and_order_the_json_keys(stack_factory):
    fields = ["status", "request_id", "path", "host", "user_agent"]
    s = one_route_stack(stack_factory, ["--access-log-fields", ",".join(fields)], "fld",
                        "fld.example.com")
    log_start = s.dataplane.log_size()
    r = s.get("/fields?x=1", host="fld.example.com",
              headers={"X-Request-ID": "req-fields", "User-Agent": "e2e/1"})
    assert r.status == 200

    def logged():
        for line in s.dataplane.log(since=log_start).splitlines():
            if line.startswith("{") and '"req-fields"' in line:
                return json.loads(line, object_pairs_hook=lambda pairs: pairs)
        return None
    pairs = wait_until(logged, 5, "the JSON access log line of req-fields")
    assert [k for k, _ in pairs] == fields
    assert dict(pairs) == {"status": 200, "request_id": "req-fields", "path": "/fields",
                           "host": "fld.example.com", "user_agent": "e2e/1"}


def test_the_logged_client_is_the_forwarded_one_only_behind_a_trusted_proxy(stack_factory):
    """client ($remote_addr) is the address X-Forwarded-For names when the peer is one of
    --trusted-proxies, as with nginx's realip module; peer ($realip_remote_addr) is always the
    connection's peer."""
    s = one_route_stack(stack_factory, ["--trusted-proxies", "127.0.0.1", "--access-log-fields",
                                        "request_id,client,peer"], "peer", "peer.example.com")
    log_start = s.dataplane.log_size()
    for rid, source in (("via-trusted", "127.0.0.1"), ("via-untrusted", "127.0.0.2")):
        conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10,
                                          source_address=(source, 0))
        conn.request("GET", "/", headers={"Host": "peer.example.com", "X-Request-ID": rid,
                                          "X-Forwarded-For": "203.0.113.9, 10.1.2.3"})
        assert conn.getresponse().status == 200
        conn.close()

    def logged():
        lines = {}
        for line in s.dataplane.log(since=log_start).splitlines():
            if line.startswith("{") and '"via-' in line:
                record = json.loads(line)
                lines[record["request_id"]] = record
        return lines if len(lines) == 2 else None
    lines = wait_until(logged, 5, "both access log lines")
    # From the trusted peer, the rightmost untrusted X-Forwarded-For hop is the client.
    assert lines["via-trusted"] == {"request_id": "via-trusted", "client": "10.1.2.3",
                                    "peer": "127.0.0.1"}
    # From an untrusted peer the header is not believed.
    assert lines["via-untrusted"] == {"request_id": "via-untrusted", "client": "127.0.0.2",
                                      "peer": "127.0.0.2"}



@pytest.mark.parametrize("args, message", [
    (["--access-log-format", 'x "$request_uri"'],
     "--access-log-format: unknown variable $request_uri at byte 3: the query string is never "
     "logged"),
    (["--access-log-format", "$status $nope"], "--access-log-format: unknown variable $nope"),
    (["--access-log-format", "${status"], "has no closing '}'"),
    (["--access-log-fields", "status,nope"], "--access-log-fields: unknown field 'nope'"),
    (["--access-log", "json", "--access-log-format", "$status"],
     "--access-log-format is a text template"),
])
def test_a_bad_access_log_layout_stops_the_data_plane_at_start(stack_factory, args, message):
    s = stack_factory(dataplane_args=args)
    s.dataplane.start()
    s.dataplane.expected_exit = True
    wait_until(lambda: s.dataplane.returncode() is not None, 5, "the data plane to exit")
    assert s.dataplane.returncode() == 2
    assert message in s.dataplane.log(), s.dataplane.log()[-2000:]
