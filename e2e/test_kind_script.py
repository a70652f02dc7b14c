"""e2e/kind/run.sh cannot run here (no Docker engine, no registry): its --dry-run prints every
command it would run, and this checks that they are the scale test users expect, in order."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness import REPO

SCRIPT = REPO / "e2e" / "kind" / "run.sh"


def dry_run(*args: str, out: Path) -> list[str]:
    r = subprocess.run([str(SCRIPT), "--dry-run", *args], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "OUT": str(out)}, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = [line[2:] for line in r.stdout.splitlines() if line.startswith("+ ")]
    assert lines, r.stdout
    return lines


def index_of(lines: list[str], prefix: str) -> int:
    for i, line in enumerate(lines):
        if line.startswith(prefix):
            return i
    raise AssertionError(f"no command starting with {prefix!r} in:\n" + "\n".join(lines))


def test_dry_run_prints_the_whole_scale_test_in_order_and_runs_nothing(tmp_path):
    out = tmp_path / "out"
    lines = dry_run(out=out)
    assert not out.exists(), "a dry run must not create anything"
    steps = [index_of(lines, p) for p in (
        "kind create cluster --config", "docker build -t docker.io/tidegate/tidegate:test",
        "docker build -t docker.io/tidegate/echo:test",
        "kind load docker-image --name tidegate-scale",
        "helm --kube-context kind-tidegate-scale install tidegate",
        "kubectl --context kind-tidegate-scale -n tidegate-scale apply -f",
        "wrk2 -t2 -c50 -d60s -R1000 -L https://localhost:8443/",
        "kind delete cluster --name tidegate-scale")]
    assert steps == sorted(steps), lines
    helm = lines[steps[4]]
    assert "service.nodePorts.https=30443" in helm and "image.pullPolicy=Never" in helm, helm
    scales = [line.rsplit("=", 1)[1] for line in lines if " scale deployment echo " in line]
    assert scales == ["4", "2", "4", "2", "4", "2"], lines
    assert any("GRACE_SECONDS=5" in line for line in lines), lines


def test_abrupt_backend_and_keep(tmp_path):
    lines = dry_run("--backend", "abrupt", "--keep", out=tmp_path / "out")
    assert any("GRACE_SECONDS=0" in line for line in lines), lines
    assert not any(line.startswith("kind delete") for line in lines), lines


def test_bad_arguments_are_refused(tmp_path):
    r = subprocess.run([str(SCRIPT), "--dry-run", "--backend", "sometimes"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "graceful or abrupt" in r.stderr, r.stderr
