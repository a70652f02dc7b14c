"""The headline test (scale.py, docs/benchmarks.md "Scaling 2↔4 under load"): 1,000 requests/s
over TLS 1.3 through Tidegate installed by its chart while the backend Deployment scales 2↔4
every 10 s — with a graceful and with an abrupt backend, 1,000 other hosts in the
configuration, 50 WebSockets open all along — answers every request and cuts no WebSocket.
The same scaling through a reload-based nginx and the machine's noise floor are measured in
the same run and reported beside it (the report is printed and kept in TIDEGATE_SCALE_OUT,
default /tmp/tidegate-scale-report).

TIDEGATE_SCALE_HOSTS and TIDEGATE_SCALE_SECONDS shorten it for local iteration only."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import scale
from release import make_helm

# The budget for this part of CI: 10 minutes on warm caches (docs/testing.md has the
# measured time).
pytestmark = pytest.mark.deadline(600)


def test_scaling_2_to_4_under_load_loses_nothing(kube_cluster, namespace, tmp_path, capsys):
    out = Path(os.environ.get("TIDEGATE_SCALE_OUT", "/tmp/tidegate-scale-report"))
    shutil.rmtree(out, ignore_errors=True)
    exp = scale.Experiment(kube_cluster, namespace, make_helm(tmp_path / "helm-home"), out,
                           hosts=int(os.environ.get("TIDEGATE_SCALE_HOSTS", "1000")),
                           seconds=int(os.environ.get("TIDEGATE_SCALE_SECONDS", "60")))
    try:
        exp.setup()
        exp.run_all()
    finally:
        exp.teardown()
    report = exp.report()
    with capsys.disabled():
        print(f"\n{report}(report, plot and latencies in {out})")

    expected_events = len(range(0, exp.seconds - 1, int(scale.SCALE_EVERY)))
    for r in exp.runs:
        s = r.summary
        assert s["requests"] == scale.RATE * exp.seconds, (r.name, s["requests"])
        if r.scaling:
            # The scaling really happened: every event was sent, and new pods answered.
            assert len(r.scale_events) == expected_events, (r.name, r.scale_events)
        if r.proxy == "tidegate":
            assert s["errors"] == 0 and s["timeouts"] == 0, (r.name, s["error_kinds"])
            ws = s["websockets"]
            assert ws["alive_at_end"] == scale.WEBSOCKETS and not ws["failures"], (r.name, ws)
            if r.scaling:
                assert len(s["pods"]) >= 4, (r.name, s["pods"])
        if r.proxy == "nginx":
            # The peer reloaded at each change of the ready endpoints (2→3→4→…→2).
            assert r.reloads >= expected_events, (r.name, r.reloads)
        if r.proxy == "none":
            # The floor itself must be clean, or the machine is not fit to measure on.
            assert s["errors"] == 0 and s["timeouts"] == 0, (r.name, s["error_kinds"])
    # Its watcher followed every change without an error.
    assert exp.nginx is not None and not exp.nginx.errors, exp.nginx.errors
    assert (out / "latency.svg").stat().st_size > 1000
