"""The kind scale test's report (e2e/kind/run.sh): reads wrk2's output with its `-L` latency
distribution and prints the table of e2e/cluster/scale.py — p50, p90, p99, p99.9, p99.99,
p99.999, max, errors and timeouts — one row per run.

  python3 e2e/kind/report.py "NAME=wrk2-output.txt" ...

Errors are wrk2's connect, read and write socket errors plus its non-2xx/3xx responses;
timeouts are its `timeout` count (no response within --timeout: run.sh gives 5 s, as scale.py's
load generator has). A file without a
latency distribution (wrk2 failed, or ran without -L) is an error: exit status 1.
"""

from __future__ import annotations

import re
import sys

PERCENTILES = ["50", "90", "99", "99.9", "99.99", "99.999"]
# wrk's time units (units.c): microseconds up to hours.
UNITS_MS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60_000.0, "h": 3_600_000.0}

_DIST_LINE = re.compile(r"^\s*(\d+(?:\.\d+)?)%\s+(\d+(?:\.\d+)?)(us|ms|s|m|h)\s*$")
_SOCKET_ERRORS = re.compile(
    r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)")
_NON_2XX = re.compile(r"Non-2xx or 3xx responses: (\d+)")
_REQUESTS = re.compile(r"^\s*(\d+) requests in ")


def parse(text: str) -> dict:
    """wrk2's output -> {"percentiles_ms": {"50": …, …}, "max_ms", "errors", "timeouts",
    "requests"}; raises ValueError without a latency distribution."""
    dist: dict[str, float] = {}
    in_dist = False
    for line in text.splitlines():
        if "Latency Distribution" in line:
            in_dist = True
            continue
        if in_dist:
            m = _DIST_LINE.match(line)
            if m:
                # wrk2 prints 50.000%, 99.900%, …: the key as scale.py writes it ("99.9").
                key = f"{float(m.group(1)):g}"
                dist[key] = float(m.group(2)) * UNITS_MS[m.group(3)]
            elif dist:
                in_dist = False  # the distribution ended (a blank line, then the spectrum)
    missing = [p for p in PERCENTILES + ["100"] if p not in dist]
    if missing:
        raise ValueError(f"no latency distribution (percentiles {', '.join(missing)} missing): "
                         "did wrk2 run with -L?")
    errors = timeouts = 0
    m = _SOCKET_ERRORS.search(text)
    if m:
        connect, read, write, timeout = (int(g) for g in m.groups())
        errors += connect + read + write
        timeouts = timeout
    m = _NON_2XX.search(text)
    if m:
        errors += int(m.group(1))
    requests = next((int(m.group(1)) for line in text.splitlines()
                     if (m := _REQUESTS.match(line))), 0)
    return {"percentiles_ms": {p: dist[p] for p in PERCENTILES}, "max_ms": dist["100"],
            "errors": errors, "timeouts": timeouts, "requests": requests}


def table(rows: list[tuple[str, dict]]) -> str:
    lines = ["| run | " + " | ".join(f"p{p}" for p in PERCENTILES)
             + " | max | errors | timeouts | requests |",
             "|---" * (len(PERCENTILES) + 5) + "|"]
    for name, s in rows:
        lines.append(f"| {name} | " + " | ".join(f"{s['percentiles_ms'][p]:.1f}"
                                                for p in PERCENTILES)
                     + f" | {s['max_ms']:.1f} | {s['errors']} | {s['timeouts']} "
                     f"| {s['requests']} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if not argv or any("=" not in a for a in argv):
        print(__doc__, file=sys.stderr)
        return 2
    rows = []
    failed = False
    for arg in argv:
        name, path = arg.split("=", 1)
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                rows.append((name, parse(f.read())))
        except (OSError, ValueError) as e:
            print(f"report.py: {name}: {path}: {e}", file=sys.stderr)
            failed = True
    print("Latencies in ms (wrk2 -L, corrected for coordinated omission); errors: connect, "
          "read and write errors and non-2xx/3xx answers; timeouts: no answer within wrk2's "
          "--timeout.\n")
    print(table(rows), end="")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
