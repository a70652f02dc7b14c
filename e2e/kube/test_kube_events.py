"""Kubernetes Events on Ingresses, against a real API server: a problem the translator reports
about an Ingress (here an invalid annotation and an invalid regex) and a configuration the data
plane refused (NACK) become Warning Events on that Ingress, naming the field and the reason; a
problem that persists is not posted again on every sync; only the leader posts."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path

import harness
from kubeapps import (backends, ingress_events, kube_ingress, kube_service, kube_slice, start,
                      wait_events)


def test_invalid_ingress_gets_one_event_from_the_leader(cluster, namespace, kube_stack_factory):
    # A lease long enough that a busy machine cannot make the leadership change hands midway.
    args = ["--watch-namespace", namespace, "--election-lease-seconds", "15"]
    s1 = start(kube_stack_factory(cluster, args))
    s2 = start(kube_stack_factory(cluster, args))
    b, c = backends(s1, "ev", "ev2")
    bad = kube_ingress("bad", namespace, "bad.example", "ev",
                       annotations={"tidegate.io/use-regex": "maybe"})
    # The Service first, known to both controllers before the Ingress comes: applied together,
    # the Ingress can reach a controller before its Service does (separate watches), and the
    # moment's "service not found" is an Event of its own.
    cluster.apply(kube_service("ev", namespace), kube_slice("ev-1", "ev", namespace, [b]),
                  kube_ingress("first", namespace, "first.example", "ev"))
    for st in (s1, s2):
        st.wait_route("/", "first.example", lambda r: r.status == 200)
    cluster.apply(bad)
    events = wait_events(cluster, namespace, "bad", lambda ev: len(ev) >= 1,
                         what="an Event on Ingress bad")
    (e,) = events
    assert e["type"] == "Warning" and e["reason"] == "IgnoredConfiguration", e
    assert "tidegate.io/use-regex" in e["message"] and '"maybe"' in e["message"], e
    assert e["involvedObject"]["kind"] == "Ingress"
    uid = cluster.kubectl("get", "ingress", "bad", "-n", namespace, "-o", "jsonpath={.metadata.uid}")
    assert e["involvedObject"]["uid"] == uid, (e, uid)
    # kubectl shows it the usual ways.
    assert "IgnoredConfiguration" in cluster.kubectl("get", "events", "-n", namespace)
    assert "tidegate.io/use-regex" in cluster.kubectl("describe", "ingress", "bad", "-n", namespace)

    # Many rebuilds later (other Ingresses, endpoint changes), still that one Event, count 1,
    # from one of the two controllers.
    for i in range(3):
        cluster.apply(kube_ingress(f"ok{i}", namespace, f"ok{i}.example", "ev"),
                      kube_slice("ev-1", "ev", namespace, [b] if i % 2 else [b, c]))
        s1.wait_route("/", f"ok{i}.example", lambda r: r.status == 200)
    s1.wait_route("/", "bad.example", lambda r: r.status == 200)
    s2.wait_route("/", "bad.example", lambda r: r.status == 200)
    events = ingress_events(cluster, namespace, "bad")
    assert len(events) == 1 and events[0]["count"] == 1, events
    posting = [s for s in (s1, s2) if "events" in s.controller.log() and
               "IgnoredConfiguration" in s.controller.log()]
    assert len(posting) == 1, "only the leader posts"

    # A second problem: an invalid regex, an error naming the path.
    cluster.apply(kube_ingress("bad", namespace, "bad.example", "ev", path="/(",
                               annotations={"tidegate.io/use-regex": "true"}))
    events = wait_events(cluster, namespace, "bad",
                         lambda ev: any(x["reason"] == "InvalidConfiguration" for x in ev),
                         what="an InvalidConfiguration Event")
    (err,) = [x for x in events if x["reason"] == "InvalidConfiguration"]
    assert "spec.rules[0].http.paths[0]" in err["message"] and "invalid regex" in err["message"]

    # Fixed, then broken again: a new Event, not a refresh of the old one.
    cluster.apply(kube_ingress("bad", namespace, "bad.example", "ev"))
    for st in (s1, s2):
        st.wait_route("/", "bad.example", lambda r: r.status == 200)
    time.sleep(3)  # the leader's Event recorder sees the fix (it syncs within a second)
    cluster.apply(bad)
    wait_events(cluster, namespace, "bad",
                lambda ev: sum(x["reason"] == "IgnoredConfiguration" for x in ev) == 2,
                what="a second IgnoredConfiguration Event after the fix was undone")


class RefusingDataPlane:
    """A control-socket peer that speaks the protocol (docs/control-protocol.md) and refuses
    every configuration with a route on `refused_host`, as a data plane with a stricter check
    than the controller's would. It stands in for the data plane only: the API server is real."""

    def __init__(self, path: Path, refused_host: str):
        self.path = path
        self.refused_host = refused_host
        self.refusals = 0
        self.accepted = 0
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        path.parent.mkdir(parents=True, exist_ok=True)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.stopping = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping = True
        self.sock.close()

    def _serve(self):
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _session(self, conn):
        buf = b""
        serving = None  # hosts of the configuration we accepted
        with conn:
            while True:
                while len(buf) < 4 or len(buf) < 4 + int.from_bytes(buf[:4], "big"):
                    chunk = conn.recv(1 << 20)
                    if not chunk:
                        return
                    buf += chunk
                n = int.from_bytes(buf[:4], "big")
                msg, buf = json.loads(buf[4:4 + n]), buf[4 + n:]
                if msg["type"] == "hello":
                    answer = {"type": "hello_reply", "protocol": 1, "version": 0}
                else:
                    if msg["type"] == "snapshot":
                        hosts = {vh["host"] for vh in msg["config"].get("virtual_hosts", [])}
                    else:
                        d = msg["delta"]
                        hosts = (set(serving or ()) - set(d.get("remove_virtual_hosts", []))) | {
                            vh["host"] for vh in d.get("upsert_virtual_hosts", [])}
                    if self.refused_host in hosts:
                        self.refusals += 1
                        answer = {"type": "nack", "version": msg["version"],
                                  "reason": f"host {self.refused_host}: route refused by the "
                                            "test data plane"}
                    else:
                        self.accepted += 1
                        serving = hosts
                        answer = {"type": "ack", "version": msg["version"]}
                body = json.dumps(answer).encode()
                conn.sendall(len(body).to_bytes(4, "big") + body)


