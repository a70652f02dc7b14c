"""Controller and data plane lifecycles: readiness, crashes, restarts and resyncs."""

from __future__ import annotations

import signal
import time

from harness import (RawConnection, ingress, path, report, rule, service_with_backend,
                     wait_until)


def test_readyz_is_503_until_the_first_configuration(stack_factory):
    s = stack_factory()
    s.start_dataplane()
    assert s.dataplane.admin("/healthz") == (200, "ok\n")
    assert s.dataplane.admin("/readyz") == (503, "no configuration yet\n")
    assert s.dataplane.admin("/version") == (200, "0\n")
    r = s.get("/", "any.example.com")
    assert (r.status, r.text) == (503, "no configuration yet\n")
    assert s.dataplane.admin("/nope")[0] == 404

    b = s.backend("b")
    s.manifests.write("app.yaml", *service_with_backend("svc-b", b),
                      ingress("app", [rule("app.example.com", path("/", "svc-b"))]))
    s.start_controller()
    s.dataplane.wait_ready()
    assert s.dataplane.admin("/readyz") == (200, "ready\n")
    assert s.dataplane.version() > 0
    s.wait_backend("/", "app.example.com", "b")


def test_config_version_moves_with_changes(stack):
    b = stack.backend("b")
    v0 = stack.dataplane.version()
    stack.manifests.write("app.yaml", *service_with_backend("svc-b", b),
                          ingress("app", [rule("app.example.com", path("/", "svc-b"))]))
    stack.wait_backend("/", "app.example.com", "b")
    v1 = stack.dataplane.version()
    assert v1 > v0
    # Rewriting a file with identical content changes nothing: no new version is pushed.
    since = stack.controller.log_size()
    stack.manifests.write("app.yaml", *service_with_backend("svc-b", b),
                          ingress("app", [rule("app.example.com", path("/", "svc-b"))]))
    stack.manifests.write("unrelated.txt.yaml", {"apiVersion": "v1", "kind": "Pod",
                                                 "metadata": {"name": "x"}})
    stack.controller.wait_for_log(r"Pod", since=since)  # it did rebuild
    time.sleep(0.3)
    assert stack.dataplane.version() == v1


def test_controller_sigkill_keeps_serving_and_restart_resyncs(stack):
    s = stack
    a, b = s.backend("a"), s.backend("b")
    s.manifests.write("svcs.yaml", *service_with_backend("svc-a", a),
                      *service_with_backend("svc-b", b))
    s.manifests.write("app.yaml", ingress("app", [rule("app.example.com", path("/", "svc-a"))]))
    s.wait_backend("/", "app.example.com", "a")
    version = s.dataplane.version()

    s.controller.kill()
    s.dataplane.wait_for_log(r"controller disconnected")
    # The data plane keeps serving the last configuration, on old and new connections.
    with RawConnection(s.port) as c:
        for _ in range(20):
            c.send(b"GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n")
            r = c.read_response()
            assert r.status == 200 and r.header("X-Backend") == "a"
    assert s.dataplane.ready()
    assert s.dataplane.version() == version

    # Changes made while the controller is down...
    s.manifests.write("app.yaml", ingress("app", [rule("app.example.com", path("/", "svc-b"))]))
    s.manifests.write("new.yaml", ingress("new", [rule("new.example.com", path("/", "svc-a"))]))
    time.sleep(0.3)
    assert s.get("/", "app.example.com").header("X-Backend") == "a"  # nobody pushed them
    assert s.get("/", "new.example.com").status == 404

    # ...appear once it is back.
    s.controller.start()
    s.wait_backend("/", "app.example.com", "b", timeout=5)
    s.wait_backend("/", "new.example.com", "a", timeout=5)
    assert s.dataplane.version() > version


def test_dataplane_restart_is_resynced_by_the_running_controller(stack):
    s = stack
    a = s.backend("a")
    s.manifests.write("app.yaml", *service_with_backend("svc-a", a),
                      ingress("app", [rule("app.example.com", path("/", "svc-a"))]))
    s.wait_backend("/", "app.example.com", "a")

    rc = s.dataplane.stop(signal.SIGTERM)
    assert rc == 0, f"data plane exited with {rc} on SIGTERM"
    s.start_dataplane()  # same ports, same control socket path
    start = time.monotonic()
    s.dataplane.wait_ready(timeout=5)
    s.wait_backend("/", "app.example.com", "a", timeout=5)
    resync = time.monotonic() - start

    # And once more after a crash (SIGKILL leaves the socket file behind).
    s.dataplane.kill()
    s.start_dataplane()
    s.dataplane.wait_ready(timeout=5)
    s.wait_backend("/", "app.example.com", "a", timeout=5)
    assert s.controller.alive()
    s.controller.wait_for_log(r"data plane acknowledged version \d+ \(snapshot\)")
    report(f"data plane restart: resynced and routing again {resync:.2f}s after it listened")


def test_changes_while_the_dataplane_is_down_arrive_after_it_returns(stack):
    s = stack
    a, b = s.backend("a"), s.backend("b")
    s.manifests.write("svcs.yaml", *service_with_backend("svc-a", a),
                      *service_with_backend("svc-b", b))
    s.manifests.write("app.yaml", ingress("app", [rule("app.example.com", path("/", "svc-a"))]))
    s.wait_backend("/", "app.example.com", "a")
    s.dataplane.kill()
    s.manifests.write("app.yaml", ingress("app", [rule("app.example.com", path("/", "svc-b"))]))
    s.controller.wait_for_log(r"data plane unreachable")
    s.start_dataplane()
    s.wait_backend("/", "app.example.com", "b", timeout=8)


def test_controller_started_before_the_dataplane(stack_factory):
    s = stack_factory()
    b = s.backend("b")
    s.manifests.write("app.yaml", *service_with_backend("svc-b", b),
                      ingress("app", [rule("app.example.com", path("/", "svc-b"))]))
    s.start_controller()
    s.controller.wait_for_log(r"data plane unreachable")
    time.sleep(0.5)
    s.start_dataplane()
    s.dataplane.wait_ready(timeout=8)
    s.wait_backend("/", "app.example.com", "b", timeout=5)


def test_sigterm_stops_both_cleanly(stack):
    rc_ctl = stack.controller.stop(signal.SIGTERM)
    rc_dp = stack.dataplane.stop(signal.SIGTERM)
    assert (rc_ctl, rc_dp) == (0, 0)
    assert "controller: stopped" in stack.controller.log()
    assert "dataplane: stopped" in stack.dataplane.log()
    wait_until(lambda: not stack.dataplane.socket_path.exists(), 2, "control socket removed")
