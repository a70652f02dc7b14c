"""The one-node cluster's images (e2e/cluster/images/build), proven under podman: the echo
backend (body size, readiness on SIGTERM, graceful and abrupt exits, a WebSocket round trip),
the Tidegate image (non-root, read-only root file system, both programs working together), the
image sizes, and the archives' import into containerd under their full names.

The build is reused when nothing changed (a few seconds); a cold one (debootstrap and the C++
build inside the Dockerfile) takes minutes: see docs/images.md."""

from __future__ import annotations

import base64
import hashlib
import http.client
import json
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import harness

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
CACHE = Path(os.environ.get("TIDEGATE_CACHE", str(Path.home() / ".cache" / "tidegate")))
BUILD_TIMEOUT_S = 3600  # a cold build of everything is about 15-25 min on 2 busy cores
TIDEGATE_SIZE_LIMIT_MB = 120

ECHO = "docker.io/tidegate/echo:test"
PAUSE = "registry.k8s.io/pause:3.10"
TIDEGATE = "docker.io/tidegate/tidegate:test"


def podman_env() -> dict[str, str]:
    """The settings build uses (see containers.conf): runc, cgroupfs, ulimits, our storage."""
    env = dict(os.environ)
    env["CONTAINERS_CONF"] = str(HERE / "containers.conf")
    env["CONTAINERS_STORAGE_CONF"] = str(CACHE / "containers" / "storage.conf")
    env["TMPDIR"] = str(CACHE / "containers" / "tmp")
    return env


def podman(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    p = subprocess.run(["podman", *args], env=podman_env(), capture_output=True, text=True,
                       timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)}: exit {p.returncode}\n{p.stderr}")
    return p


@pytest.fixture(scope="module")
def archives() -> dict[str, Path]:
    t0 = time.monotonic()
    p = subprocess.run([str(HERE / "build")], capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT_S)
    elapsed = time.monotonic() - t0
    assert p.returncode == 0, f"e2e/cluster/images/build failed:\n{p.stderr[-20000:]}"
    harness.report(f"images: build took {elapsed:.1f} s")
    for line in p.stderr.splitlines():
        if " built in " in line or "made in" in line:
            harness.report(line)
    out = {}
    for line in p.stdout.splitlines():
        name, path = line.split()
        out[name] = Path(path)
    assert set(out) == {ECHO, PAUSE, TIDEGATE}, p.stdout
    return out


class Container:
    """A detached container on the host network, removed at the end."""

    def __init__(self, image: str, *args: str, env: dict[str, str] | None = None,
                 options: tuple[str, ...] = ()):
        self.name = f"tg-images-test-{os.getpid()}-{time.monotonic_ns()}"
        cmd = ["run", "-d", "--network", "host", "--name", self.name, *options]
        for k, v in (env or {}).items():
            cmd += ["-e", f"{k}={v}"]
        podman(*cmd, image, *args)

    def signal(self, sig: str) -> None:
        podman("kill", "--signal", sig, self.name)

    def wait(self, timeout: float) -> int:
        return int(podman("wait", self.name, timeout=timeout).stdout.strip())

    def pid(self) -> int:
        return int(podman("inspect", "--format", "{{.State.Pid}}", self.name).stdout.strip())

    def logs(self) -> str:
        p = podman("logs", self.name, check=False)
        return p.stdout + p.stderr

    def remove(self) -> None:
        podman("rm", "-f", "-t", "0", self.name, check=False)


@pytest.fixture
def containers():
    made: list[Container] = []

    def make(*args, **kw) -> Container:
        c = Container(*args, **kw)
        made.append(c)
        return c

    yield make
    for c in made:
        c.remove()


