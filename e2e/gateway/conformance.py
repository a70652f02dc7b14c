#!/usr/bin/env python3
"""Runs the Gateway API conformance suite (v1.6.3, pinned in e2e/gateway/go.mod) against Tidegate
on the one-node cluster (docs/gateway-conformance.md):

  e2e/gateway/conformance.py [--report FILE] [--profile GATEWAY-HTTP] [--keep] [--ci]
                             [-- extra flags for the suite, e.g. -run-test HTTPRouteSimpleSameNamespace]

--ci (scripts/test): skips the tests of KNOWN_FAILURES (each with its reason below) and exits
non-zero unless the report says every other core test and every claimed extended one passed.

Brings the cluster up (e2e/cluster/up: it builds and imports Tidegate's image), builds the suite
and its images (e2e/gateway/build-tools.sh, images.sh) and imports those, installs the standard
CRDs and Tidegate by its chart with the GatewayClass `tidegate`, runs the suite, and prints its
report. The chart's Service is a ClusterIP one: its address (the Gateways' status.addresses)
answers on ports 80 and 443 on this host through kube-proxy, where the suite's client runs.
Without --keep, Tidegate's release, the suite's namespaces and the CRDs are removed afterwards
(the cluster stays up as e2e/cluster/up left it)."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "e2e" / "cluster"))

import cluster  # noqa: E402
import kube as kubelib  # noqa: E402
import release  # noqa: E402

NAMESPACE = "tidegate-gateway"
CRDS = ("gatewayclasses", "gateways", "httproutes", "grpcroutes", "referencegrants",
        "backendtlspolicies", "listenersets", "tcproutes", "tlsroutes", "udproutes")
SUPPORTED = {
    # The profile's core features (the suite adds them itself) and the extended ones Tidegate
    # claims (docs/gateway-api.md).
    "GATEWAY-HTTP": "Gateway,HTTPRoute,ReferenceGrant,HTTPRouteQueryParamMatching,"
                    "HTTPRouteMethodMatching,HTTPRouteResponseHeaderModification,"
                    "HTTPRoutePortRedirect,HTTPRouteSchemeRedirect,HTTPRoutePathRedirect,"
                    "HTTPRouteHostRewrite,HTTPRoutePathRewrite,HTTPRoute303RedirectStatusCode,"
                    "HTTPRoute307RedirectStatusCode,HTTPRoute308RedirectStatusCode,"
                    "HTTPRouteBackendProtocolH2C,HTTPRouteBackendProtocolWebSocket,"
                    "HTTPRouteRequestTimeout,HTTPRouteBackendTimeout,HTTPRouteNamedRouteRule,"
                    "GatewayPort8080,HTTPRouteParentRefPort,GatewayHTTPListenerIsolation,"
                    "HTTPRouteCORS,BackendTLSPolicy,HTTPRouteRequestMirror,"
                    "HTTPRouteRequestMultipleMirrors,HTTPRouteRequestPercentageMirror",
    # GRPCRouteNamedRouteRule: GRPCRouteNamedRule runs and must pass (the suite's exit status),
    # but v1.6.3's GATEWAY-GRPC profile lists only the Gateway extended features, so its report
    # counts no GRPCRoute extended test (docs/gateway-conformance.md, "Results").
    "GATEWAY-GRPC": "Gateway,GRPCRoute,ReferenceGrant,GRPCRouteNamedRouteRule",
}


# Core tests that fail for a reason the design knows (docs/gateway-api.md), skipped by --ci so
# that scripts/test guards everything else. Remove an entry once it passes.
KNOWN_FAILURES: dict[str, str] = {}


def log(msg: str) -> None:
    print(f"conformance: {msg}", file=sys.stderr, flush=True)


def run(*argv: str, **kw) -> str:
    r = subprocess.run(list(argv), capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])}... failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return r.stdout


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--report", default=str(ROOT / "build" / "gateway-conformance-report.yaml"),
                   help="where the suite writes its report (default: build/, untracked)")
    p.add_argument("--profile", default="GATEWAY-HTTP", choices=sorted(SUPPORTED))
    p.add_argument("--keep", action="store_true", help="leave Tidegate, the CRDs and the "
                   "suite's namespaces installed")
    p.add_argument("--ci", action="store_true", help="skip the known failures; fail unless "
                   "everything else passed")
    p.add_argument("suite_args", nargs="*", help="more flags for the suite (after --)")
    args = p.parse_args()
    if args.ci and KNOWN_FAILURES:
        args.suite_args += ["-skip-tests", ",".join(sorted(KNOWN_FAILURES))]
        for name, why in KNOWN_FAILURES.items():
            log(f"skipping {name}: {why}")

    if os.geteuid() != 0:
        raise SystemExit("the one-node cluster needs root")
    t0 = time.monotonic()
    was_up = cluster.STATE.exists() and cluster.is_up()
    kubeconfig = cluster.up()
    kube = kubelib.Kube(cluster.kubeconfig_path(), cluster.bin_dir() / "kubectl")
    # A cluster that was already up kept its images: Tidegate's is rebuilt from this tree (when
    # its sources changed) and imported again.
    cluster.import_images(cluster.image_archives())
    log(f"cluster up ({time.monotonic() - t0:.0f} s)")
    tools = Path(run(str(HERE / "build-tools.sh")).strip())
    archives = [Path(line.split()[1]) for line in
                run(str(HERE / "images.sh"), str(tools)).splitlines() if len(line.split()) == 2]
    cluster.import_images(archives)
    log(f"suite and images ready ({time.monotonic() - t0:.0f} s)")

    kube.kubectl("apply", "--server-side", "--force-conflicts", "-f",
                 str(tools / "standard-install.yaml"))
    for crd in CRDS:
        kube.kubectl("wait", "--for=condition=Established",
                     f"crd/{crd}.gateway.networking.k8s.io", "--timeout=60s")
    helm = release.make_helm(Path(os.environ.get("TMPDIR", "/tmp")) / "tidegate-conformance-helm")
    # A namespace the last run is still deleting cannot take the release yet.
    kubelib.wait_for(lambda: "Terminating" not in kube.kubectl(
        "get", "namespace", NAMESPACE, "-o", "jsonpath={.status.phase}", check=False),
        120, f"namespace {NAMESPACE} to finish terminating", interval=1.0)
    kube.kubectl("create", "namespace", NAMESPACE, check=False)
    if release.RELEASE in release.helm_run(helm, "list", "-q", "-n", NAMESPACE).split():
        release.helm_run(helm, "uninstall", release.RELEASE, "-n", NAMESPACE, "--wait",
                         timeout=120)
    release.install(helm, NAMESPACE, "gatewayClass.enabled=true", "service.type=ClusterIP")
    kube.wait_deployment_ready(NAMESPACE, release.RELEASE, 1, timeout=180)
    log(f"Tidegate installed ({time.monotonic() - t0:.0f} s)")

    argv = [str(tools / "conformance.test"), "-test.run", "^TestConformance$", "-test.v",
            "-test.timeout", "60m", "-kubeconfig", str(kubeconfig), "-gateway-class", "tidegate",
            "-conformance-profiles", args.profile, "-supported-features", SUPPORTED[args.profile],
            "-organization", "tidegate", "-project", "tidegate",
            "-url", "https://github.com/tidegate/tidegate", "-contact", "tidegate-maintainers",
            "-version", run("git", "-C", str(ROOT), "describe", "--always", "--dirty").strip(),
            "-report-output", str(Path(args.report).resolve()), *args.suite_args]
    # An older run's report must never pass for this one's (check_report reads the file).
    Path(args.report).resolve().parent.mkdir(parents=True, exist_ok=True)
    Path(args.report).unlink(missing_ok=True)
    log("running: " + " ".join(argv))
    started = time.monotonic()
    rc = subprocess.run(argv, cwd=tools).returncode
    log(f"suite exited {rc} after {time.monotonic() - started:.0f} s")
    if Path(args.report).exists():
        print(Path(args.report).read_text())
    if not args.keep:
        release.helm_run(helm, "uninstall", release.RELEASE, "-n", NAMESPACE, "--wait",
                         timeout=120)
        for ns in (NAMESPACE, "gateway-conformance-infra", "gateway-conformance-app-backend",
                   "gateway-conformance-web-backend"):
            kube.kubectl("delete", "namespace", ns, "--wait=false", check=False)
        kube.kubectl("delete", "-f", str(tools / "standard-install.yaml"), "--wait=false",
                     check=False)
        if not was_up:
            left = cluster.down()
            if left:
                log(f"cluster down left things behind: {left}")
                rc = rc or 1
    if args.ci:
        rc = rc or check_report(Path(args.report))
    return rc


def check_report(report: Path) -> int:
    """0 when the report says the core and extended tests that ran all passed: no failure, and
    no skipped test but the known failures (the suite then says "partial")."""
    text = report.read_text() if report.exists() else ""

    def values(key: str) -> list[str]:
        return [line.split(":", 1)[1].strip() for line in text.splitlines()
                if line.strip().startswith(key + ":")]
    results, failed, skipped = values("result"), values("Failed"), values("Skipped")
    if not results or any(r not in ("success", "partial") for r in results) or \
            any(f != "0" for f in failed) or sum(map(int, skipped)) > len(KNOWN_FAILURES):
        log(f"the report does not say every test that ran passed: results {results}, failed "
            f"{failed}, skipped {skipped}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
