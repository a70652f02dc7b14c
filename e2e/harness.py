"""Helpers for the Tidegate end-to-end tests: processes, manifests, backends and raw HTTP.

Everything runs on loopback. Nothing here sleeps for a fixed time where a condition can be
polled instead: see wait_until().
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Callable, Iterable
from urllib.parse import parse_qs, urlsplit

REPO = Path(__file__).resolve().parent.parent
INGRESS_CLASS = "tidegate"

# The HTTP/2 and gRPC clients of the tests are Debian's (python3-h2, python3-grpcio, installed by
# scripts/install-deps). The interpreter running the tests may be another build of the same
# Python version (a pyenv one): Debian's folder goes last on its path, so that it only supplies
# what the interpreter lacks.
if "/usr/lib/python3/dist-packages" not in sys.path:
    sys.path.append("/usr/lib/python3/dist-packages")


def bin_dir() -> Path:
    return Path(os.environ.get("TIDEGATE_BIN_DIR", REPO / "build" / "bin"))


def binary(name: str) -> Path:
    return bin_dir() / name


# ---------------------------------------------------------------------------------------------
# Reporting: lines printed in pytest's terminal summary (so that -q still shows them).

SUMMARY: list[str] = []


def report(line: str) -> None:
    print(line)
    SUMMARY.append(line)


# ---------------------------------------------------------------------------------------------
# Waiting


class WaitTimeout(AssertionError):
    pass


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.02):
    """Polls predicate() until it returns something truthy; returns that value.

    Exceptions raised by the predicate count as "not yet"; the last one is reported on timeout.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            value = predicate()
            if value:
                return value
            last = value
        except Exception as e:  # noqa: BLE001 - any failure means "not yet"
            last = e
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:.1f}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


_handed_out_ports: set[int] = set()
_port_lock = threading.Lock()


def _ephemeral_range() -> tuple[int, int]:
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing on host is bound to, for a process to listen on (or, for a "dead"
    endpoint, for nothing to listen on).

    Two things made bind(0) unsafe here: it can return the same port to two calls in a row (a
    data plane was once given one port for both --http-listen and --admin-listen), and its ports
    come from the kernel's ephemeral range, which outgoing connections also take from. So ports
    are picked at random below the ephemeral range, never twice by this process, and each is
    checked with a bind that fails while any socket (even one in TIME_WAIT) holds the port.
    """
    low = 10000
    high = _ephemeral_range()[0] - 1
    with _port_lock:
        for _ in range(1000):
            port = random.randint(low, high) if high - low > 1000 else 0
            if port in _handed_out_ports:
                continue
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                try:
                    s.bind((host, port))
                except OSError:
                    continue
                port = s.getsockname()[1]
            if port in _handed_out_ports:
                continue
            _handed_out_ports.add(port)
            return port
    raise RuntimeError(f"no free port on {host}")


def free_port_range(n: int, host: str = "127.0.0.1") -> tuple[int, int]:
    """n consecutive free ports (first, last), none handed out before: a range for the
    controller's --gateway-listener-ports. Chosen like free_port()."""
    low = 10000
    high = _ephemeral_range()[0] - n
    with _port_lock:
        for _ in range(1000):
            first = random.randint(low, high)
            ports = range(first, first + n)
            if any(p in _handed_out_ports for p in ports):
                continue
            socks = []
            try:
                for p in ports:
                    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                    socks.append(s)
                    s.bind((host, p))
            except OSError:
                continue
            finally:
                for s in socks:
                    s.close()
            _handed_out_ports.update(ports)
            return first, first + n - 1
    raise RuntimeError(f"no {n} free consecutive ports on {host}")


# ---------------------------------------------------------------------------------------------
# Processes


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL it if the test process dies, so that no data plane or
    controller outlives an aborted run."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:  # noqa: BLE001 - best effort
        pass


