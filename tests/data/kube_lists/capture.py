#!/usr/bin/env python3
"""Writes the list answers that tests/controller/kube/proto_reader_test.cc reads: Ingresses,
Services and EndpointSlices covering every field the controller's object parsers read, created
in a real kube-apiserver (e2e/kube/build.sh, e2e/kube/kubecluster.py) and listed twice, once in
JSON and once in protobuf, right after each other (nothing written in between, so both are the
same objects at the same resourceVersion). Run it again (as root, like the e2e/kube tests) when
the API server's version or the parsers' fields change:

    python3 tests/data/kube_lists/capture.py
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
sys.path.insert(0, str(ROOT / "e2e"))
sys.path.insert(0, str(ROOT / "e2e" / "kube"))

import kubecluster  # noqa: E402

NS = "capture"
PROTOBUF = "application/vnd.kubernetes.protobuf"


def svc_backend(name: str, port: int | str) -> dict:
    return {"service": {"name": name, "port": {"number": port} if isinstance(port, int)
                        else {"name": port}}}


def objects() -> list[dict]:
    meta = {"namespace": NS}
    ingresses = [
        {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
         "metadata": {**meta, "name": "full", "labels": {"app": "shop", "tier": "web"},
                      "annotations": {"tidegate.io/load-balance": "ewma",
                                      "nginx.ingress.kubernetes.io/rewrite-target": "/$2"}},
         "spec": {"ingressClassName": "tidegate",
                  "defaultBackend": svc_backend("fallback", "http"),
                  "tls": [{"hosts": ["shop.example", "www.shop.example"],
                           "secretName": "shop-tls"},
                          {"hosts": ["api.example"]}],
                  "rules": [
                      {"host": "shop.example", "http": {"paths": [
                          {"path": "/", "pathType": "Prefix", "backend": svc_backend("web", 80)},
                          {"path": "/exact", "pathType": "Exact",
                           "backend": svc_backend("web", "http")},
                          {"path": "/impl(/|$)(.*)", "pathType": "ImplementationSpecific",
                           "backend": svc_backend("api", 8080)}]}},
                      {"host": "*.wild.example", "http": {"paths": [
                          {"pathType": "ImplementationSpecific",
                           "backend": svc_backend("web", 80)}]}},
                      {"http": {"paths": [
                          {"path": "/any-host", "pathType": "Prefix",
                           "backend": svc_backend("web", 80)}]}},
                      {"host": "no-http.example"}]}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
         "metadata": {**meta, "name": "resource-backend"},
         "spec": {"defaultBackend": {"resource": {"apiGroup": "k8s.example.com",
                                                  "kind": "StorageBucket",
                                                  "name": "static"}},
                  "rules": [{"host": "static.example", "http": {"paths": [
                      {"path": "/", "pathType": "Prefix",
                       "backend": {"resource": {"kind": "Bucket", "name": "b"}}}]}}]}},
        {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
         "metadata": {**meta, "name": "default-backend-only"},
         "spec": {"defaultBackend": svc_backend("web", 80)}},
    ]
    services = [
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {**meta, "name": "web", "labels": {"app": "web"}},
         "spec": {"selector": {"app": "web"}, "ports": [
             {"name": "http", "port": 80, "targetPort": "web-http", "appProtocol": "http"},
             {"name": "grpc", "port": 9000, "targetPort": 9001,
              "appProtocol": "kubernetes.io/h2c"},
             {"name": "dns", "port": 53, "protocol": "UDP"}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {**meta, "name": "api"},
         "spec": {"clusterIP": "None", "ports": [{"port": 8080}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {**meta, "name": "nodeport"},
         "spec": {"type": "NodePort", "ports": [{"name": "http", "port": 80, "nodePort": 30080}]}},
        {"apiVersion": "v1", "kind": "Service",
         "metadata": {**meta, "name": "external"},
         "spec": {"type": "ExternalName", "externalName": "db.example.net"}},
    ]
    slices = [
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {**meta, "name": "web-1", "labels": {"kubernetes.io/service-name": "web"}},
         "addressType": "IPv4",
         "endpoints": [
             {"addresses": ["10.0.0.1"], "conditions": {"ready": True, "serving": True,
                                                        "terminating": False}},
             {"addresses": ["10.0.0.2"], "conditions": {"ready": False, "serving": True,
                                                        "terminating": True}},
             {"addresses": ["10.0.0.3"], "conditions": {}},
             {"addresses": ["10.0.0.4"], "nodeName": "node-a", "zone": "z1"}],
         "ports": [{"name": "http", "port": 8080, "protocol": "TCP"},
                   {"name": "", "port": 9001},
                   {"name": "dns", "port": 53, "protocol": "UDP"}]},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {**meta, "name": "api-1", "labels": {"kubernetes.io/service-name": "api"}},
         "addressType": "IPv6",
         "endpoints": [{"addresses": ["fd00::1"], "conditions": {"ready": True}}],
         "ports": [{"port": 8080}]},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {**meta, "name": "empty-1", "labels": {"kubernetes.io/service-name": "api"}},
         "addressType": "IPv4", "endpoints": [], "ports": []},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
         "metadata": {**meta, "name": "no-ports", "labels": {"kubernetes.io/service-name": "x"}},
         "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.1.1"]}]},
    ]
    return ingresses + services + slices


def get(cluster: kubecluster.Cluster, path: str, accept: str) -> bytes:
    req = urllib.request.Request(cluster.server + path, headers={
        "Authorization": f"Bearer {kubecluster.TOKEN}", "Accept": accept})
    with urllib.request.urlopen(req, context=cluster._ssl(), timeout=10) as r:
        assert r.headers["Content-Type"].startswith(accept), r.headers["Content-Type"]
        return r.read()


def main() -> int:
    err = kubecluster.enter_test_netns()
    if err:
        print(f"capture: {err}", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="tg-capture-"))
    cluster = kubecluster.Cluster(kubecluster.build(), work / "cluster")
    cluster.start()
    try:
        cluster.create_namespace(NS)
        cluster.apply(*objects())
        for name, path in (("ingresses", f"/apis/networking.k8s.io/v1/namespaces/{NS}/ingresses"),
                           ("services", f"/api/v1/namespaces/{NS}/services"),
                           ("endpointslices",
                            f"/apis/discovery.k8s.io/v1/namespaces/{NS}/endpointslices")):
            # limit=2: pages with a continue token, in both encodings
            for page, query in enumerate(("?limit=2", "")):
                (HERE / f"{name}{'-page' if page == 0 else ''}.json").write_bytes(
                    get(cluster, path + query, "application/json"))
                (HERE / f"{name}{'-page' if page == 0 else ''}.pb").write_bytes(
                    get(cluster, path + query, PROTOBUF))
        print(f"written to {HERE}")
    finally:
        cluster.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
