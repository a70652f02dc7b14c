"""A real etcd and kube-apiserver on loopback for the end-to-end tests, built by build.sh.

Each Cluster has its own temporary folder with generated certificates (openssl), a static token
file, a kubeconfig and etcd's data; ports are random. stop()/start() restart the API server on
the same port and data (the outage tests); shutdown() ends both processes.

Why a private network namespace (see enter_test_netns): the API server refuses EndpointSlice
addresses in 127.0.0.0/8, yet the backends must run on this machine. In a network namespace of
our own, 192.0.2.0/24 (TEST-NET-1, reserved for documentation) is put on the loopback device, so
backends listen there and no packet can leave the namespace.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import harness  # noqa: E402

BACKEND_NET = "192.0.2"  # backends listen on 192.0.2.1, .2, ... inside the namespace
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
TOKEN = "tidegate-e2e-admin-token"
# Users without any group (so without any permission until a test binds a role to them), for
# the tests of the controller's RBAC rules: name -> static token.
USER_TOKENS = {"tidegate-controller": "tidegate-e2e-controller-token",
               "tidegate-restricted": "tidegate-e2e-restricted-token"}
CLONE_NEWNET = 0x40000000

_netns_error: str | None = None
_netns_entered = False


def enter_test_netns() -> str | None:
    """Moves this process (and every child it starts from now on) into a new network namespace
    with lo up and 192.0.2.0/24 on lo. Returns None on success, else why it could not."""
    global _netns_error, _netns_entered
    if _netns_entered or _netns_error:
        return _netns_error
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_NEWNET) != 0:
        _netns_error = f"unshare(CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())} (needs root)"
        return _netns_error
    for cmd in (["ip", "link", "set", "lo", "up"],
                ["ip", "addr", "add", f"{BACKEND_NET}.0/24", "dev", "lo"]):
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            _netns_error = f"{' '.join(cmd)}: {r.stderr.strip()}"
            return _netns_error
    _netns_entered = True
    return None


def build() -> Path:
    """Runs build.sh (a no-op when the pinned versions are built) and returns the binaries' dir."""
    r = subprocess.run([str(HERE / "build.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"e2e/kube/build.sh failed ({r.returncode}):\n{r.stderr[-4000:]}")
    return Path(r.stdout.strip().splitlines()[-1])


@contextlib.contextmanager
def running(bin_dir: Path, root: Path):
    """A started Cluster for the length of a `with` block (the session fixtures of e2e/kube and
    e2e/chart); its logs are printed when it fails to start."""
    c = Cluster(bin_dir, root)
    try:
        c.start()
    except BaseException:
        print(c.logs())
        c.shutdown()
        raise
    try:
        yield c
    finally:
        c.shutdown()


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d: Path) -> None:
    """CA, the API server's serving certificate (127.0.0.1, localhost), an admin client
    certificate (O=system:masters) and the service-account signing key."""
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.crt", "-days", "2", "-subj", "/CN=tidegate-e2e-ca", cwd=d)
    (d / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                               "extendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subj, ext in (("apiserver", "/CN=kube-apiserver", "san.ext"),
                            ("admin", "/O=system:masters/CN=tidegate-admin", "client.ext")):
        _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key", "-out",
                 f"{name}.csr", "-subj", subj, cwd=d)
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
                 "-CAcreateserial", "-out", f"{name}.crt", "-days", "2", "-extfile", ext, cwd=d)
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=d)
    lines = [f'{TOKEN},tidegate-admin,1,"system:masters"']
    lines += [f"{token},{user},{i + 2}" for i, (user, token) in enumerate(USER_TOKENS.items())]
    (d / "tokens.csv").write_text("\n".join(lines) + "\n")


class KubeController(harness.Process):
    def __init__(self, log_path: Path, socket_path: Path, kubeconfig: Path, extra=()):
        argv = [str(harness.binary("tidegate-controller")),
                "--dataplane-socket", str(socket_path),
                "--kubeconfig", str(kubeconfig), *extra]
        super().__init__("controller", argv, log_path)


