"""Tidegate installed by its Helm chart on the one-node cluster, as users install it: shared by
test_chart_install.py and the scale test (scale.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import cluster

# chartlib (e2e/chart) imports harness (e2e/): both on the path for a run outside pytest too.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "chart"))
import chartlib  # noqa: E402

RELEASE = "tidegate"
IMAGE_SETS = ("image.repository=docker.io/tidegate/tidegate", "image.tag=test",
              "image.pullPolicy=Never")


def make_helm(home: Path) -> chartlib.Helm:
    """helm (pinned, built once and cached by e2e/chart/build-tools.sh) with a home of its own."""
    return chartlib.Helm(chartlib.build_helm(), home)


def helm_run(helm, *args: str, timeout: float = 180) -> str:
    r = subprocess.run([str(helm.path), "--kubeconfig", str(cluster.kubeconfig_path()), *args],
                       capture_output=True, text=True, env=helm.env, timeout=timeout)
    assert r.returncode == 0, f"helm {' '.join(args)} failed ({r.returncode}):\n{r.stderr}"
    return r.stdout


def install(helm, ns: str, *sets: str) -> str:
    args = ["install", RELEASE, str(chartlib.CHART), "-n", ns]
    for s in (*IMAGE_SETS, *sets):
        args += ["--set", s]
    return helm_run(helm, *args)


def uninstall(helm, ns: str) -> str:
    return helm_run(helm, "uninstall", RELEASE, "-n", ns, "--wait")


def node_ports(kube, ns: str) -> dict[str, int]:
    """The chart's Service's node ports by port name (http, https)."""
    svc = kube.get("service", RELEASE, namespace=ns)
    return {p["name"]: p["nodePort"] for p in svc["spec"]["ports"]}


def make_tls_secret(kube, ns: str, d: Path, name: str, *dns_names: str) -> Path:
    """A self-signed P-256 certificate for `dns_names` (the first is its CN) as the TLS Secret
    `name`; returns the certificate's path (the clients' CA), its key beside it."""
    sans = ",".join(f"DNS:{n}" for n in dns_names)
    crt, key = d / f"{name}.crt", d / f"{name}.key"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", str(key),
                    "-out", str(crt), "-days", "2", "-subj", f"/CN={dns_names[0]}",
                    "-addext", f"subjectAltName={sans}"], check=True, capture_output=True)
    kube.kubectl("-n", ns, "create", "secret", "tls", name, "--cert", str(crt), "--key", str(key))
    return crt
