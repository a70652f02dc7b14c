"""x-forwarded-prefix and enable-access-log (docs/annotations.md, "Headers"), with their
nginx spellings as ingress-nginx users write them, through the real processes."""

from __future__ import annotations

import pytest

from harness import header_values, ingress, path, rule, service_with_backend, wait_until

pytestmark = pytest.mark.usefixtures("over_both_protocols")


def test_x_forwarded_prefix_reaches_the_backend(stack_factory):
    s = stack_factory(controller_args=["--nginx-annotations"])
    s.start_dataplane()
    s.start_controller()
    s.dataplane.wait_ready()
    b = s.backend("b")
    s.manifests.write("app.yaml", *service_with_backend("svc-b", b),
                      ingress("app", [rule("app.example.com", path("/", "svc-b"))],
                              annotations={"nginx.ingress.kubernetes.io/x-forwarded-prefix":
                                           "/shop"}))
    r = s.wait_backend("/x", "app.example.com", "b")
    assert header_values(r.json(), "X-Forwarded-Prefix") == ["/shop"]


def test_enable_access_log_false_leaves_the_route_out_of_the_log(stack):
    b = stack.backend("b")
    stack.manifests.write("app.yaml", *service_with_backend("svc-b", b),
                          ingress("quiet", [rule("quiet.example.com", path("/", "svc-b"))],
                                  annotations={"tidegate.io/enable-access-log": "false"}),
                          ingress("loud", [rule("loud.example.com", path("/", "svc-b"))]))
    stack.wait_backend("/", "quiet.example.com", "b")
    stack.wait_backend("/", "loud.example.com", "b")
    start = stack.dataplane.log_size()
    assert stack.get("/", host="quiet.example.com",
                     headers={"X-Request-ID": "quiet-request-1"}).status == 200
    assert stack.get("/", host="loud.example.com",
                     headers={"X-Request-ID": "loud-request-1"}).status == 200
    wait_until(lambda: "loud-request-1" in stack.dataplane.log(since=start), 5,
               "the logged route's line")
    assert "quiet-request-1" not in stack.dataplane.log(since=start)
