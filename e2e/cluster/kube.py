"""A small client for tests on the one-node cluster: kubectl with the admin kubeconfig, JSON in
and out, and the waits tests need (Deployment ready, EndpointSlice contents, pod logs). The
chart and scale tests use it too."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, Callable

import cluster

ECHO_IMAGE = cluster.ECHO_IMAGE
PROBE_IMAGE = cluster.PROBE_IMAGE
# The echo pods' HTTPS port when they are given a certificate (echo_deployment).
ECHO_TLS_PORT = 8443


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.2):
    return cluster.wait_until(what, predicate, timeout, interval=interval)


def container_pid(pod: dict, container: str | None = None) -> int:
    """The host PID of a pod's container (the first one, or the one named), from containerd."""
    statuses = pod["status"]["containerStatuses"]
    cs = next(c for c in statuses if container in (None, c["name"]))
    cid = cs["containerID"].split("://", 1)[1]
    out = cluster.ctr("tasks", "ls").stdout
    for line in out.splitlines()[1:]:
        parts = line.split()
        if parts and parts[0] == cid:
            return int(parts[1])
    raise AssertionError(f"no task for container {cid} of {pod['metadata']['name']}:\n{out}")


class Kube:
    def __init__(self, kubeconfig: Path, kubectl_path: Path):
        self.kubeconfig = kubeconfig
        self.kubectl_path = kubectl_path

    def kubectl(self, *args: str, input: str | None = None, check: bool = True,
                timeout: float = 60) -> str:
        r = subprocess.run([str(self.kubectl_path), "--kubeconfig", str(self.kubeconfig), *args],
                           input=input, capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({r.returncode}): "
                                 f"{r.stderr.strip()}")
        return r.stdout

    def get(self, *args: str, namespace: str | None = None) -> dict:
        ns = ["-n", namespace] if namespace else []
        return json.loads(self.kubectl("get", *args, *ns, "-o", "json"))

    def apply(self, *objects: dict, namespace: str | None = None) -> None:
        ns = ["-n", namespace] if namespace else []
        self.kubectl("apply", *ns, "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": list(objects)}))

    def create_namespace(self, name: str) -> None:
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        # The ServiceAccount controller makes `default` a moment later; pods need it.
        wait_for(lambda: self.kubectl("-n", name, "get", "serviceaccount", "default",
                                      check=False), 30, f"serviceaccount default in {name}")

    def describe_namespace(self, ns: str) -> str:
        return (self.kubectl("-n", ns, "get", "all,endpointslices,events", "-o", "wide",
                             check=False)
                + self.kubectl("-n", ns, "describe", "pods", check=False))

    # -- workloads ----------------------------------------------------------------------------

    def pods(self, namespace: str, selector: str) -> list[dict]:
        return self.get("pods", "-l", selector, namespace=namespace)["items"]

    def ready_pods(self, namespace: str, selector: str) -> list[dict]:
        return [p for p in self.pods(namespace, selector)
                if not p["metadata"].get("deletionTimestamp") and any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in p.get("status", {}).get("conditions", []))]

    def wait_deployment_ready(self, namespace: str, name: str, replicas: int,
                              timeout: float = 90) -> list[dict]:
        """Waits until the Deployment has exactly `replicas` ready pods and no others."""
        def ready():
            d = self.get("deployment", name, namespace=namespace)
            st = d.get("status", {})
            sel = ",".join(f"{k}={v}" for k, v in
                           d["spec"]["selector"]["matchLabels"].items())
            if (st.get("readyReplicas", 0) == replicas and st.get("replicas", 0) == replicas
                    and st.get("updatedReplicas", 0) == replicas):
                pods = self.ready_pods(namespace, sel)
                return pods if len(pods) == replicas else None
            return None
        return wait_for(ready, timeout, f"deployment {namespace}/{name} with {replicas} ready")

    def endpoint_slices(self, namespace: str, service: str) -> list[dict]:
        return self.get("endpointslices", "-l", f"kubernetes.io/service-name={service}",
                        namespace=namespace)["items"]

    def endpoints(self, namespace: str, service: str) -> dict[str, dict]:
        """Every address in the Service's EndpointSlices -> its conditions."""
        out = {}
        for s in self.endpoint_slices(namespace, service):
            for e in s.get("endpoints") or []:
                for a in e["addresses"]:
                    out[a] = e.get("conditions", {})
        return out

    def run_pod(self, namespace: str, name: str, args: list[str], image: str = PROBE_IMAGE,
                service_account: str | None = None, timeout: float = 60) -> tuple[str, str]:
        """Runs a pod to completion; returns (phase, its log)."""
        spec: dict = {"restartPolicy": "Never", "containers": [{
            "name": "main", "image": image, "imagePullPolicy": "Never", "args": args}]}
        if service_account:
            spec["serviceAccountName"] = service_account
        self.apply({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": namespace}, "spec": spec})

        def done():
            phase = self.get("pod", name, namespace=namespace).get("status", {}).get("phase")
            return phase if phase in ("Succeeded", "Failed") else None
        phase = wait_for(done, timeout, f"pod {namespace}/{name} to finish")
        return phase, self.kubectl("-n", namespace, "logs", name)


def echo_deployment(name: str, replicas: int, grace_seconds: int = 3,
                    termination_grace: int = 30, body_size: int = 0,
                    tls_secret: str | None = None) -> list[dict]:
    """The echo backend (e2e/cluster/images/echo) as a Deployment and a Service: it names its
    pod in every answer, is ready through /readyz, and keeps serving `grace_seconds` after
    SIGTERM (0: exits at once). With `tls_secret` (a kubernetes.io/tls Secret) the pods also
    serve HTTPS on 8443 with its certificate (ECHO_TLS_PORT)."""
    labels = {"app": name}
    env = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
           {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
           {"name": "GRACE_SECONDS", "value": str(grace_seconds)},
           {"name": "BODY_SIZE", "value": str(body_size)}]
    ports = [{"name": "http", "containerPort": 8080}]
    container: dict = {"name": "echo", "image": ECHO_IMAGE, "imagePullPolicy": "Never",
                       "env": env, "ports": ports,
                       "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8080},
                                          "periodSeconds": 1, "failureThreshold": 1}}
    pod_spec: dict = {"terminationGracePeriodSeconds": termination_grace,
                      "containers": [container]}
    if tls_secret:
        env += [{"name": "TLS_PORT", "value": str(ECHO_TLS_PORT)},
                {"name": "TLS_CERT_FILE", "value": "/tls/tls.crt"},
                {"name": "TLS_KEY_FILE", "value": "/tls/tls.key"}]
        ports.append({"name": "https", "containerPort": ECHO_TLS_PORT})
        container["volumeMounts"] = [{"name": "tls", "mountPath": "/tls", "readOnly": True}]
        pod_spec["volumes"] = [{"name": "tls", "secret": {"secretName": tls_secret}}]
    return [
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
         "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                  "template": {"metadata": {"labels": labels}, "spec": pod_spec}}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
         "spec": {"selector": labels,
                  "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}},
    ]
