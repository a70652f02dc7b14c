"""Who may talk to the data plane's control socket (docs/proxy.md, "The control socket"): the
socket is created owner-only (0600); a peer of another UID is refused by its credentials
(SO_PEERCRED) even where the file's permissions would let it connect, unless
--control-allowed-uids names it; the controller (same UID) configures the data plane as ever."""

from __future__ import annotations

import os
import stat
import subprocess

import pytest

import harness

NOBODY = 65534

# Connects as another user and reports what the data plane did with the connection:
# "closed" (EOF at once) or "open" (still open after a second).
PEER = """
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(1.0)
s.connect(sys.argv[1])
try:
    print("closed" if s.recv(1) == b"" else "data")
except socket.timeout:
    print("open")
except ConnectionResetError:
    print("closed")
"""

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to connect as another UID")


def connect_as(uid: int, path) -> str:
    # Debian's python: the test's own interpreter may live where another user cannot read.
    r = subprocess.run(["/usr/bin/python3", "-c", PEER, str(path)], user=uid, group=uid,
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def open_to_everyone(path) -> None:
    """What a careless deployment might do: the file and its folder world-accessible."""
    os.chmod(path.parent, 0o755)
    os.chmod(path, 0o666)


def test_socket_is_owner_only_and_other_uids_are_refused(stack):
    path = stack.dataplane.socket_path
    st = os.stat(path)
    assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, oct(st.st_mode)
    assert st.st_uid == os.geteuid()

    open_to_everyone(path)
    mark = stack.dataplane.log_size()
    assert connect_as(NOBODY, path) == "closed"
    stack.dataplane.wait_for_log(rf"refused a connection from uid {NOBODY} \(pid \d+\)",
                                 since=mark)
    # Our own UID (the controller's) still gets in, and the data plane stays configured.
    assert connect_as(os.geteuid(), path) == "open"
    assert stack.dataplane.ready()


def test_allowed_uid_is_let_in(stack_factory):
    s = stack_factory(dataplane_args=["--control-allowed-uids", f"1234,{NOBODY}"])
    s.start_dataplane()
    open_to_everyone(s.dataplane.socket_path)
    mark = s.dataplane.log_size()
    assert connect_as(NOBODY, s.dataplane.socket_path) == "open"
    assert "refused a connection" not in s.dataplane.log(since=mark)


@pytest.mark.parametrize("value", ["abc", "1,,2", "1,", "-1", "4294967295", " 1"])
def test_bad_uid_list_is_refused_at_start(tmp_path, value):
    r = subprocess.run([str(harness.binary("tidegate-dataplane")), "--control-socket",
                        str(tmp_path / "c.sock"), "--control-allowed-uids", value,
                        "--http-listen", f"127.0.0.1:{harness.free_port()}",
                        "--https-listen", f"127.0.0.1:{harness.free_port()}",
                        "--admin-listen", f"127.0.0.1:{harness.free_port()}"],
                       capture_output=True, text=True, timeout=10)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "--control-allowed-uids" in r.stderr and "not a list of UIDs" in r.stderr, r.stderr
