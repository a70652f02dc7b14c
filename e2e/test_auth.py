"""Basic authentication (docs/annotations.md, "Basic authentication"): tidegate.io/auth-type
basic with an htpasswd Secret (auth-file) or one key per user (auth-map), through the real data
plane and controller, over HTTP/1.1 and HTTP/2. The hashes come from other implementations
(openssl passwd -apr1; Python's crypt for bcrypt), the Secret changes live, and a broken setup
never lets a request through."""

from __future__ import annotations

import base64

import pytest

from harness import header_values, ingress, path, rule, service_with_backend, wait_until

pytestmark = pytest.mark.usefixtures("over_both_protocols")

HOST = "auth.example.com"
APR1 = "$apr1$saltsalt$HIDXe7D36X22w1CH4M1cQ."  # "open sesame", openssl passwd -apr1
BCRYPT = "$2b$04$abcdefghijklmnopqrstuu/LVz6MZlItEy42I2juLihZ66HnQx/cy"  # "open sesame"
APR1_NEW = "$apr1$ab$Hgz6JG0UKq5Uz.21NWkS11"  # "p:w d"


def basic(user: str, password: str) -> dict:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def secret(name: str, data: dict[str, str]) -> dict:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": "default"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}}


def protected(annotations: dict | None = None) -> dict:
    ann = {"tidegate.io/auth-type": "basic", "tidegate.io/auth-secret": "users",
           "tidegate.io/auth-realm": "Staff only"}
    ann.update(annotations or {})
    return ingress("auth", [rule(HOST, path("/", "svc-b"))], annotations=ann)


def test_basic_auth_allows_the_users_of_the_secret_and_nobody_else(stack):
    b = stack.backend("b")
    stack.manifests.write("auth.yaml", *service_with_backend("svc-b", b),
                          secret("users", {"auth": f"# staff\nalice:{APR1}\nbob:{BCRYPT}\n"}),
                          protected())
    r = stack.wait_status("/", HOST, 401)
    assert r.header("WWW-Authenticate") == 'Basic realm="Staff only", charset="UTF-8"'
    before = len(b.requests)
    for headers in (basic("alice", "wrong"), basic("carol", "open sesame"),
                    {"Authorization": "Bearer abc"}, {"Authorization": "Basic !!"}):
        assert stack.get("/", host=HOST, headers=headers).status == 401, headers
    assert len(b.requests) == before  # nothing reached the backend
    for user in ("alice", "bob"):
        r = stack.get("/x", host=HOST, headers=basic(user, "open sesame"))
        assert r.status == 200, user
        # The backend sees the credentials, as with nginx's auth_basic.
        assert header_values(r.json(), "Authorization") == [basic(user, "open sesame")[
            "Authorization"]]


def test_secret_changes_apply_live_and_a_missing_secret_fails_closed(stack):
    b = stack.backend("b")
    stack.manifests.write("auth.yaml", *service_with_backend("svc-b", b),
                          secret("users", {"alice": APR1}),
                          protected({"tidegate.io/auth-secret-type": "auth-map"}))
    wait_until(lambda: stack.get("/", host=HOST, headers=basic("alice", "open sesame")).status
               == 200, 10, "alice to get in")
    # A new password: the old one stops working, the new one works, without a reload.
    stack.manifests.write("auth.yaml", *service_with_backend("svc-b", b),
                          secret("users", {"alice": APR1_NEW}),
                          protected({"tidegate.io/auth-secret-type": "auth-map"}))
    wait_until(lambda: stack.get("/", host=HOST, headers=basic("alice", "p:w d")).status == 200,
               10, "the new password to work")
    assert stack.get("/", host=HOST, headers=basic("alice", "open sesame")).status == 401
    # The Secret is gone: every request is refused, with or without credentials.
    stack.manifests.write("auth.yaml", *service_with_backend("svc-b", b),
                          protected({"tidegate.io/auth-secret-type": "auth-map"}))
    r = stack.wait_status("/", HOST, 503)
    assert b"authentication is not configured" in r.body
    assert stack.get("/", host=HOST, headers=basic("alice", "p:w d")).status == 503