class Process:
    """One child process whose stdout+stderr go to a log file (appended across restarts)."""

    def __init__(self, name: str, argv: list[str], log_path: Path):
        self.name = name
        self.argv = argv
        self.log_path = log_path
        self.popen: subprocess.Popen | None = None
        self.expected_exit = False
        self.exits: list[int] = []

    def start(self) -> "Process":
        assert self.popen is None or self.popen.poll() is not None, f"{self.name} already running"
        exe = Path(self.argv[0])
        if not exe.exists():
            raise FileNotFoundError(f"{exe} not found: build it or set TIDEGATE_BIN_DIR")
        with open(self.log_path, "ab") as log:
            log.write(f"===== start {' '.join(self.argv)}\n".encode())
            log.flush()
            self.popen = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL, start_new_session=True,
                                          preexec_fn=_die_with_parent)
        self.expected_exit = False
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def returncode(self) -> int | None:
        return None if self.popen is None else self.popen.poll()

    def send_signal(self, sig: int) -> None:
        assert self.popen is not None
        self.popen.send_signal(sig)

    def kill(self) -> int:
        """SIGKILL and reap."""
        return self.stop(sig=signal.SIGKILL)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 5.0) -> int:
        """Sends sig, waits for the exit (SIGKILL after timeout). Returns the exit status."""
        if self.popen is None:
            return 0
        self.expected_exit = True
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait(5)
                with open(self.log_path, "ab") as log:
                    log.write(f"===== {self.name} did not exit within {timeout}s of signal {sig}; "
                              f"killed\n".encode())
        rc = self.popen.returncode
        self.exits.append(rc)
        with open(self.log_path, "ab") as log:
            log.write(f"===== {self.name} exited with {rc}\n".encode())
        return rc

    def log(self, since: int = 0) -> str:
        """The log from byte offset `since` (see log_size())."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(since)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def wait_for_log(self, pattern: str, timeout: float = 5.0, since: int = 0) -> re.Match:
        """Waits for a regex to match the log (from byte offset `since`); returns the match."""
        rx = re.compile(pattern)

        def find():
            return rx.search(self.log(since))

        return wait_until(find, timeout, f"{self.name} log to match {pattern!r}", interval=0.05)


class Dataplane(Process):
    def __init__(self, log_path: Path, socket_path: Path, http_port: int, admin_port: int,
                 workers: int = 2, extra: Iterable[str] = ()):
        self.socket_path = socket_path
        self.http_port = http_port
        self.admin_port = admin_port
        argv = [str(binary("tidegate-dataplane")),
                "--control-socket", str(socket_path),
                "--http-listen", f"127.0.0.1:{http_port}",
                "--admin-listen", f"127.0.0.1:{admin_port}",
                # Never started (no TLS yet) but must parse; keep it on loopback all the same.
                "--https-listen", f"127.0.0.1:{free_port()}",
                "--workers", str(workers), *extra]
        super().__init__("dataplane", argv, log_path)

    def admin(self, path: str, timeout: float = 2.0) -> tuple[int, str]:
        conn = http.client.HTTPConnection("127.0.0.1", self.admin_port, timeout=timeout)
        try:
            conn.request("GET", path)
            r = conn.getresponse()
            return r.status, r.read().decode()
        finally:
            conn.close()

    def wait_listening(self, timeout: float = 10.0) -> None:
        def up():
            if not self.alive():
                raise AssertionError(f"data plane exited with {self.returncode()}")
            return self.admin("/healthz")[0] == 200
        wait_until(up, timeout, "data plane /healthz")

    def version(self) -> int:
        status, body = self.admin("/version")
        assert status == 200, (status, body)
        return int(body.strip())

    def ready(self) -> bool:
        return self.admin("/readyz")[0] == 200

    def wait_ready(self, timeout: float = 10.0) -> None:
        wait_until(self.ready, timeout, "data plane /readyz == 200")


def scrape_metrics(dp: "Dataplane") -> dict[str, float]:
    """The data plane's /metrics as {series with labels: value}."""
    status, body = dp.admin("/metrics")
    assert status == 200, (status, body[:300])
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


class Controller(Process):
    def __init__(self, log_path: Path, socket_path: Path, manifests: Path,
                 extra: Iterable[str] = ()):
        argv = [str(binary("tidegate-controller")),
                "--dataplane-socket", str(socket_path),
                "--manifests", str(manifests), *extra]
        super().__init__("controller", argv, log_path)


# ---------------------------------------------------------------------------------------------
# Manifests


def _yaml_scalar(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (int, float)):
        return str(v)
    return json.dumps(str(v))  # a JSON string is a valid YAML double-quoted scalar