def http_get(port: int, path: str, timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Host": "echo.test", "X-Request-ID": "images-test"})
        r = conn.getresponse()
        return r.status, dict(r.getheaders()), r.read()
    finally:
        conn.close()


def status_of(port: int, path: str) -> int | None:
    try:
        return http_get(port, path, timeout=2)[0]
    except OSError:
        return None


def start_echo(containers, archives, **env) -> tuple[Container, int]:
    port = harness.free_port()
    c = containers(ECHO, env={"PORT": str(port), "POD_NAME": "echo-images-test",
                              "POD_IP": "127.0.0.1", **{k: str(v) for k, v in env.items()}})
    harness.wait_until(lambda: status_of(port, "/healthz") == 200, 20, "echo container's /healthz")
    return c, port


@pytest.mark.deadline(300)
def test_echo_go_unit_tests():
    go = shutil.which("go") or "/usr/local/go/bin/go"
    # The settings of build's `go build` (CGO off, -trimpath), so that the standard library it
    # compiled is reused: a first `go test` with other settings took over 2 min here.
    env = dict(os.environ, GOTOOLCHAIN="local", GOMODCACHE=str(CACHE / "go" / "mod"),
               GOCACHE=str(CACHE / "go" / "build"), GOFLAGS="-mod=mod", CGO_ENABLED="0")
    p = subprocess.run([go, "test", "-trimpath", "-count=1", "./..."], cwd=HERE / "echo",
                       env=env, capture_output=True, text=True, timeout=280)
    assert p.returncode == 0, p.stdout + p.stderr


def test_echo_answers_with_its_identity_and_body_size(archives, containers):
    c, port = start_echo(containers, archives, BODY_SIZE=2048)
    status, headers, body = http_get(port, "/some/path?x=1")
    assert status == 200 and len(body) == 2048, (status, len(body))
    a = json.loads(body)
    assert (a["pod"], a["pod_ip"], a["method"], a["path"], a["host"]) == \
        ("echo-images-test", "127.0.0.1", "GET", "/some/path", "echo.test")
    assert a["headers"]["X-Request-Id"] == "images-test"
    status, _, body = http_get(port, "/?size=1000000")
    assert status == 200 and len(body) == 1_000_000
    assert json.loads(body)["pod"] == "echo-images-test"
    assert status_of(port, "/readyz") == 200


def test_echo_graceful_sigterm(archives, containers):
    grace = 2
    c, port = start_echo(containers, archives, GRACE_SECONDS=grace, DRAIN_SECONDS=2)
    t0 = time.monotonic()
    c.signal("TERM")
    harness.wait_until(lambda: status_of(port, "/readyz") == 503, 2, "readyz failing after SIGTERM")
    flipped = time.monotonic() - t0
    assert status_of(port, "/healthz") == 200
    status, _, body = http_get(port, "/")
    assert status == 200, "the echo stopped serving during its grace period"
    code = c.wait(timeout=grace + 10)
    exited = time.monotonic() - t0
    harness.report(f"images: echo GRACE_SECONDS={grace}: readyz 503 after {flipped:.2f} s, "
                   f"exit {code} after {exited:.2f} s")
    assert code == 0, c.logs()
    assert grace <= exited < grace + 4, exited
    assert status_of(port, "/healthz") is None


def test_echo_abrupt_sigterm(archives, containers):
    c, port = start_echo(containers, archives, GRACE_SECONDS=0)
    t0 = time.monotonic()
    c.signal("TERM")
    code = c.wait(timeout=10)
    exited = time.monotonic() - t0
    harness.report(f"images: echo GRACE_SECONDS=0: exit {code} after {exited:.2f} s")
    assert code == 0, c.logs()
    assert exited < 1.5, exited


def ws_frame(opcode: int, payload: bytes) -> bytes:
    mask = os.urandom(4)
    n = len(payload)
    head = bytes([0x80 | opcode])
    if n <= 125:
        head += bytes([0x80 | n])
    elif n <= 0xFFFF:
        head += bytes([0x80 | 126]) + struct.pack("!H", n)
    else:
        head += bytes([0x80 | 127]) + struct.pack("!Q", n)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


def ws_read(f) -> tuple[int, bytes]:
    b0, b1 = f.read(2)
    n = b1 & 0x7F
    if n == 126:
        n = struct.unpack("!H", f.read(2))[0]
    elif n == 127:
        n = struct.unpack("!Q", f.read(8))[0]
    return b0 & 0x0F, f.read(n)


def test_echo_websocket_round_trip(archives, containers):
    c, port = start_echo(containers, archives)
    key = base64.b64encode(os.urandom(16)).decode()
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall((f"GET /ws HTTP/1.1\r\nHost: echo.test\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                   f"Sec-WebSocket-Version: 13\r\n\r\n").encode())
        f = s.makefile("rb")
        head = b""
        while not head.endswith(b"\r\n\r\n"):
            head += f.read(1)
        want = base64.b64encode(hashlib.sha1(
            (key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
        assert head.startswith(b"HTTP/1.1 101 "), head
        assert f"Sec-WebSocket-Accept: {want}".encode() in head, head
        for opcode, payload in ((1, "héllo".encode()), (2, os.urandom(70000)), (9, b"ping")):
            s.sendall(ws_frame(opcode, payload))
            got = ws_read(f)
            assert got == (10 if opcode == 9 else opcode, payload), (opcode, got[0], len(got[1]))
        s.sendall(ws_frame(8, struct.pack("!H", 1000)))
        op, payload = ws_read(f)
        assert op == 8 and struct.unpack("!H", payload[:2])[0] == 1000


def test_tidegate_image_runs_non_root_read_only(archives, containers, tmp_path):
    http_port, https_port, admin_port = (harness.free_port() for _ in range(3))
    # The control socket lives in a folder both containers mount, as an emptyDir in a pod.
    sock_dir = tmp_path / "sock"
    sock_dir.mkdir()
    sock_dir.chmod(0o777)
    ro = ("--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
          "-v", f"{sock_dir}:/run/tidegate")
    dp = containers(TIDEGATE, "/usr/local/bin/tidegate-dataplane",
                    "--control-socket", "/run/tidegate/control.sock",
                    "--http-listen", f"127.0.0.1:{http_port}",
                    "--https-listen", f"127.0.0.1:{https_port}",
                    "--admin-listen", f"127.0.0.1:{admin_port}", "--workers", "1", options=ro)
    harness.wait_until(lambda: status_of(admin_port, "/healthz") == 200, 20,
                       "the data plane's /healthz in the container")
    with open(f"/proc/{dp.pid()}/status") as f:
        ids = {k: v.split() for k, v in (line.split(":", 1) for line in f) if k in ("Uid", "Gid")}
    assert ids["Uid"][:2] == ["65532", "65532"] and ids["Gid"][0] == "65532", ids
    assert status_of(admin_port, "/readyz") != 200  # no configuration yet

    # The controller, from the same image, feeds it the demo's manifests.
    manifests = tmp_path / "manifests"
    shutil.copytree(REPO / "examples" / "demo", manifests,
                    ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    containers(TIDEGATE, "/usr/local/bin/tidegate-controller",
               "--dataplane-socket", "/run/tidegate/control.sock", "--manifests", "/manifests",
               options=(*ro, "-v", f"{manifests}:/manifests:ro"))
    harness.wait_until(lambda: status_of(admin_port, "/readyz") == 200, 30,
                       "the data plane ready with the controller's configuration")
    status, _, _ = http_get(http_port, "/")
    assert status in (404, 502, 503), status  # routed by the data plane (no demo backend runs)
    user = podman("image", "inspect", "--format", "{{.Config.User}}", TIDEGATE).stdout.strip()
    assert user == "65532:65532", user


def zombies_of(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] == "Z" and int(fields[1]) == pid:
                out.append(int(d.name))
    return out


def test_pause_reaps_orphans_and_exits_on_sigterm(tmp_path):
    """pause.c as PID 1 of a PID namespace of its own (as in a pod that shares one): orphans
    handed to it are reaped, and SIGTERM ends it with status 0."""
    if not shutil.which("unshare") or not shutil.which("nsenter"):
        pytest.skip("util-linux's unshare/nsenter are missing")
    exe = tmp_path / "pause"
    subprocess.run(["gcc", "-static", "-Os", "-Wall", "-Wextra", "-Werror", "-o", str(exe),
                    str(HERE / "pause" / "pause.c")], check=True, timeout=60)
    proc = subprocess.Popen(["unshare", "--pid", "--fork", "--kill-child", str(exe)],
                            stderr=subprocess.PIPE, text=True)
    try:
        def pause_pid():
            for d in Path("/proc").iterdir():
                if d.name.isdigit():
                    try:
                        if (d / "stat").read_text().split()[3] == str(proc.pid):
                            return int(d.name)
                    except (OSError, IndexError):
                        pass
            return None
        pid = harness.wait_until(pause_pid, 5, "pause started under unshare")
        # A shell in pause's namespace starts a short sleep and exits: the sleep is orphaned,
        # handed to pause (PID 1 there), and must not stay a zombie once it ends.
        subprocess.run(["nsenter", "-t", str(pid), "-p", "--", "sh", "-c", "sleep 0.3 & exit 0"],
                       check=True, timeout=10)
        time.sleep(0.8)
        assert zombies_of(pid) == [], "pause left a zombie"
        os.kill(pid, signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        assert "signal 15" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def image_size_mb(name: str) -> float:
    return int(podman("image", "inspect", "--format", "{{.Size}}", name).stdout) / 1e6


def test_image_sizes(archives):
    sizes = {name: image_size_mb(name) for name in
             (TIDEGATE, ECHO, PAUSE, "docker.io/library/debian:bookworm",
              "docker.io/library/debian:bookworm-slim")}
    for name, mb in sizes.items():
        harness.report(f"images: {name} {mb:.1f} MB")
    assert sizes[TIDEGATE] < TIDEGATE_SIZE_LIMIT_MB, sizes
    assert sizes[ECHO] < 15 and sizes[PAUSE] < 2, sizes


@pytest.mark.deadline(120)
def test_archives_import_into_containerd_with_their_names(archives):
    if not shutil.which("containerd") or not shutil.which("ctr"):
        pytest.skip("containerd is not installed (scripts/install-deps installs it)")
    with tempfile.TemporaryDirectory(prefix="tg-images-containerd-") as d:
        d = Path(d)
        address = d / "containerd.sock"
        # Only the content store and the snapshotter matter here: no CRI plugin (it would
        # touch /var/lib/cni and /run/containerd), a private root, state and socket.
        (d / "config.toml").write_text(
            "version = 2\n"
            f'root = "{d}/root"\nstate = "{d}/state"\n'
            'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
            f'[grpc]\n  address = "{address}"\n'
            f'[ttrpc]\n  address = "{address}.ttrpc"\n')
        log = open(d / "containerd.log", "w")
        proc = subprocess.Popen(["containerd", "--config", str(d / "config.toml")],
                                stdout=log, stderr=subprocess.STDOUT)
        try:
            ctr = ["ctr", "--address", str(address), "-n", "k8s.io"]
            harness.wait_until(lambda: subprocess.run([*ctr, "version"], capture_output=True)
                               .returncode == 0, 20, "the scratch containerd")
            for name, tar in archives.items():
                p = subprocess.run([*ctr, "images", "import", str(tar)], capture_output=True,
                                   text=True, timeout=90)
                assert p.returncode == 0, f"ctr import {tar}: {p.stderr}"
            listed = subprocess.run([*ctr, "images", "ls", "-q"], capture_output=True, text=True,
                                    check=True).stdout.split()
            for name in archives:
                assert name in listed, (name, listed)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            log.close()