class Cluster:
    def __init__(self, bin_dir: Path, root: Path | None = None,
                 apiserver_args: tuple[str, ...] = ()):
        self.bin_dir = bin_dir
        self.apiserver_args = tuple(apiserver_args)
        self.root = root or Path(tempfile.mkdtemp(prefix="tg-kube-"))
        self.pki = self.root / "pki"
        self.pki.mkdir(parents=True, exist_ok=True)
        make_pki(self.pki)
        self.etcd_port = harness.free_port()
        self.peer_port = harness.free_port()
        self.port = harness.free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        self.etcd = harness.Process("etcd", [
            str(bin_dir / "etcd"), "--name", "tg", "--data-dir", str(self.root / "etcd"),
            "--listen-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.etcd_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{self.peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.peer_port}",
            "--initial-cluster", f"tg=http://127.0.0.1:{self.peer_port}",
            "--unsafe-no-fsync", "--log-level", "warn"], self.root / "etcd.log")
        self.apiserver = self._apiserver(self.port, "apiserver")
        self.kubeconfig = self.root / "kubeconfig"
        self.write_kubeconfig(self.kubeconfig)

    def _apiserver(self, port: int, name: str) -> harness.Process:
        p = self.pki
        return harness.Process(f"kube-{name}", [
            str(self.bin_dir / "kube-apiserver"),
            "--etcd-servers", f"http://127.0.0.1:{self.etcd_port}",
            "--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1",
            "--secure-port", str(port),
            "--tls-cert-file", str(p / "apiserver.crt"),
            "--tls-private-key-file", str(p / "apiserver.key"),
            "--client-ca-file", str(p / "ca.crt"),
            "--token-auth-file", str(p / "tokens.csv"),
            "--service-account-issuer", "https://kubernetes.default.svc",
            "--service-account-key-file", str(p / "sa.key"),
            "--service-account-signing-key-file", str(p / "sa.key"),
            # A /12 (kubeadm's default, the largest the API server takes): bench/propagation.sh
            # at N=100,000 creates 100,000 ClusterIP Services, and a /16 is full at 65,536.
            "--service-cluster-ip-range", "10.96.0.0/12",
            "--authorization-mode", "RBAC",
            "--endpoint-reconciler-type", "none",
            "--enable-priority-and-fairness=false",
            "--profiling=false",
            "--cert-dir", str(self.root / f"certs-{name}"),
            "-v", "1", *self.apiserver_args], self.root / f"{name}.log")

    def second_apiserver(self) -> "Cluster":
        """Another kube-apiserver on the same etcd (as in an HA control plane), as a Cluster view
        whose api()/kubectl() go through it. Started; the caller shuts it down."""
        other = object.__new__(Cluster)
        other.__dict__.update(self.__dict__)
        other.port = harness.free_port()
        other.server = f"https://127.0.0.1:{other.port}"
        other.apiserver = self._apiserver(other.port, "apiserver2")
        other.etcd = harness.Process("etcd-not-owned", ["/bin/false"], self.root / "unused.log")
        other.kubeconfig = self.root / "kubeconfig2"
        other.write_kubeconfig(other.kubeconfig)
        other.start_apiserver()
        return other

    def write_kubeconfig(self, path: Path, client_cert: bool = False,
                         as_user: str | None = None) -> Path:
        """Admin (a token, or the client certificate), or `as_user` of USER_TOKENS."""
        user = ({"client-certificate": str(self.pki / "admin.crt"),
                 "client-key": str(self.pki / "admin.key")} if client_cert else
                {"token": USER_TOKENS[as_user] if as_user else TOKEN})
        cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "e2e",
               "clusters": [{"name": "e2e", "cluster": {
                   "server": self.server, "certificate-authority": str(self.pki / "ca.crt")}}],
               "users": [{"name": "admin", "user": user}],
               "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "admin"}}]}
        path.write_text(json.dumps(cfg, indent=2))
        return path

    # -- processes ------------------------------------------------------------------------------

    def start(self) -> "Cluster":
        if not self.etcd.alive():
            self.etcd.start()
        self.start_apiserver()
        return self

    def start_apiserver(self, timeout: float = 60.0) -> None:
        self.apiserver.start()
        harness.wait_until(self.ready, timeout, "kube-apiserver /readyz", interval=0.2)

    def stop_apiserver(self) -> None:
        self.apiserver.stop(signal.SIGTERM, timeout=10)

    def shutdown(self) -> None:
        for p in (self.apiserver, self.etcd):
            if p.alive():
                p.stop(signal.SIGTERM, timeout=10)

    def logs(self) -> str:
        return (f"----- kube-apiserver log -----\n{self.apiserver.log()[-15000:]}\n"
                f"----- etcd log -----\n{self.etcd.log()[-5000:]}")

    # -- etcd ---------------------------------------------------------------------------------

    def _etcd(self, method: str, body: dict, timeout: float = 10) -> dict:
        req = urllib.request.Request(f"http://127.0.0.1:{self.etcd_port}/v3/{method}",
                                     data=json.dumps(body).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read() or b"{}")

    def defragment_etcd(self) -> None:
        """Gives the space of compacted history back (etcd's file keeps it otherwise)."""
        self._etcd("maintenance/defragment", {}, timeout=600)

    def compact_etcd(self) -> int:
        """Compacts etcd's history up to its current revision (what the API server does every
        5 minutes), through etcd's JSON gateway. Returns that revision."""
        rev = int(self._etcd("kv/range", {"key": "AA=="})["header"]["revision"])
        self._etcd("kv/compaction", {"revision": rev, "physical": True})
        return rev

    # -- API ----------------------------------------------------------------------------------

    def _ssl(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.pki / "ca.crt"))

    def api(self, method: str, path: str, body: dict | None = None,
            content_type: str = "application/json") -> tuple[int, dict]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {TOKEN}", "Content-Type": content_type,
            "Accept": "application/json"})
        try:
            with urllib.request.urlopen(req, context=self._ssl(), timeout=10) as r:
                return r.status, json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")

    def ready(self) -> bool:
        if not self.apiserver.alive():
            raise AssertionError(f"kube-apiserver exited with {self.apiserver.returncode()}:\n"
                                 f"{self.apiserver.log()[-3000:]}")
        try:
            req = urllib.request.Request(self.server + "/readyz",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
            with urllib.request.urlopen(req, context=self._ssl(), timeout=2) as r:
                return r.status == 200
        except Exception:  # noqa: BLE001 - not yet
            return False

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> str:
        r = subprocess.run([KUBECTL, "--kubeconfig", str(self.kubeconfig), *args], input=input,
                           capture_output=True, text=True, timeout=30)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {r.stderr}")
        return r.stdout

    def apply(self, *objects: dict) -> None:
        """kubectl apply of the objects, as one List."""
        self.kubectl("apply", "-f", "-", input=json.dumps(
            {"apiVersion": "v1", "kind": "List", "items": list(objects)}))

    def delete(self, kind: str, name: str, namespace: str | None = None) -> None:
        args = ["delete", kind, name, "--wait=false"]
        if namespace:
            args += ["-n", namespace]
        self.kubectl(*args)

    def create_namespace(self, name: str) -> None:
        self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