def to_yaml(obj: Any, indent: int = 0) -> str:
    """A small block-style YAML emitter for dicts, lists and scalars."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(obj, dict):
        if not obj:
            return pad + "{}\n"
        for k, v in obj.items():
            if isinstance(v, (dict, list)) and v:
                lines.append(f"{pad}{k}:\n{to_yaml(v, indent + 2)}")
            elif isinstance(v, (dict, list)):
                lines.append(f"{pad}{k}: {'{}' if isinstance(v, dict) else '[]'}\n")
            else:
                lines.append(f"{pad}{k}: {_yaml_scalar(v)}\n")
        return "".join(lines)
    if isinstance(obj, list):
        if not obj:
            return pad + "[]\n"
        for item in obj:
            if isinstance(item, (dict, list)) and item:
                body = to_yaml(item, indent + 2)
                # "- " takes the place of the first line's indentation.
                lines.append(f"{pad}- {body[indent + 2:]}")
            elif isinstance(item, dict):
                lines.append(f"{pad}- {{}}\n")
            elif isinstance(item, list):
                lines.append(f"{pad}- []\n")
            else:
                lines.append(f"{pad}- {_yaml_scalar(item)}\n")
        return "".join(lines)
    return pad + _yaml_scalar(obj) + "\n"


class ManifestDir:
    """The folder the controller watches. Every write is atomic: a hidden temp file in the same
    folder, then rename(2) over the target, so the controller never reads half a file."""

    def __init__(self, path: Path):
        self.path = path
        path.mkdir(parents=True, exist_ok=True)

    def write_text(self, name: str, text: str) -> Path:
        target = self.path / name
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=self.path)
        try:
            with os.fdopen(fd, "w") as f:
                f.write(text)
            os.rename(tmp, target)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return target

    def write(self, name: str, *docs: dict) -> Path:
        """Writes objects as YAML documents (or a JSON List for *.json)."""
        if name.endswith(".json"):
            if len(docs) == 1:
                text = json.dumps(docs[0], indent=2)
            else:
                text = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)},
                                  indent=2)
        else:
            text = "".join("---\n" + to_yaml(d) for d in docs)
        return self.write_text(name, text)

    def remove(self, name: str) -> None:
        os.unlink(self.path / name)


def ingress(name: str, rules: list[dict] | None = None, default_backend: dict | None = None,
            namespace: str = "default", ingress_class: str | None = INGRESS_CLASS,
            annotations: dict | None = None) -> dict:
    spec: dict = {}
    if ingress_class is not None:
        spec["ingressClassName"] = ingress_class
    if default_backend is not None:
        spec["defaultBackend"] = default_backend
    if rules is not None:
        spec["rules"] = rules
    meta: dict = {"name": name, "namespace": namespace}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": meta,
            "spec": spec}


def backend_ref(service: str, port: int | str = 80) -> dict:
    p = {"number": port} if isinstance(port, int) else {"name": port}
    return {"service": {"name": service, "port": p}}


def rule(host: str | None, *paths: dict) -> dict:
    r: dict = {"http": {"paths": list(paths)}}
    if host is not None:
        r = {"host": host, **r}
    return r


def path(p: str, service: str, path_type: str = "Prefix", port: int | str = 80) -> dict:
    return {"path": p, "pathType": path_type, "backend": backend_ref(service, port)}


def service(name: str, port: int = 80, port_name: str = "http", namespace: str = "default",
            target_port: int | str | None = None) -> dict:
    sp: dict = {"name": port_name, "port": port, "protocol": "TCP"}
    if target_port is not None:
        sp["targetPort"] = target_port
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"type": "ClusterIP", "ports": [sp]}}


def endpoint_slice(name: str, service_name: str, addresses: list[str], port: int,
                   port_name: str = "http", namespace: str = "default",
                   not_ready: Iterable[str] = ()) -> dict:
    not_ready = set(not_ready)
    eps = []
    for a in addresses:
        eps.append({"addresses": [a], "conditions": {"ready": a not in not_ready}})
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"kubernetes.io/service-name": service_name}},
            "addressType": "IPv4",
            "endpoints": eps,
            "ports": [{"name": port_name, "port": port, "protocol": "TCP"}]}


def service_with_backend(name: str, backend: "Backend") -> list[dict]:
    """A Service on port 80 plus a one-endpoint EndpointSlice pointing at `backend`."""
    return [service(name),
            endpoint_slice(f"{name}-1", name, [backend.host], backend.port)]


# ---------------------------------------------------------------------------------------------
# Backends


def pattern_bytes(n: int, seed: int = 1) -> bytes:
    return random.Random(seed).randbytes(n)


def sha256(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


class _BackendHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # The handler writes the head and the body separately: without TCP_NODELAY, Nagle holds
    # the body until the head is ACKed, which the peer delays by up to 40 ms.
    disable_nagle_algorithm = True
    server: "_BackendServer"

    def log_message(self, fmt, *args):  # keep test output quiet
        pass

    # -- connection tracking, so that stop() can close idle keep-alive connections ----------
    def setup(self):
        super().setup()
        self.busy = False
        self.server.track(self, True)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.track(self, False)

    def parse_request(self):
        with self.server.lock:
            self.busy = True
        return super().parse_request()

    def _done(self):
        if self.server.stopping:
            self.close_connection = True
        with self.server.lock:
            self.busy = False

    def send_error(self, code, message=None, explain=None):
        # Only reached for requests the handler could not parse: bytes that are not HTTP.
        with self.server.lock:
            self.server.protocol_errors.append(
                f"{code} {message}: request line {self.raw_requestline[:100]!r}")
        super().send_error(code, message, explain)

    # -- request body -------------------------------------------------------------------------
    def _read_body(self) -> tuple[bytes, bool]:
        te = self.headers.get("Transfer-Encoding", "")
        if "chunked" in te.lower():
            chunks = []
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline(3)
            return b"".join(chunks), True
        n = int(self.headers.get("Content-Length", "0") or 0)
        return (self.rfile.read(n) if n else b""), False

    # -- dispatch -----------------------------------------------------------------------------
    def do_GET(self):
        self._handle()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_HEAD = do_GET

    def _send(self, status: int, body: bytes, content_type: str = "application/json",
              extra: dict | None = None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("X-Backend", self.server.name)
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        if status not in (204, 304):
            self.send_header("Content-Length", str(len(body)))
        if self.server.stopping:
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD" and status not in (204, 304):
            self.wfile.write(body)

    def _handle(self):
        try:
            self.__handle()
        finally:
            self._done()

    def __handle(self):
        srv = self.server
        url = urlsplit(self.path)
        q = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body, chunked = self._read_body()
        record = {
            "backend": srv.name,
            "method": self.command,
            "path": self.path,
            "version": self.request_version,
            "headers": [[k, v] for k, v in self.headers.items()],
            "body_len": len(body),
            "body_sha256": sha256(body),
            "request_chunked": chunked,
            "client_port": self.client_address[1],
        }
        with srv.lock:
            srv.count += 1
            if srv.record:
                srv.requests.append(record)
            delay, fixed_status = srv.delay, srv.fixed_status
        if delay:
            time.sleep(delay)
        if fixed_status:
            # A backend in trouble: this status for every request, whatever it asks for.
            self._send(fixed_status, f"status {fixed_status} from {srv.name}\n".encode(),
                       "text/plain")
            return
        respond = q.get("respond", "echo")
        if respond == "name":
            self._send(200, srv.name.encode(), "text/plain")
        elif respond == "status":
            self._send(int(q["code"]), b"" if q.get("empty") else f"status {q['code']}\n".encode(),
                       "text/plain")
        elif respond == "bytes":
            data = pattern_bytes(int(q["size"]), int(q.get("seed", 1)))
            self._send(200, data, "application/octet-stream",
                       {"X-Body-SHA256": sha256(data)})
        elif respond == "chunked":
            self._send_chunked(int(q.get("chunks", 5)), int(q.get("chunk_size", 1000)),
                               float(q.get("delay_ms", 0)) / 1000, int(q.get("seed", 1)),
                               float(q.get("final_delay_ms", 0)) / 1000)
        elif respond == "early_hints":
            # An interim 103 before the final answer.
            self.send_response_only(103)
            self.send_header("Link", "</style.css>; rel=preload; as=style")
            self.end_headers()
            self._send(200, json.dumps(record).encode())
        elif respond == "hop":
            # Hop-by-hop fields in a response: a proxy must not pass them on.
            self._send(200, b"hop\n", "text/plain", {"Connection": "X-Internal",
                                                     "X-Internal": "secret",
                                                     "Keep-Alive": "timeout=5",
                                                     "X-End-To-End": "kept"})
        elif respond == "truncated":
            # Promises more than it sends, then closes.
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", q.get("promise", "100000"))
            self.end_headers()
            self.wfile.write(b"x" * int(q.get("size", "1000")))
            self.close_connection = True
        elif respond == "auth":
            # An authentication service (auth-url): decides by the Authorization header.
            token = self.headers.get("Authorization", "")
            if token == "Bearer good":
                extra = {"X-User": "ann", "X-Email": "ann@example.com"}
                if q.get("cookie"):
                    extra["Set-Cookie"] = "sso=refreshed; Path=/"
                self._send(200, b"", "text/plain", extra)
            elif token == "Bearer forbidden":
                self._send(403, b"forbidden by auth\n", "text/plain")
            elif token == "Bearer broken":
                self._send(502, b"auth is broken\n", "text/plain")
            else:
                self._send(401, b"who are you\n", "text/plain",
                           {"WWW-Authenticate": 'Bearer realm="sso"'})
        elif respond == "hsts":
            # A backend that sets its own Strict-Transport-Security.
            self._send(200, b"hsts\n", "text/plain", {"Strict-Transport-Security": "max-age=5"})
        elif respond == "bigheader":
            self._send(200, b"big\n", "text/plain", {"X-Big": "b" * int(q.get("size", 70000))})
        elif respond == "close":
            # A close-delimited body: no Content-Length, no chunking.
            data = pattern_bytes(int(q.get("size", 5000)), int(q.get("seed", 1)))
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Connection", "close")
            self.send_header("X-Body-SHA256", sha256(data))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)
            self.close_connection = True
        else:
            self._send(200, json.dumps(record).encode())

    def _send_chunked(self, chunks: int, size: int, delay: float, seed: int,
                      final_delay: float = 0.0):
        data = pattern_bytes(chunks * size, seed)
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("X-Body-SHA256", sha256(data))
        self.send_header("X-Backend", self.server.name)
        self.end_headers()
        if self.command == "HEAD":
            return
        for i in range(chunks):
            piece = data[i * size:(i + 1) * size]
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.flush()
            if delay:
                time.sleep(delay)
        if final_delay:
            time.sleep(final_delay)  # the last-chunk in a packet of its own
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


class _BackendServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256

    def __init__(self, addr, name: str, record: bool):
        self.name = name
        self.record = record
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.protocol_errors: list[str] = []
        self.count = 0
        self.stopping = False
        self.handlers: set[_BackendHandler] = set()
        self.connections_accepted = 0
        self.delay = 0.0  # seconds before each answer
        self.fixed_status: int | None = None  # answer every request with this status
        super().__init__(addr, _BackendHandler)

    def track(self, handler: _BackendHandler, add: bool) -> None:
        with self.lock:
            if add:
                self.handlers.add(handler)
                self.connections_accepted += 1
            else:
                self.handlers.discard(handler)


class Backend:
    """An HTTP/1.1 backend in a thread of the test process."""

    def __init__(self, name: str, host: str = "127.0.0.1", port: int = 0, record: bool = True):
        self.name = name
        self.server = _BackendServer((host, port), name, record)
        self.host, self.port = self.server.server_address[:2]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05},
                                       name=f"backend-{name}", daemon=True)
        self.thread.start()
        self.stopped = False

    @property
    def count(self) -> int:
        with self.server.lock:
            return self.server.count

    @property
    def requests(self) -> list[dict]:
        with self.server.lock:
            return list(self.server.requests)

    @property
    def protocol_errors(self) -> list[str]:
        """Requests this backend could not parse (what a proxy must never send)."""
        with self.server.lock:
            return list(self.server.protocol_errors)

    @property
    def connections_accepted(self) -> int:
        with self.server.lock:
            return self.server.connections_accepted

    def answer_with(self, status: int | None) -> None:
        """Every request gets `status` (a short text body naming the backend); None: normal."""
        with self.server.lock:
            self.server.fixed_status = status

    def slow_down(self, seconds: float) -> None:
        """Every request waits `seconds` before it is answered."""
        with self.server.lock:
            self.server.delay = seconds

    def stop(self) -> None:
        """Stops like a terminating pod: closes the listener, lets requests in progress finish
        (with Connection: close), closes idle keep-alive connections."""
        if self.stopped:
            return
        self.stopped = True
        srv = self.server
        srv.stopping = True
        srv.shutdown()
        srv.server_close()
        with srv.lock:
            idle = [h for h in srv.handlers if not h.busy]
        for h in idle:
            try:
                h.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class _TlsHandler(_BackendHandler):
    """The harness's recording backend, behind a TLS handshake done in the handler's thread."""

    def setup(self):
        srv = self.server
        try:
            self.request.do_handshake()
        except (ssl.SSLError, OSError) as e:
            with srv.lock:
                srv.handshake_errors.append(str(e))
            raise
        with srv.lock:
            srv.handshakes += 1
        super().setup()


class TlsBackend(Backend):
    """A Backend speaking HTTPS with `cert`; records the SNI of every handshake."""

    def __init__(self, name: str, cert_file, key_file, host: str = "127.0.0.1", port: int = 0):
        self.name = name
        self.server = _BackendServer((host, port), name, True)
        self.server.RequestHandlerClass = _TlsHandler
        self.server.handshakes = 0
        self.server.handshake_errors = []
        self.server.handle_error = lambda request, address: None  # failed handshakes are expected
        self.sni: list[str | None] = []
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert_file, key_file)

        def on_sni(sock, server_name, context):
            with self.server.lock:
                self.sni.append(server_name)
        ctx.sni_callback = on_sni
        # The handshake happens in the handler's thread (_TlsHandler.setup), not in accept().
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True,
                                             do_handshake_on_connect=False)
        self.host, self.port = self.server.server_address[:2]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, name=f"backend-{name}",
                                       daemon=True)
        self.thread.start()
        self.stopped = False

    @property
    def handshakes(self) -> int:
        with self.server.lock:
            return self.server.handshakes

    @property
    def handshake_errors(self) -> list[str]:
        with self.server.lock:
            return list(self.server.handshake_errors)

    @property
    def server_names(self) -> list[str | None]:
        with self.server.lock:
            return list(self.sni)


def header_values(record: dict, name: str) -> list[str]:
    return [v for k, v in record["headers"] if k.lower() == name.lower()]


# ---------------------------------------------------------------------------------------------
# Clients


@dataclass
class Response:
    status: int
    reason: str
    version: str
    headers: list[tuple[str, str]]
    body: bytes
    chunked: bool = False

    def header(self, name: str) -> str | None:
        for k, v in self.headers:
            if k.lower() == name.lower():
                return v
        return None

    def json(self) -> dict:
        return json.loads(self.body.decode())

    @property
    def text(self) -> str:
        return self.body.decode(errors="replace")


def request(port: int, method: str = "GET", target: str = "/", host: str | None = "example.com",
            headers: dict | None = None, body: bytes | None = None,
            timeout: float = 10.0, source: str | None = None) -> Response:
    """One request on a fresh connection with http.client (from the loopback address `source`
    when given)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout,
                                      source_address=(source, 0) if source else None)
    try:
        hdrs = dict(headers or {})
        skip_host = host is None or "Host" in hdrs
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        if not skip_host:
            conn.putheader("Host", host)
        for k, v in hdrs.items():
            conn.putheader(k, v)
        if body is not None and "Content-Length" not in hdrs and "Transfer-Encoding" not in hdrs:
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        r = conn.getresponse()
        data = r.read()
        return Response(r.status, r.reason, f"HTTP/{r.version / 10:.1f}", list(r.getheaders()),
                        data, r.chunked if hasattr(r, "chunked") else False)
    finally:
        conn.close()


