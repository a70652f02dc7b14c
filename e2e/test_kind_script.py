"""e2e/kind/run.sh cannot run here (no Docker engine, no registry): its --dry-run prints every
command it would run, and this checks that they are the scale test users expect, in order; and
that report.py reads wrk2's latency distribution into scale.py's table."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import pytest

from harness import REPO

SCRIPT = REPO / "e2e" / "kind" / "run.sh"
KUBECTL = "kubectl --context kind-tidegate-scale -n tidegate-scale"


def dry_run(*args: str, out: Path, **env: str) -> list[str]:
    r = subprocess.run([str(SCRIPT), "--dry-run", *args], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "OUT": str(out), **env}, timeout=30)
    assert r.returncode == 0, r.stderr
    lines = [line[2:] for line in r.stdout.splitlines() if line.startswith("+ ")]
    assert lines, r.stdout
    return lines


def index_of(lines: list[str], prefix: str, start: int = 0) -> int:
    for i in range(start, len(lines)):
        if lines[i].startswith(prefix):
            return i
    raise AssertionError(f"no command starting with {prefix!r} after line {start} in:\n"
                         + "\n".join(lines))


def load_runs(lines: list[str]) -> dict[str, list[str]]:
    """Per backend: the commands from its wrk2 start (in the background) to the wait for it."""
    runs = {}
    for i, line in enumerate(lines):
        if line.startswith("wrk2 "):
            backend = line.rsplit("wrk2-", 1)[1].split(".txt", 1)[0]
            assert line.endswith(" 2>&1 &"), f"wrk2 must run in the background: {line}"
            end = index_of(lines, 'wait "$load_pid"', i)
            runs[backend] = lines[i + 1:end]
    return runs


def test_dry_run_prints_the_whole_scale_test_in_order_and_runs_nothing(tmp_path):
    out = tmp_path / "out"
    lines = dry_run(out=out)
    assert not out.exists(), "a dry run must not create anything"
    steps = [index_of(lines, p) for p in (
        "kind get clusters",
        "kind create cluster --config",
        "docker build --platform linux/amd64 -t docker.io/tidegate/tidegate:test",
        f"(cd {REPO}/e2e/cluster/images/echo && env CGO_ENABLED=0 GOOS=linux GOARCH=amd64 "
        "go build",
        "docker build --platform linux/amd64 -t docker.io/tidegate/echo:test",
        "kind load docker-image --name tidegate-scale",
        "helm --kube-context kind-tidegate-scale upgrade --install tidegate",
        f"{KUBECTL} apply -f {REPO}/e2e/kind/echo.yaml",
        "curl -sf -o /dev/null --cacert",
        f"{KUBECTL} set env deployment/echo GRACE_SECONDS=5",
        "wrk2 -t2 -c50 -d60s -R1000 -L --timeout 5s https://localhost:8443/ > "
        f"{out}/wrk2-graceful.txt 2>&1 &",
        f"{KUBECTL} set env deployment/echo GRACE_SECONDS=0",
        "wrk2 -t2 -c50 -d60s -R1000 -L --timeout 5s https://localhost:8443/ > "
        f"{out}/wrk2-abrupt.txt 2>&1 &",
        f"python3 {REPO}/e2e/kind/report.py",
        f"cat {out}/report.md",
        "kind delete cluster --name tidegate-scale")]
    assert steps == sorted(steps), lines
    assert not any("env -C" in line for line in lines), lines
    helm = next(line for line in lines if line.startswith("helm "))
    assert "service.nodePorts.https=30443" in helm and "image.pullPolicy=Never" in helm, helm
    # Each backend's run: 2→4→2 every 10 s beside the load, six events, then the wait for wrk2.
    runs = load_runs(lines)
    assert list(runs) == ["graceful", "abrupt"], lines
    for backend, cmds in runs.items():
        assert cmds == [x for k in range(6) for x in (
            *(["sleep 10"] if k else []),
            f"{KUBECTL} scale deployment echo --replicas={4 if k % 2 == 0 else 2}")], cmds
    report = lines[index_of(lines, "python3 ")]
    assert (f"tidegate\\ scaling\\ \\(graceful\\)={out}/wrk2-graceful.txt" in report
            and f"> {out}/report.md" in report), report


def test_one_backend_other_duration_arch_and_keep(tmp_path):
    out = tmp_path / "out"
    lines = dry_run("--backend", "abrupt", "--keep", out=out, DURATION="1m", SCALE_EVERY="20",
                    NODE_ARCH="arm64")
    runs = load_runs(lines)
    assert list(runs) == ["abrupt"], lines
    assert runs["abrupt"] == [f"{KUBECTL} scale deployment echo --replicas=4", "sleep 20",
                              f"{KUBECTL} scale deployment echo --replicas=2", "sleep 20",
                              f"{KUBECTL} scale deployment echo --replicas=4"], runs
    assert any(line.startswith("wrk2 -t2 -c50 -d60s ") for line in lines), lines
    assert any("GRACE_SECONDS=0" in line for line in lines), lines
    assert not any("GRACE_SECONDS=5" in line for line in lines), lines
    assert any("GOOS=linux GOARCH=arm64 go build" in line for line in lines), lines
    assert sum("docker build --platform linux/arm64 " in line for line in lines) == 2, lines
    assert not any(line.startswith("kind delete") for line in lines), lines


@pytest.mark.parametrize("duration,seconds", [("45", 45), ("45s", 45), ("2m", 120)])
def test_durations_in_seconds_or_minutes(tmp_path, duration, seconds):
    lines = dry_run("--backend", "graceful", out=tmp_path / "out", DURATION=duration)
    assert any(line.startswith(f"wrk2 -t2 -c50 -d{seconds}s ") for line in lines), lines
    events = len(range(0, seconds, 10))
    assert len(load_runs(lines)["graceful"]) == 2 * events - 1, lines


@pytest.mark.parametrize("args,env,message", [
    (["--backend", "sometimes"], {}, "graceful, abrupt or both"),
    (["--frobnicate"], {}, "unknown argument"),
    ([], {"DURATION": "1h"}, "DURATION must be whole seconds"),
    ([], {"DURATION": "1.5s"}, "DURATION must be whole seconds"),
    ([], {"RATE": "fast"}, "RATE must be a positive integer"),
    ([], {"SCALE_EVERY": "0"}, "SCALE_EVERY must be a positive integer"),
    ([], {"NODE_ARCH": "386"}, "NODE_ARCH must be amd64 or arm64"),
])
def test_bad_arguments_are_refused(tmp_path, args, env, message):
    r = subprocess.run([str(SCRIPT), "--dry-run", *args], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin", "OUT": str(tmp_path / "out"), **env},
                       timeout=30)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not r.stdout


# -- report.py ------------------------------------------------------------------------------

def _report_module():
    spec = importlib.util.spec_from_file_location("kind_report", REPO / "e2e" / "kind" /
                                                  "report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


WRK2_OUTPUT = """Running 1m test @ https://localhost:8443/
  2 threads and 50 connections
  Thread calibration: mean lat.: 1.234ms, rate sampling interval: 10ms
  Thread calibration: mean lat.: 1.301ms, rate sampling interval: 10ms
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.12ms  510.33us   1.20s    78.00%
    Req/Sec   520.00    210.00     1.44k    80.00%
  Latency Distribution (HdrHistogram - Recorded Latency)
 50.000%  980.00us
 75.000%    1.40ms
 90.000%    1.80ms
 99.000%    3.10ms
 99.900%   26.20ms
 99.990%  108.90ms
 99.999%    1.02s
