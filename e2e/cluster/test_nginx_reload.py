"""The scale test's reload-based peer (nginx_reload.py) on loopback, with a stand-in kubectl:
it starts from one list of the slices, follows the watch from that list's resourceVersion,
reloads (`nginx -t`, then `nginx -s reload` to its own master) only when a Service's ready
endpoints change, and lists again when the watch's resourceVersion has expired. Needs nginx
(Debian's package), not the cluster."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nginx_reload import NGINX, Host, NginxReload

FAKE_KUBECTL = """#!/usr/bin/env python3
import json, sys, time
scenario = json.load(open(sys.argv[1]))
args = sys.argv[2:]
with open(scenario["calls"], "a") as f:
    f.write(json.dumps(args) + "\\n")
if "--raw" in args:
    n = sum(1 for line in open(scenario["calls"]) if "--raw" in line)
    watches = scenario["watches"]
    for event in watches[min(n, len(watches)) - 1]:
        print(json.dumps(event), flush=True)
        time.sleep(0.2)
    if n >= len(watches):
        time.sleep(60)
else:
    lists = scenario["lists"]
    n = sum(1 for line in open(scenario["calls"]) if "--raw" not in line)
    print(json.dumps(lists[min(n, len(lists)) - 1]))
"""


def endpoint_slice(name: str, service: str, ready: list[str], rv: str,
                   not_ready: tuple[str, ...] = ()) -> dict:
    return {"metadata": {"name": name, "resourceVersion": rv,
                         "labels": {"kubernetes.io/service-name": service}},
            "ports": [{"port": 8080}],
            "endpoints": [{"addresses": [a], "conditions": {"ready": a not in not_ready}}
                          for a in ready + list(not_ready)]}


def slice_list(rv: str, *items: dict) -> dict:
    return {"metadata": {"resourceVersion": rv}, "items": list(items)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def peer(tmp_path):
    if not Path(NGINX).exists():
        pytest.skip(f"{NGINX} is not installed")
    started = []

    def make(lists: list[dict], watches: list[list[dict]]) -> tuple[NginxReload, Path]:
        calls = tmp_path / "calls"
        scenario = tmp_path / "scenario.json"
        scenario.write_text(json.dumps({"calls": str(calls), "lists": lists,
                                        "watches": watches}))
        kubectl = tmp_path / "kubectl"
        kubectl.write_text(FAKE_KUBECTL)
        kubectl.chmod(0o755)
        cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key), "-out",
                        str(cert), "-days", "1", "-subj", "/CN=a.example"],
                       check=True, capture_output=True)
        n = NginxReload(tmp_path / "nginx", f"127.0.0.1:{free_port()}", cert, key,
                        [Host("a.example", "svc-a"), Host("b.example", "svc-b"),
                         Host("c.example", "svc-c")],
                        [sys.executable, str(kubectl), str(scenario)], "ns")
        started.append(n)
        return n, calls
    yield make
    for n in started:
        n.stop()
        assert not n.leftover_pids()


def wait_until(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_starts_from_the_list_and_reloads_only_on_a_change(peer):
    n, calls = peer(
        [slice_list("10", endpoint_slice("a-1", "svc-a", ["10.0.0.1"], "5"),
                    endpoint_slice("b-1", "svc-b", ["10.0.1.1"], "6"),
                    endpoint_slice("x-1", "svc-other", ["10.0.9.1"], "7"))],
        [[{"type": "MODIFIED", "object": endpoint_slice("x-1", "svc-other", ["10.0.9.2"], "11")},
          # A second slice of svc-b: one more endpoint, one reload.
          {"type": "ADDED", "object": endpoint_slice("b-2", "svc-b", ["10.0.1.2"], "12")},
          # The same ready set (a not-ready endpoint added): no reload.
          {"type": "MODIFIED", "object": endpoint_slice("b-2", "svc-b", ["10.0.1.2"], "13",
                                                        not_ready=("10.0.1.3",))},
          {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "14"}}},
          {"type": "DELETED", "object": endpoint_slice("a-1", "svc-a", [], "15")}]])
    n.start()
    # nginx runs with the list's endpoints before any event.
    assert n._endpoints == {"svc-a": ["10.0.0.1:8080"], "svc-b": ["10.0.1.1:8080"],
                            "svc-c": []}
    master = n.master_pid()
    wait_until(lambda: len(n.reloads) == 2 and n._resource_version == "15")
    time.sleep(0.3)
    assert [r.services for r in n.reloads] == [["svc-b"], ["svc-a"]]
    assert not n.errors, n.errors
    assert n._endpoints == {"svc-a": [], "svc-b": ["10.0.1.1:8080", "10.0.1.2:8080"],
                            "svc-c": []}
    upstreams = (n.workdir / "upstreams.conf").read_text()
    assert "server 10.0.1.2:8080;" in upstreams and "10.0.1.3" not in upstreams
    assert "upstream ns-svc-a-80 {\n    server 127.0.0.1:1 down;" in upstreams
    # The watch went on from the list's resourceVersion: nothing replayed.
    watch = [json.loads(line) for line in calls.read_text().splitlines() if "--raw" in line]
    assert len(watch) == 1 and watch[0][-1].endswith("watch=1&allowWatchBookmarks=true"
                                                     "&resourceVersion=10"), watch
    # `nginx -s reload` reached our master: the same master, reconfigured twice.
    assert n.master_pid() == master
    log = (n.workdir / "logs" / "error.log").read_text()
    assert log.count("reconfiguring") >= 2, log
    # One certificate, in the default server only.
    conf = (n.workdir / "nginx.conf").read_text()
    assert conf.count("ssl_certificate ") == 1 and "default_server" in conf


def test_an_expired_watch_lists_again(peer):
    n, calls = peer(
        [slice_list("10", endpoint_slice("a-1", "svc-a", ["10.0.0.1"], "5")),
         slice_list("30", endpoint_slice("a-1", "svc-a", ["10.0.0.1", "10.0.0.2"], "25"))],
        [[{"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}],
         [{"type": "MODIFIED", "object": endpoint_slice("a-1", "svc-a", ["10.0.0.3"], "31")}]])
    n.start()
    wait_until(lambda: len(n.reloads) == 2)
    assert n._endpoints["svc-a"] == ["10.0.0.3:8080"]
    watch = [json.loads(line)[-1] for line in calls.read_text().splitlines() if "--raw" in line]
    assert watch[0].endswith("resourceVersion=10") and watch[1].endswith("resourceVersion=30")
    assert not n.errors, n.errors