# The protocol proto_request() and Stack.get() speak: "http1" (http.client) or "http2"
# (H2Client, prior knowledge). Set per test by conftest's over_both_protocols fixture; waits for
# configuration (Stack.wait_route) always use HTTP/1.1.
PROTOCOL = "http1"


def proto_request(port: int, method: str = "GET", target: str = "/",
                  host: str | None = "example.com", headers: dict | None = None,
                  body: bytes | None = None, timeout: float = 10.0,
                  source: str | None = None) -> "Response":
    """request() over the protocol of the test (PROTOCOL)."""
    if PROTOCOL == "http2":
        return h2_request(port, method, target, host, headers, body, timeout, source=source)
    return request(port, method, target, host, headers, body, timeout, source)


class H2Client:
    """An HTTP/2 client connection (python3-h2): cleartext with prior knowledge, or TLS with ALPN
    h2. request() runs one stream to its end; open_stream()/read_stream() interleave several."""

    def __init__(self, port: int, tls: bool = False, server_name: str | None = None,
                 timeout: float = 10.0, settings: dict | None = None,
                 source: str | None = None):
        import h2.config
        import h2.connection
        self.timeout = timeout
        if tls:
            self.sock = tls_connect(port, server_name, alpn=["h2", "http/1.1"], timeout=timeout)
            if self.sock.selected_alpn_protocol() != "h2":
                proto = self.sock.selected_alpn_protocol()
                self.sock.close()
                raise AssertionError(f"ALPN chose {proto!r}, not h2")
        else:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout,
                                                 source_address=(source, 0) if source else None)
        self.sock.settimeout(timeout)
        cfg = h2.config.H2Configuration(client_side=True, header_encoding=None,
                                        validate_inbound_headers=False,
                                        validate_outbound_headers=False,
                                        normalize_outbound_headers=False)
        self.conn = h2.connection.H2Connection(config=cfg)
        self.conn.initiate_connection()
        if settings:
            self.conn.update_settings(settings)
        self.streams: dict[int, dict] = {}
        self.goaway: Any = None
        self.closed = False
        self.flush()

    def flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def open_stream(self, method: str = "GET", target: str = "/",
                    authority: str | None = "example.com", headers: list | dict | None = None,
                    body: bytes | None = None, end: bool = True, scheme: str = "http") -> int:
        sid = self.conn.get_next_available_stream_id()
        hdrs = [(":method", method), (":scheme", scheme), (":path", target)]
        if authority is not None:
            hdrs.insert(1, (":authority", authority))
        items = headers.items() if isinstance(headers, dict) else (headers or [])
        hdrs += [(k.lower(), v) for k, v in items]
        self.streams[sid] = {"headers": [], "informational": [], "data": b"", "trailers": [],
                             "ended": False, "reset": None}
        self.conn.send_headers(sid, hdrs, end_stream=end and not body)
        if body:
            self.send_body(sid, body, end=end)
        self.flush()
        return sid

    def send_body(self, sid: int, body: bytes, end: bool = True) -> None:
        """Sends as much as the windows allow, reading frames while they are shut."""
        view = memoryview(body)
        while view:
            window = min(self.conn.local_flow_control_window(sid),
                         self.conn.max_outbound_frame_size)
            if window <= 0:
                self.flush()
                self._read_events()
                continue
            self.conn.send_data(sid, bytes(view[:window]))
            view = view[window:]
            self.flush()
        if end:
            self.conn.end_stream(sid)
            self.flush()

    def _read_events(self) -> None:
        import h2.events as ev
        data = self.sock.recv(65536)
        if not data:
            self.closed = True
            raise ConnectionError("connection closed by the server")
        for e in self.conn.receive_data(data):
            st = self.streams.get(getattr(e, "stream_id", None) or -1)
            if isinstance(e, ev.ResponseReceived):
                st["headers"] = e.headers
            elif isinstance(e, ev.InformationalResponseReceived):
                st["informational"].append(e.headers)
            elif isinstance(e, ev.TrailersReceived):
                st["trailers"] = e.headers
            elif isinstance(e, ev.DataReceived):
                st["data"] += e.data
                self.conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
            elif isinstance(e, ev.StreamEnded):
                st["ended"] = True
            elif isinstance(e, ev.StreamReset):
                if st is not None:
                    st["reset"] = e.error_code
                    st["ended"] = True
            elif isinstance(e, ev.ConnectionTerminated):
                self.goaway = e
        self.flush()

    def read_stream(self, sid: int) -> "Response":
        deadline = time.monotonic() + self.timeout
        st = self.streams[sid]
        while not st["ended"]:
            if time.monotonic() > deadline:
                raise TimeoutError(f"stream {sid} did not end")
            if self.goaway is not None and sid > self.goaway.last_stream_id:
                raise ConnectionError(f"GOAWAY before stream {sid}: {self.goaway}")
            self._read_events()
        if st["reset"] is not None and not st["headers"]:
            raise ConnectionError(f"stream {sid} reset with error {st['reset']}")
        return self.response(sid)

    def response(self, sid: int) -> "Response":
        st = self.streams[sid]
        hdrs = [(k.decode(), v.decode()) for k, v in st["headers"]]
        status = int(dict(hdrs).get(":status", "0"))
        r = Response(status, "", "HTTP/2", [(k, v) for k, v in hdrs if not k.startswith(":")],
                     st["data"])
        r.trailers = [(k.decode(), v.decode()) for k, v in st["trailers"]]
        r.reset = st["reset"]
        return r

    def request(self, method: str = "GET", target: str = "/", host: str | None = "example.com",
                headers: dict | list | None = None, body: bytes | None = None) -> "Response":
        return self.read_stream(self.open_stream(method, target, host, headers, body))

    def close(self) -> None:
        try:
            if not self.closed:
                self.conn.close_connection()
                self.flush()
        except OSError:
            pass
        self.sock.close()

    def __enter__(self) -> "H2Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def h2_request(port: int, method: str = "GET", target: str = "/",
               host: str | None = "example.com", headers: dict | None = None,
               body: bytes | None = None, timeout: float = 10.0, tls: bool = False,
               server_name: str | None = None, source: str | None = None) -> "Response":
    """As request(), over a fresh HTTP/2 connection (prior knowledge, or TLS + ALPN h2). A Host
    in `headers` becomes the :authority, as an HTTP/2 client sends it."""
    hdrs = dict(headers or {})
    for k in list(hdrs):
        if k.lower() == "host":
            host = hdrs.pop(k)
    with H2Client(port, tls=tls, server_name=server_name, timeout=timeout, source=source) as c:
        return c.request(method, target, host, hdrs, body)


