"""Endpoint churn under load: no request may fail while pods come and go.

The EndpointSlice goes 2 → 4 → 2 endpoints every 200 ms for 10 s. Each 'add' starts two fresh
backends; each 'remove' takes the two oldest out of the slice and stops them 400 ms later, as a
terminating pod stops once it has been taken out of the endpoints. Clients keep sending plain
GETs on keep-alive connections the whole time; any non-200 or connection error is a failure.
"""

from __future__ import annotations

import collections
import http.client
import threading
import time

from harness import Backend, report, endpoint_slice, free_port, ingress, path, rule, service

HOST = "churn.example.com"
STEP = 0.2  # seconds between slice changes
DURATION = 10.0
STOP_DELAY = 0.4  # removal from the slice → backend stopped
CLIENTS = 6


class LoopbackAddresses:
    """Hands out 127.0.0.x addresses on which `port` can be bound (pods: one IP each, one port)."""

    def __init__(self, port: int):
        self.port = port
        self.next = 2

    def backend(self, name: str) -> Backend:
        while self.next < 255:
            host = f"127.0.0.{self.next}"
            self.next += 1
            try:
                return Backend(name, host, self.port, record=False)
            except OSError:
                continue  # something else holds this address:port; take the next address
        raise RuntimeError("ran out of loopback addresses")


def test_endpoint_churn_causes_no_failed_requests(stack):
    addrs = LoopbackAddresses(free_port("127.0.0.2"))
    serial = iter(range(1000))
    all_backends: list[Backend] = []

    def fresh(n: int) -> list[Backend]:
        out = [addrs.backend(f"pod-{next(serial)}") for _ in range(n)]
        all_backends.extend(out)
        stack.backends.extend(out)  # stopped at teardown if the test ends early
        return out

    def write_slice(live: list[Backend]) -> None:
        stack.manifests.write("churn-slice.yaml",
                              endpoint_slice("svc-churn-abc12", "svc-churn",
                                             [b.host for b in live], addrs.port))

    live = fresh(2)
    stack.manifests.write("churn.yaml", service("svc-churn"),
                          ingress("churn", [rule(HOST, path("/", "svc-churn"))]))
    write_slice(live)
    stack.wait_route("/?respond=name", HOST, lambda r: r.status == 200, what="churn route")

    stop = threading.Event()
    lock = threading.Lock()
    per_backend: collections.Counter[str] = collections.Counter()
    failures: list[str] = []
    total = [0]

    def client(idx: int) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=10)
        ok = collections.Counter()
        n = 0
        while not stop.is_set():
            try:
                conn.request("GET", f"/?respond=name&c={idx}", headers={"Host": HOST})
                res = conn.getresponse()
                body = res.read()
                n += 1
                if res.status == 200:
                    ok[body.decode()] += 1
                else:
                    with lock:
                        failures.append(f"{time.monotonic():.3f} client {idx}: status "
                                        f"{res.status} {body[:100]!r}")
            except Exception as e:  # noqa: BLE001 - every error is a failed request
                n += 1
                with lock:
                    failures.append(f"{time.monotonic():.3f} client {idx}: {type(e).__name__}: {e}")
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", stack.port, timeout=10)
        conn.close()
        with lock:
            per_backend.update(ok)
            total[0] += n

    threads = [threading.Thread(target=client, args=(i,), daemon=True) for i in range(CLIENTS)]
    for t in threads:
        t.start()

    pending_stops: list[tuple[float, list[Backend]]] = []
    start = time.monotonic()
    steps = int(DURATION / STEP)
    removed = 0
    try:
        for step in range(1, steps + 1):
            due = start + step * STEP
            # Stop backends whose grace period ended while waiting for the next step.
            while True:
                now = time.monotonic()
                while pending_stops and pending_stops[0][0] <= now:
                    for b in pending_stops.pop(0)[1]:
                        b.stop()
                if now >= due:
                    break
                time.sleep(min(0.01, due - now))
            if step % 2 == 1:
                live = live + fresh(2)
                write_slice(live)
            else:
                gone, live = live[:2], live[2:]
                write_slice(live)
                removed += len(gone)
                pending_stops.append((time.monotonic() + STOP_DELAY, gone))
        # Let the last removals drain and stop while the clients still run.
        for when, gone in pending_stops:
            time.sleep(max(0.0, when - time.monotonic()))
            for b in gone:
                b.stop()
        pending_stops.clear()
        time.sleep(0.2)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    elapsed = time.monotonic() - start

    served = {name: n for name, n in per_backend.items()}
    report(f"churn: {total[0]} requests in {elapsed:.1f}s by {CLIENTS} clients "
          f"({total[0] / elapsed:.0f}/s), {len(failures)} failed; "
          f"{len(all_backends)} backends started, {removed} removed and stopped, "
          f"{len(served)} served requests; per backend: {dict(sorted(served.items()))}")
    assert not any(t.is_alive() for t in threads), "a client thread hung"
    assert not failures, f"{len(failures)} of {total[0]} requests failed; first ones:\n" + \
        "\n".join(failures[:20])
    assert total[0] > 1000, f"only {total[0]} requests in {elapsed:.1f}s"
    assert len(served) >= 20, f"requests reached only {len(served)} backends: {served}"
    assert sum(served.values()) == total[0]
    assert stack.dataplane.alive() and stack.controller.alive()