def test_nacked_ingress_gets_an_event_naming_the_field(cluster, namespace, kube_stack_factory):
    s = kube_stack_factory(cluster, ["--watch-namespace", namespace])
    plane = RefusingDataPlane(s.dataplane.socket_path, "refused.example")
    try:
        s.start_controller()
        b, c = backends(s, "nk", "nk2")
        cluster.apply(kube_service("nk", namespace), kube_slice("nk-1", "nk", namespace, [b]),
                      kube_ingress("fine", namespace, "fine.example", "nk"))
        harness.wait_until(lambda: plane.accepted >= 1, 15, "a first configuration accepted")
        cluster.apply(harness.ingress("two-rules", [
            harness.rule("other.example", harness.path("/", "nk")),
            harness.rule("refused.example", harness.path("/", "nk"))],
            namespace=namespace, ingress_class=harness.INGRESS_CLASS))
        # Counted: the refusals only (an Ingress that reached the controller before its Service
        # has a "service not found" Event of its own).
        def refusals(name: str) -> list[dict]:
            return [e for e in ingress_events(cluster, namespace, name)
                    if e["reason"] == "RejectedByDataPlane"]
        wait_events(cluster, namespace, "two-rules",
                    lambda ev: any(e["reason"] == "RejectedByDataPlane" for e in ev),
                    what="an Event on the refused Ingress")
        (e,) = refusals("two-rules")
        assert e["type"] == "Warning" and e["reason"] == "RejectedByDataPlane", e
        assert "spec.rules[1] (host refused.example)" in e["message"], e
        assert "route refused by the test data plane" in e["message"], e
        assert refusals("fine") == []
        # The refusal is not re-posted while nothing changes, nor on unrelated endpoint changes.
        cluster.apply(kube_slice("nk-1", "nk", namespace, [b, c]))
        harness.wait_until(lambda: plane.refusals >= 2, 10, "the next push to be refused too")
        assert len(refusals("two-rules")) == 1
        # Removing the refused rule: accepted; no new Event.
        before = plane.accepted
        cluster.apply(harness.ingress("two-rules", [
            harness.rule("other.example", harness.path("/", "nk"))],
            namespace=namespace, ingress_class=harness.INGRESS_CLASS))
        harness.wait_until(lambda: plane.accepted > before, 10, "the fixed configuration")
        assert len(refusals("two-rules")) == 1
    finally:
        plane.stop()