class RawConnection:
    """A client socket with a response parser that keeps its buffer between responses, for
    pipelining, Expect: 100-continue and HTTP/1.0."""

    def __init__(self, port: int, timeout: float = 10.0):
        self.timeout = timeout
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _fill(self) -> bool:
        chunk = self.sock.recv(65536)
        if not chunk:
            return False
        self.buf += chunk
        return True

    def read_line(self) -> bytes:
        while b"\r\n" not in self.buf:
            if not self._fill():
                raise EOFError(f"connection closed; buffered {self.buf[:200]!r}")
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def read_exact(self, n: int) -> bytes:
        while len(self.buf) < n:
            if not self._fill():
                raise EOFError(f"connection closed after {len(self.buf)} of {n} bytes")
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def read_until_close(self) -> bytes:
        while self._fill():
            pass
        data, self.buf = self.buf, b""
        return data

    def closed_by_peer(self, timeout: float = 2.0) -> bool:
        """True when the peer closes (EOF or reset) within timeout with nothing more to read."""
        if self.buf:
            return False
        self.sock.settimeout(timeout)
        try:
            data = self.sock.recv(1)
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False
        if data:
            self.buf += data
            return False
        return True

    def stray_bytes(self, timeout: float = 0.3) -> bytes:
        """Whatever arrives within timeout although no request is outstanding (should be b"")."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    break
                self.buf += chunk
        except socket.timeout:
            pass
        finally:
            self.sock.settimeout(self.timeout)
        data, self.buf = self.buf, b""
        return data

    def read_head(self) -> tuple[str, int, str, list[tuple[str, str]]]:
        raw = self.read_line()
        status_line = raw.decode("latin-1")
        if not re.fullmatch(r"HTTP/\d\.\d \d{3}( .*)?", status_line):
            raise AssertionError(f"malformed status line {raw!r} (stray bytes before a response?);"
                                 f" then {self.buf[:100]!r}")
        version, status, *reason = status_line.split(" ", 2)
        headers = []
        while True:
            line = self.read_line()
            if not line:
                break
            k, v = line.decode("latin-1").split(":", 1)
            headers.append((k.strip(), v.strip()))
        return version, int(status), (reason[0] if reason else ""), headers

    def read_response(self, method: str = "GET") -> Response:
        version, status, reason, headers = self.read_head()
        h = {k.lower(): v for k, v in headers}
        body = b""
        chunked = False
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            pass
        elif "chunked" in h.get("transfer-encoding", "").lower():
            chunked = True
            parts = []
            while True:
                size = int(self.read_line().split(b";")[0], 16)
                if size == 0:
                    while self.read_line():
                        pass
                    break
                parts.append(self.read_exact(size))
                assert self.read_exact(2) == b"\r\n"
            body = b"".join(parts)
        elif "content-length" in h:
            body = self.read_exact(int(h["content-length"]))
        else:
            body = self.read_until_close()
        return Response(status, reason, version, headers, body, chunked)


@dataclass
class Stack:
    """A data plane, a controller and their manifest folder, plus the backends of one test."""

    root: Path
    manifests: ManifestDir
    dataplane: Dataplane
    controller: Controller
    backends: list[Backend] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.dataplane.http_port

    def backend(self, name: str, host: str = "127.0.0.1", port: int = 0,
                record: bool = True) -> Backend:
        b = Backend(name, host, port, record)
        self.backends.append(b)
        return b

    def get(self, target: str = "/", host: str | None = "example.com", **kw) -> Response:
        return proto_request(self.port, "GET", target, host, **kw)

    def wait_route(self, target: str, host: str | None, check: Callable[[Response], bool],
                   timeout: float = 10.0, what: str | None = None) -> Response:
        """Polls the proxy until check(response) holds; returns that response."""
        last: list[Response] = []

        def probe():
            r = request(self.port, "GET", target, host, timeout=5.0)
            last[:] = [r]
            return r if check(r) else None
        try:
            return wait_until(probe, timeout, what or f"{host}{target} to satisfy the check",
                              interval=0.03)
        except WaitTimeout as e:
            if last:
                r = last[0]
                raise WaitTimeout(f"{e}; last response: {r.status} {r.headers} "
                                  f"{r.body[:300]!r}") from None
            raise

    def wait_backend(self, target: str, host: str | None, backend: str,
                     timeout: float = 10.0) -> Response:
        return self.wait_route(target, host,
                               lambda r: r.status == 200 and r.header("X-Backend") == backend,
                               timeout, f"{host}{target} to reach backend {backend}")

    def wait_status(self, target: str, host: str | None, status: int,
                    timeout: float = 10.0) -> Response:
        return self.wait_route(target, host, lambda r: r.status == status, timeout,
                               f"{host}{target} to answer {status}")

    def start_dataplane(self) -> Dataplane:
        self.dataplane.start()
        self.dataplane.wait_listening()
        return self.dataplane

    def start_controller(self) -> Controller:
        self.controller.start()
        return self.controller

    def start_ready(self) -> "Stack":
        """Starts the data plane, then the controller, and waits until the data plane is
        configured."""
        self.start_dataplane()
        self.start_controller()
        self.dataplane.wait_ready()
        return self

    def crashed(self) -> list[str]:
        """Processes that exited although no test asked them to."""
        out = []
        for p in (self.dataplane, self.controller):
            if p.popen is not None and not p.expected_exit and p.popen.poll() is not None:
                out.append(f"{p.name} exited unexpectedly with {p.popen.returncode}")
        return out

    def shutdown(self) -> dict[str, int]:
        codes = {}
        for p in (self.controller, self.dataplane):
            if p.alive():
                codes[p.name] = p.stop()
        for b in self.backends:
            b.stop()
        shutil.rmtree(self.dataplane.socket_path.parent, ignore_errors=True)
        return codes

    def dump_logs(self) -> str:
        parts = []
        for p in (self.dataplane, self.controller):
            parts.append(f"----- {p.name} log ({p.log_path}) -----\n{p.log()[-20000:]}")
        return "\n".join(parts)


def make_stack(tmp: Path, workers: int = 2, controller_args: Iterable[str] = (),
               dataplane_args: Iterable[str] = ()) -> Stack:
    # Unix socket paths are limited to 108 bytes; pytest's tmp paths can be longer.
    sock_dir = Path(tempfile.mkdtemp(prefix="tg-e2e-"))
    socket_path = sock_dir / "control.sock"
    manifests = ManifestDir(tmp / "manifests")
    dp = Dataplane(tmp / "dataplane.log", socket_path, free_port(), free_port(), workers,
                   dataplane_args)
    ctl = Controller(tmp / "controller.log", socket_path, manifests.path, controller_args)
    return Stack(tmp, manifests, dp, ctl)


# ---------------------------------------------------------------------------------------------
# TLS, control socket and /proc helpers (HTTPS, certificates, WebSockets: issue 3)


def https_port(dp: Dataplane) -> int:
    """The port of the --https-listen the Dataplane was started with (the last one given)."""
    i = len(dp.argv) - 1 - dp.argv[::-1].index("--https-listen")
    return int(dp.argv[i + 1].rsplit(":", 1)[1])


def _openssl(*args: str, cwd: Path) -> None:
    r = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"openssl {' '.join(args)} failed: {r.stderr[-2000:]}")


@dataclass
class CertFiles:
    name: str
    cert_pem: bytes
    key_pem: bytes

    @property
    def der(self) -> bytes:
        import ssl
        return ssl.PEM_cert_to_DER_cert(self.cert_pem.decode())


class CertAuthority:
    """A CA made with the openssl CLI in `folder`, issuing ECDSA P-256 or RSA-2048 leaves."""

    def __init__(self, folder: Path):
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                 "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=Tidegate Test CA",
                 "-days", "3", cwd=folder)
        self.ca_pem = (folder / "ca.crt").read_bytes()
        self.ca_file = folder / "ca.crt"
        self.serial = 1000

    def sub_ca(self, folder: Path) -> "CertAuthority":
        """An intermediate CA signed by this one, issuing from `folder`."""
        inter = self.issue("intermediate", ["Tidegate Test Intermediate"], ca=True)
        sub = CertAuthority.__new__(CertAuthority)
        sub.folder, sub.serial = folder, 5000
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "ca.crt").write_bytes(inter.cert_pem)
        (folder / "ca.key").write_bytes(inter.key_pem)
        sub.ca_pem, sub.ca_file = inter.cert_pem, folder / "ca.crt"
        return sub

    def issue(self, name: str, dns: list[str], kind: str = "ec", days: int = 2,
              ca: bool = False) -> CertFiles:
        """A leaf for `dns` (SAN DNS names); days=0 makes one that expires as it is issued;
        ca=True makes a CA certificate (CN = dns[0]) instead."""
        self.serial += 1
        newkey = (["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"] if kind == "ec"
                  else ["-newkey", "rsa:2048"])
        _openssl("req", "-new", *newkey, "-nodes", "-keyout", f"{name}.key", "-out",
                 f"{name}.csr", "-subj", f"/CN={dns[0]}", cwd=self.folder)
        (self.folder / f"{name}.ext").write_text(
            "basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n" if ca
            else "subjectAltName=" + ",".join(f"DNS:{d}" for d in dns) + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-set_serial", str(self.serial), "-days", str(days), "-extfile", f"{name}.ext",
                 "-out", f"{name}.crt", cwd=self.folder)
        return CertFiles(name, (self.folder / f"{name}.crt").read_bytes(),
                         (self.folder / f"{name}.key").read_bytes())


def tls_secret(name: str, cert_pem: bytes, key_pem: bytes, namespace: str = "default") -> dict:
    import base64
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"tls.crt": base64.b64encode(cert_pem).decode(),
                     "tls.key": base64.b64encode(key_pem).decode()}}


def with_tls(ing: dict, *entries: tuple[list[str], str]) -> dict:
    """Adds spec.tls entries (hosts, secretName) to an Ingress built by ingress()."""
    ing["spec"]["tls"] = [{"hosts": list(h), "secretName": s} for h, s in entries]
    return ing


def tls_connect(port: int, server_name: str | None, *, min_version=None, max_version=None,
                alpn: list[str] | None = None, ciphers: str | None = None,
                timeout: float = 5.0):
    """A TLS client connection (no certificate verification: callers compare certificates)."""
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    if ciphers:
        ctx.set_ciphers(ciphers)
    if min_version is not None:
        ctx.minimum_version = min_version
    if max_version is not None:
        ctx.maximum_version = max_version
    if alpn:
        ctx.set_alpn_protocols(alpn)
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        return ctx.wrap_socket(sock, server_hostname=server_name)
    except BaseException:
        sock.close()
        raise


def tls_request(port: int, server_name: str | None, method: str = "GET", target: str = "/",
                host: str | None = None, timeout: float = 5.0) -> tuple[Response, bytes]:
    """One HTTPS request on a fresh connection: (response, DER of the server's certificate)."""
    s = tls_connect(port, server_name, timeout=timeout)
    try:
        der = s.getpeercert(binary_form=True)
        h = host or server_name or "example.com"
        s.sendall(f"{method} {target} HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\n\r\n"
                  .encode())
        raw = RawConnection.__new__(RawConnection)
        raw.timeout, raw.sock, raw.buf = timeout, s, b""
        return raw.read_response(method), der
    finally:
        s.close()


class ControlClient:
    """Talks to the data plane's control socket as the controller would (docs/control-protocol.md):
    4-byte big-endian length + JSON."""

    def __init__(self, path: Path, timeout: float = 10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(str(path))
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, msg: dict) -> None:
        body = json.dumps(msg).encode()
        self.sock.sendall(len(body).to_bytes(4, "big") + body)

    def recv(self) -> dict:
        while True:
            if len(self.buf) >= 4:
                n = int.from_bytes(self.buf[:4], "big")
                if len(self.buf) >= 4 + n:
                    body, self.buf = self.buf[4:4 + n], self.buf[4 + n:]
                    return json.loads(body)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                raise EOFError("control socket closed")
            self.buf += chunk

    def call(self, msg: dict) -> dict:
        self.send(msg)
        return self.recv()

    def hello(self, node: str = "e2e") -> dict:
        return self.call({"type": "hello", "protocol": 1, "node": node})

    def snapshot(self, version: int, config: dict) -> dict:
        return self.call({"type": "snapshot", "version": version, "config": config})

    def delta(self, version: int, base: int, delta: dict) -> dict:
        d = {"upsert_virtual_hosts": [], "remove_virtual_hosts": [], "upsert_upstreams": [],
             "remove_upstreams": [], **delta}
        return self.call({"type": "delta", "version": version, "base": base, "delta": d})


def proc_status(pid: int) -> dict[str, str]:
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def threads_of(pid: int) -> int:
    return int(proc_status(pid)["Threads"])


def rss_kib(pid: int) -> int:
    return int(proc_status(pid)["VmRSS"].split()[0])


def children_of(pid: int) -> list[int]:
    """Processes whose parent is pid (a data plane that forked would show here)."""
    kids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            kids.append(int(entry))
    return kids