100.000%    1.20s

  Detailed Percentile spectrum:
       Value   Percentile   TotalCount 1/(1-Percentile)

       0.123     0.000000            1         1.00
       1.050     0.500000        29900         2.00
#[Mean    =        1.120, StdDeviation   =        0.510]
#[Max     =     1200.000, Total count    =        59800]
#[Buckets =           27, SubBuckets     =         2048]
----------------------------------------------------------
  59990 requests in 1.00m, 70.12MB read
  Socket errors: connect 1, read 7, write 2, timeout 3
  Non-2xx or 3xx responses: 4
Requests/sec:    999.80
Transfer/sec:      1.17MB
"""


def test_report_reads_wrk2s_distribution_into_the_scale_table(tmp_path):
    report = _report_module()
    s = report.parse(WRK2_OUTPUT)
    assert s["percentiles_ms"] == {"50": 0.98, "90": 1.8, "99": 3.1, "99.9": 26.2,
                                   "99.99": 108.9, "99.999": 1020.0}
    assert (s["max_ms"], s["errors"], s["timeouts"], s["requests"]) == (1200.0, 14, 3, 59990)
    clean = WRK2_OUTPUT.replace("  Socket errors: connect 1, read 7, write 2, timeout 3\n", "") \
        .replace("  Non-2xx or 3xx responses: 4\n", "")
    assert (report.parse(clean)["errors"], report.parse(clean)["timeouts"]) == (0, 0)
    # The script's command: one row per run, the columns of scale.py's table.
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text(WRK2_OUTPUT)
    bad.write_text("unable to connect to localhost:8443 Connection refused\n")
    r = subprocess.run(["python3", str(REPO / "e2e" / "kind" / "report.py"),
                        f"tidegate scaling (graceful)={good}"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert ("| run | p50 | p90 | p99 | p99.9 | p99.99 | p99.999 | max | errors | timeouts "
            "| requests |") in r.stdout
    assert ("| tidegate scaling (graceful) | 1.0 | 1.8 | 3.1 | 26.2 | 108.9 | 1020.0 | 1200.0 "
            "| 14 | 3 | 59990 |") in r.stdout
    r = subprocess.run(["python3", str(REPO / "e2e" / "kind" / "report.py"), f"x={bad}"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "no latency distribution" in r.stderr, r.stderr
