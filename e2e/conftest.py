"""Fixtures for the end-to-end tests: every test gets its own data plane, controller, manifest
folder and backends, all on loopback, torn down afterwards. Logs are printed when a test fails."""

from __future__ import annotations

import faulthandler
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402

TEST_DEADLINE_S = 90


def pytest_configure(config):
    config.addinivalue_line("markers", "deadline(seconds): the watchdog's deadline for this test "
                            f"(default {TEST_DEADLINE_S} s)")
    for name in ("tidegate-dataplane", "tidegate-controller"):
        if not harness.binary(name).exists():
            raise pytest.UsageError(
                f"{harness.binary(name)} not found: build it (scripts/build) or set "
                f"TIDEGATE_BIN_DIR to the folder holding the binaries")


def pytest_report_header(config):
    return f"tidegate binaries: {harness.bin_dir()}"


@pytest.fixture(autouse=True)
def _watchdog(request):
    """Every wait in these tests has its own deadline; this is the backstop should one hang:
    dump every thread's stack and end the run rather than sit there. A test that is long by
    design (API server restarts, fixed outages) sets its own with @pytest.mark.deadline(s)."""
    marker = request.node.get_closest_marker("deadline")
    faulthandler.dump_traceback_later(marker.args[0] if marker else TEST_DEADLINE_S, exit=True)
    yield
    faulthandler.cancel_dump_traceback_later()


def pytest_terminal_summary(terminalreporter):
    if harness.SUMMARY:
        terminalreporter.section("tidegate e2e figures")
        for line in harness.SUMMARY:
            terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    rep = yield
    setattr(item, "rep_" + rep.when, rep)
    if rep.failed:
        # The processes are still running here (teardown comes later): attach their logs to the
        # failure report so that pytest prints them with it.
        for s in getattr(item, "tidegate_stacks", []):
            for p in (s.dataplane, s.controller):
                rep.sections.append((f"{p.name} log ({p.log_path})", p.log()[-30000:]))
    return rep


def _failed(request) -> bool:
    for when in ("setup", "call"):
        rep = getattr(request.node, "rep_" + when, None)
        if rep is not None and rep.failed:
            return True
    return False


@pytest.fixture
def stack_factory(request, tmp_path):
    """Makes stacks that are not started yet; the test starts the pieces in the order it needs."""
    stacks: list[harness.Stack] = []
    request.node.tidegate_stacks = stacks

    def make(**kw) -> harness.Stack:
        root = tmp_path / f"stack{len(stacks)}"
        root.mkdir()
        s = harness.make_stack(root, **kw)
        stacks.append(s)
        return s

    yield make

    crashed = []
    for s in stacks:
        crashed += s.crashed()
        s.shutdown()
    if crashed and not _failed(request):
        pytest.fail("; ".join(crashed) + "\n" + "\n".join(s.dump_logs() for s in stacks))


@pytest.fixture
def stack(stack_factory) -> harness.Stack:
    """A running data plane and controller with an empty manifest folder, configured (ready)."""
    return stack_factory().start_ready()


@pytest.fixture(params=["http1", "http2"])
def over_both_protocols(request):
    """Runs a test over HTTP/1.1 and over HTTP/2 (prior knowledge): harness.proto_request() and
    Stack.get() speak the protocol of the run (modules opt in with pytestmark)."""
    harness.PROTOCOL = request.param
    yield request.param
    harness.PROTOCOL = "http1"
