"""A real one-node Kubernetes cluster on this machine, for the tests: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, kubelet on containerd (runc, CNI bridge) and kube-proxy
in iptables mode, with CoreDNS as the kube-dns Service. `up()` starts it and returns when the node
is Ready; `down()` stops it and removes everything `up()` made. docs/testing.md explains the
design; the comments here say why each unusual setting is there.

Addresses (all inside 198.18.0.0/15, the benchmarking range, so that nothing can clash with a
real network): the node is 198.18.1.1 on `lo` (these machines have no `dummy` link type), pods
live on the bridge tg-cni0 in 198.18.16.0/24, Services in 198.19.0.0/24 (kubernetes 198.19.0.1,
kube-dns 198.19.0.10). Nothing listens beyond loopback, the node address and that bridge.

Every process runs detached (its own session) with its PID recorded in the state folder, so
that the cluster outlives the `up` command and `down` finds it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
STATE = Path(os.environ.get("TIDEGATE_CLUSTER_DIR", "/tmp/tidegate-cluster"))
CACHE = Path(os.environ.get("TIDEGATE_CACHE", str(Path.home() / ".cache" / "tidegate")))

NODE_NAME = "tidegate-node"
NODE_IP = "198.18.1.1"
POD_CIDR = "198.18.16.0/24"
POD_GATEWAY = "198.18.16.1"
BRIDGE = "tg-cni0"
SERVICE_CIDR = "198.19.0.0/24"
KUBERNETES_SERVICE_IP = "198.19.0.1"
DNS_SERVICE_IP = "198.19.0.10"
APISERVER_PORT = 6443
SERVER = f"https://{NODE_IP}:{APISERVER_PORT}"
# etcd on loopback, at ports the other harnesses never pick (they take random ones).
ETCD_CLIENT = "http://127.0.0.1:12379"
ETCD_PEER = "http://127.0.0.1:12380"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
COREDNS_IMAGE = "docker.io/tidegate/coredns:test"
PROBE_IMAGE = "docker.io/tidegate/probe:test"
ECHO_IMAGE = "docker.io/tidegate/echo:test"
CONTAINERD_NS = "k8s.io"

# Folders outside STATE that the components write to no matter how they are configured; `down`
# removes those that `up` created (recorded in STATE/created.json).
FOREIGN_DIRS = ["/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/var/lib/cni",
                "/run/containerd", "/run/netns", "/etc/cni", "/opt/containerd"]
SYSCTLS = {"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"}

# Start order; `down` stops them in reverse.
COMPONENTS = ["etcd", "kube-apiserver", "containerd", "kube-controller-manager",
              "kube-scheduler", "kubelet", "kube-proxy"]


def log(msg: str) -> None:
    print(f"cluster: {msg}", file=sys.stderr, flush=True)


def run(*argv: str, check: bool = True, input: str | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess:
    r = subprocess.run(argv, capture_output=True, text=True, input=input, timeout=timeout)
    if check and r.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({r.returncode}): {r.stderr.strip()[-2000:]}")
    return r


# -- paths ------------------------------------------------------------------------------------

def pki() -> Path:
    return STATE / "pki"


def kubeconfig_path(user: str = "admin") -> Path:
    return STATE / f"{user}.kubeconfig"


def containerd_socket() -> Path:
    return STATE / "containerd" / "containerd.sock"


def containerd_root() -> Path:
    """containerd's root (content store, snapshots, metadata) outlives the cluster, as a cache:
    importing the images anew at every `up` took 1-16 s each on a busy machine. `down` deletes
    every container in it, so only images stay."""
    return CACHE / "cluster" / "containerd-root"


def bin_dir() -> Path:
    p = STATE / "bin-dir"
    if p.exists():
        return Path(p.read_text().strip())
    return build()


# -- building ---------------------------------------------------------------------------------

def build() -> Path:
    """The pinned Kubernetes programs (e2e/kube/build.sh --cluster), built once and cached."""
    r = subprocess.run([str(REPO / "e2e" / "kube" / "build.sh"), "--cluster"],
                       stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"e2e/kube/build.sh --cluster failed ({r.returncode})")
    return Path(r.stdout.strip().splitlines()[-1])


def _go() -> str:
    return shutil.which("go") or "/usr/local/go/bin/go"


def _go_key(src: Path, extra: bytes) -> str:
    import hashlib
    h = hashlib.sha256()
    for f in sorted(src.iterdir()):
        if f.is_file():
            h.update(f.name.encode() + f.read_bytes())
    h.update(extra)
    return h.hexdigest()[:12]


def build_go_program(src: Path, extra_key: bytes = b"") -> Path:
    """A static Go program of ours (standard library only or pinned modules), built once and
    cached by the hash of its sources: CoreDNS, the probe, the scale test's load generator."""
    out = CACHE / "cluster" / f"{src.name}-{_go_key(src, extra_key)}"
    binary = out / src.name
    if binary.exists():
        return binary
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOMODCACHE=str(CACHE / "go" / "mod"),
               GOCACHE=str(CACHE / "go" / "build"), GOTOOLCHAIN="local", GOFLAGS="-mod=mod",
               CGO_ENABLED="0")
    log(f"building {src.name} (first time only)")
    t = time.monotonic()
    tmp = out / f".{src.name}.tmp"
    r = subprocess.run([_go(), "build", "-p", "2", "-trimpath", "-ldflags=-s -w", "-o",
                        str(tmp), "."], cwd=src, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"building {src.name} failed: {r.stderr[-3000:]}")
    tmp.rename(binary)
    log(f"{src.name} built in {time.monotonic() - t:.0f} s")
    return binary


def build_go_image(src: Path, image: str) -> Path:
    """A static Go program of ours as a one-layer image archive, cached beside the program."""
    binary = build_go_program(src, (HERE / "mkimage.py").read_bytes())
    archive = binary.parent / f"{src.name}.tar"
    if archive.exists():
        return archive
    sys.path.insert(0, str(HERE))
    import mkimage
    mkimage.write_archive(image, [(binary, f"/{src.name}")], [f"/{src.name}"], [], archive)
    return archive


def image_archives() -> list[Path]:
    """Every image the cluster needs locally: CoreDNS and the probe (ours, here), the pause
    image and the echo backend (e2e/cluster/images/build, which also builds Tidegate's image)."""
    archives = [build_go_image(HERE / "coredns", COREDNS_IMAGE),
                build_go_image(HERE / "probe", PROBE_IMAGE)]
    script = HERE / "images" / "build"
    if script.exists():
        r = subprocess.run([str(script)], stdout=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"e2e/cluster/images/build failed ({r.returncode})")
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].endswith(".tar"):
                archives.append(Path(parts[1]))
    return archives


# -- PKI --------------------------------------------------------------------------------------

def _openssl(*args: str) -> None:
    run("openssl", *args)


def make_pki(d: Path) -> None:
    """A CA and a certificate for every party, all ECDSA P-256 (fast to make: ~0.5 s in all)."""
    d.mkdir(parents=True, exist_ok=True)
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl("req", "-x509", *ec, "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"),
             "-days", "30", "-subj", "/CN=tidegate-cluster-ca")
    server_sans = ",".join([f"IP:{NODE_IP}", "IP:127.0.0.1", f"IP:{KUBERNETES_SERVICE_IP}",
                            "DNS:kubernetes", "DNS:kubernetes.default",
                            "DNS:kubernetes.default.svc",
                            "DNS:kubernetes.default.svc.cluster.local", "DNS:localhost"])
    certs = [  # name, subject, extended key usage, subjectAltName
        ("apiserver", "/CN=kube-apiserver", "serverAuth", server_sans),
        ("admin", "/O=system:masters/CN=tidegate-admin", "clientAuth", ""),
        ("apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client",
         "clientAuth", ""),
        ("kube-controller-manager", "/CN=system:kube-controller-manager", "clientAuth", ""),
        ("kube-scheduler", "/CN=system:kube-scheduler", "clientAuth", ""),
        ("kube-proxy", "/CN=system:kube-proxy", "clientAuth", ""),
        ("kubelet", f"/O=system:nodes/CN=system:node:{NODE_NAME}", "clientAuth", ""),
        ("kubelet-serving", f"/CN={NODE_NAME}", "serverAuth",
         f"IP:{NODE_IP},DNS:{NODE_NAME}"),
    ]
    for name, subj, eku, sans in certs:
        ext = d / f"{name}.ext"
        ext.write_text(f"extendedKeyUsage={eku}\nkeyUsage=critical,digitalSignature\n"
                       + (f"subjectAltName={sans}\n" if sans else ""))
        _openssl("req", *ec, "-keyout", str(d / f"{name}.key"), "-out", str(d / f"{name}.csr"),
                 "-subj", subj)
        _openssl("x509", "-req", "-in", str(d / f"{name}.csr"), "-CA", str(d / "ca.crt"),
                 "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-out", str(d / f"{name}.crt"),
                 "-days", "30", "-extfile", str(ext))
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(d / "sa.key"))
    _openssl("ec", "-in", str(d / "sa.key"), "-pubout", "-out", str(d / "sa.pub"))


def write_kubeconfig(path: Path, cert: str) -> Path:
    p = pki()
    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "tidegate",
           "clusters": [{"name": "tidegate", "cluster": {
               "server": SERVER, "certificate-authority": str(p / "ca.crt")}}],
           "users": [{"name": cert, "user": {"client-certificate": str(p / f"{cert}.crt"),
                                             "client-key": str(p / f"{cert}.key")}}],
           "contexts": [{"name": "tidegate", "context": {"cluster": "tidegate", "user": cert}}]}
    path.write_text(json.dumps(cfg, indent=2))
    return path


# -- configuration files ----------------------------------------------------------------------

def write_configs() -> None:
    p = pki()
    cd = STATE / "containerd"
    cd.mkdir(parents=True, exist_ok=True)
    (STATE / "cni" / "net.d").mkdir(parents=True, exist_ok=True)
    # Debian 12's containerd is 1.6 (config version 2).
    (cd / "config.toml").write_text(f"""\
version = 2
root = "{containerd_root()}"
state = "{cd / 'state'}"
oom_score = 0
# opt would make /opt/containerd; the others are snapshotters and tracing we do not use.
disabled_plugins = ["io.containerd.internal.v1.opt", "io.containerd.snapshotter.v1.aufs",
                    "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
                    "io.containerd.snapshotter.v1.devmapper",
                    "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{containerd_socket()}"

[ttrpc]
  address = "{cd / 'containerd.sock.ttrpc'}"

[debug]
  address = "{cd / 'debug.sock'}"

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  # Root here lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj to the -998 the kubelet
  # asks for the pause container, and without this no sandbox starts ("can't get final child's
  # PID from pipe: EOF").
  restrict_oom_score_adj = true
  disable_apparmor = true
  disable_hugetlb_controller = true
  enable_unprivileged_ports = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        # cgroups are hybrid (v1 controllers) and there is no systemd: cgroupfs, as the kubelet.
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "{STATE / 'cni' / 'net.d'}"
""")
    (STATE / "cni" / "net.d" / "10-tidegate.conflist").write_text(json.dumps({
        "cniVersion": "1.0.0", "name": "tidegate-pods", "plugins": [
            {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False,
             "hairpinMode": True,
             "ipam": {"type": "host-local", "dataDir": str(STATE / "cni" / "ipam"),
                      "ranges": [[{"subnet": POD_CIDR, "gateway": POD_GATEWAY}]],
                      "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ]}, indent=2))
    # Pods with dnsPolicy Default (and CoreDNS itself) read this instead of the host's resolver:
    # the cluster reaches no network, so there is nothing to forward to.
    (STATE / "resolv.conf").write_text("nameserver 127.0.0.1\noptions ndots:1 timeout:1\n")
    kubelet_dir = STATE / "kubelet"
    kubelet_dir.mkdir(parents=True, exist_ok=True)
    (STATE / "kubelet-config.yaml").write_text(json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "address": NODE_IP, "port": 10250, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": 10248,
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": str(p / "ca.crt")}},
        "authorization": {"mode": "Webhook"},
        "tlsCertFile": str(p / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(p / "kubelet-serving.key"),
        # Hybrid cgroups, no systemd, swap may be on: what these machines are.
        "cgroupDriver": "cgroupfs", "failCgroupV1": False, "failSwapOn": False,
        "clusterDNS": [DNS_SERVICE_IP], "clusterDomain": "cluster.local",
        "resolvConf": str(STATE / "resolv.conf"),
        "containerRuntimeEndpoint": f"unix://{containerd_socket()}",
        "podLogsDir": str(STATE / "pod-logs"),
        # The open-files hard limit here is 20,000 and cannot be raised.
        "maxOpenFiles": 20000,
        "serializeImagePulls": False,
        # Images cannot be pulled again (no registry): never collect them, and evict only when
        # the machine is really short of space.
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%", "nodefs.inodesFree": "1%"},
        "nodeStatusReportFrequency": "10s",
        "shutdownGracePeriod": "0s",
    }, indent=2))
    (STATE / "kube-proxy-config.yaml").write_text(json.dumps({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1", "kind": "KubeProxyConfiguration",
        "mode": "iptables", "hostnameOverride": NODE_NAME, "bindAddress": NODE_IP,
        "clientConnection": {"kubeconfig": str(kubeconfig_path("kube-proxy"))},
        "clusterCIDR": POD_CIDR,
        # NodePorts answer on the node address only, never on the machine's real interfaces.
        "nodePortAddresses": [f"{NODE_IP}/32"],
        "metricsBindAddress": "127.0.0.1:10249", "healthzBindAddress": "127.0.0.1:10256",
        # Leave the conntrack sysctls alone: they are the machine's, not the cluster's.
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s"},
        "iptables": {"syncPeriod": "30s", "minSyncPeriod": "0s"},
    }, indent=2))


def argv_of(name: str, bins: Path) -> list[str]:
    p = pki()
    if name == "etcd":
        return [str(bins / "etcd"), "--name", "tidegate", "--data-dir", str(STATE / "etcd"),
                "--listen-client-urls", ETCD_CLIENT, "--advertise-client-urls", ETCD_CLIENT,
                "--listen-peer-urls", ETCD_PEER, "--initial-advertise-peer-urls", ETCD_PEER,
                "--initial-cluster", f"tidegate={ETCD_PEER}", "--listen-metrics-urls", "",
                "--unsafe-no-fsync", "--log-level", "warn"]
    if name == "kube-apiserver":
        return [str(bins / "kube-apiserver"), "--etcd-servers", ETCD_CLIENT,
                "--bind-address", NODE_IP, "--advertise-address", NODE_IP,
                "--secure-port", str(APISERVER_PORT),
                "--tls-cert-file", str(p / "apiserver.crt"),
                "--tls-private-key-file", str(p / "apiserver.key"),
                "--client-ca-file", str(p / "ca.crt"),
                "--kubelet-client-certificate", str(p / "apiserver-kubelet-client.crt"),
                "--kubelet-client-key", str(p / "apiserver-kubelet-client.key"),
                "--kubelet-certificate-authority", str(p / "ca.crt"),
                "--kubelet-preferred-address-types", "InternalIP",
                "--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
                "--service-account-key-file", str(p / "sa.pub"),
                "--service-account-signing-key-file", str(p / "sa.key"),
                "--service-cluster-ip-range", SERVICE_CIDR,
                "--authorization-mode", "Node,RBAC",
                "--enable-admission-plugins", "NodeRestriction",
                "--allow-privileged=true", "--profiling=false",
                "--cert-dir", str(STATE / "apiserver-certs"), "-v", "1"]
    if name == "containerd":
        return ["containerd", "--config", str(STATE / "containerd" / "config.toml"),
                "--log-level", "warn"]
    if name == "kube-controller-manager":
        kc = str(kubeconfig_path("kube-controller-manager"))
        return [str(bins / "kube-controller-manager"), "--kubeconfig", kc,
                "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
                "--bind-address", "127.0.0.1", "--leader-elect=false",
                "--service-account-private-key-file", str(p / "sa.key"),
                "--root-ca-file", str(p / "ca.crt"),
                "--cluster-signing-cert-file", str(p / "ca.crt"),
                "--cluster-signing-key-file", str(p / "ca.key"),
                "--use-service-account-credentials=true",
                "--service-cluster-ip-range", SERVICE_CIDR,
                "--cluster-name", "tidegate", "--profiling=false", "-v", "1"]
    if name == "kube-scheduler":
        kc = str(kubeconfig_path("kube-scheduler"))
        return [str(bins / "kube-scheduler"), "--kubeconfig", kc,
                "--authentication-kubeconfig", kc, "--authorization-kubeconfig", kc,
                "--bind-address", "127.0.0.1", "--leader-elect=false", "--profiling=false",
                "-v", "1"]
    if name == "kubelet":
        return [str(bins / "kubelet"), "--config", str(STATE / "kubelet-config.yaml"),
                "--kubeconfig", str(kubeconfig_path("kubelet")),
                "--root-dir", str(STATE / "kubelet"),
                # Without it the kubelet writes its certificates to /var/lib/kubelet/pki.
                "--cert-dir", str(STATE / "kubelet" / "pki"),
                "--node-ip", NODE_IP, "--hostname-override", NODE_NAME, "-v", "1"]
    if name == "kube-proxy":
        return [str(bins / "kube-proxy"), "--config", str(STATE / "kube-proxy-config.yaml"),
                "-v", "1"]
    raise KeyError(name)


# -- processes --------------------------------------------------------------------------------

def _pid_file(name: str) -> Path:
    return STATE / "pids" / name


def start(name: str, bins: Path) -> int:
    (STATE / "pids").mkdir(parents=True, exist_ok=True)
    (STATE / "logs").mkdir(parents=True, exist_ok=True)
    logf = open(STATE / "logs" / f"{name}.log", "ab")
    env = dict(os.environ, PATH=f"{bins}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:"
               "/sbin:/bin")
    proc = subprocess.Popen(argv_of(name, bins), stdout=logf, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, env=env,
                            cwd=str(STATE))
    logf.close()
    _pid_file(name).write_text(str(proc.pid))
    return proc.pid


def pid_of(name: str) -> int | None:
    try:
        pid = int(_pid_file(name).read_text())
    except (OSError, ValueError):
        return None
    return pid if _alive(pid) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie of ours (the up process is its parent while it runs) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


def stop_pid(pid: int, timeout: float = 10.0) -> None:
    if not _alive(pid):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    while _alive(pid):
        time.sleep(0.02)


def log_tail(name: str, n: int = 4000) -> str:
    try:
        return (STATE / "logs" / f"{name}.log").read_text(errors="replace")[-n:]
    except OSError:
        return ""


def wait_until(what: str, predicate, timeout: float, watch: tuple[str, ...] = (),
               interval: float = 0.1):
    deadline = time.monotonic() + timeout
    while True:
        for name in watch:
            if pid_of(name) is None:
                raise RuntimeError(f"{name} exited while waiting for {what}:\n{log_tail(name)}")
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


# -- API access -------------------------------------------------------------------------------

def _ssl_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki() / "ca.crt"))
    ctx.load_cert_chain(str(pki() / "admin.crt"), str(pki() / "admin.key"))
    return ctx


def api(method: str, path: str, body: dict | None = None,
        content_type: str = "application/json", timeout: float = 10) -> tuple[int, dict]:
    """One call to the API server as the admin (client certificate)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(SERVER + path, data=data, method=method, headers={
        "Content-Type": content_type, "Accept": "application/json"})
    try:
        with urllib.request.urlopen(req, context=_ssl_context(), timeout=timeout) as r:
            raw = r.read()
            try:
                return r.status, json.loads(raw or b"{}")
            except ValueError:
                return r.status, {"text": raw.decode(errors="replace")}
    except urllib.error.HTTPError as e:
        raw = e.read()
        try:
            return e.code, json.loads(raw or b"{}")
        except ValueError:
            return e.code, {"text": raw.decode(errors="replace")}


def apiserver_ready() -> bool:
    try:
        status, _ = api("GET", "/readyz", timeout=2)
        return status == 200
    except (OSError, ssl.SSLError):
        return False


def node_ready() -> bool:
    try:
        status, node = api("GET", f"/api/v1/nodes/{NODE_NAME}", timeout=2)
    except (OSError, ssl.SSLError):
        return False
    if status != 200:
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in node.get("status", {}).get("conditions", []))


def kubectl(*args: str, input: str | None = None, check: bool = True,
            timeout: float = 60) -> subprocess.CompletedProcess:
    return run(str(bin_dir() / "kubectl"), "--kubeconfig", str(kubeconfig_path()), *args,
               input=input, check=check, timeout=timeout)


# -- network ----------------------------------------------------------------------------------

def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key


def _lo_has_node_ip() -> bool:
    return f"inet {NODE_IP}/32" in run("ip", "-4", "addr", "show", "dev", "lo").stdout


def setup_network(record: dict) -> None:
    if not _lo_has_node_ip():
        # No dummy link type here: the node's address lives on lo. The /32 keeps the rest of
        # 198.18.0.0/15 routed normally (the pod bridge's subnet among it).
        run("ip", "addr", "add", f"{NODE_IP}/32", "dev", "lo")
        record["lo_address"] = True
    record.setdefault("sysctls", {})
    for key, value in SYSCTLS.items():
        path = _sysctl_path(key)
        old = path.read_text().strip()
        if old != value:
            record["sysctls"][key] = old
            path.write_text(value)


def _iptables_tools() -> list[str]:
    return [t for t in ("iptables", "ip6tables", "iptables-legacy", "ip6tables-legacy")
            if shutil.which(t)]


def cleanup_iptables() -> list[str]:
    """Removes every chain the cluster's components made (KUBE-*, CNI-*), and the rules that
    jump to them, from every table, with both iptables back ends. Returns what it removed."""
    removed = []
    for tool in _iptables_tools():
        for table in ("nat", "filter", "mangle", "raw"):
            r = run(tool, "-w", "-t", table, "-S", check=False)
            if r.returncode != 0:
                continue
            ours = re.compile(r"^-[AN] (KUBE-|CNI-)")
            jumps = re.compile(r"-j (KUBE-|CNI-)\S*")
            chains = set()
            for line in r.stdout.splitlines():
                if line.startswith("-N ") and ours.match(line):
                    chains.add(line.split()[1])
            # Rules in built-in chains (or any chain) that jump to ours go first.
            for line in r.stdout.splitlines():
                if line.startswith("-A ") and jumps.search(line):
                    chain = line.split()[1]
                    if chain in chains:
                        continue
                    rule = line.split()[2:]
                    run(tool, "-w", "-t", table, "-D", chain, *rule, check=False)
                    removed.append(f"{tool} -t {table} {line}")
            for c in chains:
                run(tool, "-w", "-t", table, "-F", c, check=False)
            for c in chains:
                if run(tool, "-w", "-t", table, "-X", c, check=False).returncode == 0:
                    removed.append(f"{tool} -t {table} -X {c}")
    return removed


# -- up / down --------------------------------------------------------------------------------

def is_up() -> bool:
    return all(pid_of(n) is not None for n in COMPONENTS) and node_ready()


def up(timeout: float = 120) -> Path:
    """Starts the cluster (a no-op when it is up) and returns the admin kubeconfig's path."""
    if os.geteuid() != 0:
        raise RuntimeError("the one-node cluster needs root (network, mounts, cgroups)")
    if STATE.exists() and (STATE / "created.json").exists():
        if is_up():
            return kubeconfig_path()
        log(f"a previous cluster in {STATE} is not whole: taking it down first")
        down()
    t0 = time.monotonic()
    bins = build()
    archives = image_archives()
    t_built = time.monotonic()
    STATE.mkdir(parents=True, exist_ok=True)
    record = {"foreign_dirs": [d for d in FOREIGN_DIRS if not os.path.exists(d)]}
    (STATE / "bin-dir").write_text(str(bins))
    _save_record(record)
    setup_network(record)
    _save_record(record)
    make_pki(pki())
    write_kubeconfig(kubeconfig_path(), "admin")
    for user in ("kube-controller-manager", "kube-scheduler", "kube-proxy", "kubelet"):
        write_kubeconfig(kubeconfig_path(user), user)
    write_configs()

    start("etcd", bins)
    start("kube-apiserver", bins)
    start("containerd", bins)
    wait_until("containerd's socket", containerd_socket().exists, 30, watch=("containerd",))
    # Containers a previous cluster left (one that was killed rather than taken down).
    _kill_containers()
    import_images(archives)
    t_images = time.monotonic()
    # The kubelet and kube-proxy start at once and retry until the API server answers (waiting
    # for /readyz first cost 1-2 s of node start-up); the controller-manager and the scheduler
    # exit when RBAC's bootstrap roles are not there yet, so they wait for /readyz.
    for name in ("kubelet", "kube-proxy"):
        start(name, bins)
    wait_until("kube-apiserver /readyz", apiserver_ready, 60, watch=("etcd", "kube-apiserver"))
    t_api = time.monotonic()
    for name in ("kube-controller-manager", "kube-scheduler"):
        start(name, bins)
    wait_until(f"node {NODE_NAME} Ready", node_ready, timeout, watch=tuple(COMPONENTS))
    t_ready = time.monotonic()
    apply_addons()
    times = {"build_and_images_s": round(t_built - t0, 2),
             "containerd_and_imports_s": round(t_images - t_built, 2),
             "apiserver_ready_s": round(t_api - t_built, 2),
             "up_to_node_ready_s": round(t_ready - t_built, 2)}
    (STATE / "times.json").write_text(json.dumps(times))
    log(f"times: {times}")
    log(f"node Ready {t_ready - t_built:.1f} s after start "
        f"(builds and images checked in {t_built - t0:.1f} s)")
    return kubeconfig_path()


def _save_record(record: dict) -> None:
    (STATE / "created.json").write_text(json.dumps(record, indent=2))


def addons_manifest() -> str:
    return (HERE / "addons.yaml").read_text().replace("@DNS_SERVICE_IP@", DNS_SERVICE_IP) \
        .replace("@COREDNS_IMAGE@", COREDNS_IMAGE)


def apply_addons() -> None:
    kubectl("apply", "-f", "-", input=addons_manifest())


def wait_dns_ready(timeout: float = 60) -> None:
    def ready():
        r = kubectl("-n", "kube-system", "get", "deployment", "coredns", "-o", "json",
                    check=False)
        if r.returncode != 0:
            return False
        return json.loads(r.stdout).get("status", {}).get("readyReplicas", 0) >= 1
    wait_until("CoreDNS Ready", ready, timeout, watch=tuple(COMPONENTS), interval=0.3)


def _mounts_under(prefixes: list[str]) -> list[str]:
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        mp = line.split()[4].replace("\\040", " ")
        # A prefix ending in "-" (/run/netns/cni-) names files, any other one a folder.
        if any(mp == p or mp.startswith(p if p.endswith("-") else p.rstrip("/") + "/")
               for p in prefixes):
            out.append(mp)
    return sorted(out, key=len, reverse=True)


def _shim_pids() -> list[int]:
    """containerd-shim processes of this cluster (they name our containerd's address)."""
    pids = []
    needle = str(containerd_socket())
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and b"containerd-shim" in cmd[0] and needle.encode() in b" ".join(cmd):
            pids.append(int(d.name))
    return pids


def _delete_pods_via_kubelet() -> None:
    """Lets the kubelet stop every pod through the CRI (so that CNI releases each pod's network)
    before the processes go: with the controllers stopped, nothing recreates them."""
    if pid_of("kubelet") is None or not apiserver_ready():
        return
    kubectl("delete", "pods", "--all", "--all-namespaces", "--grace-period=0", "--force",
            "--wait=false", check=False, timeout=30)

    def no_sandboxes():
        r = run("ctr", "--address", str(containerd_socket()), "-n", CONTAINERD_NS, "tasks",
                "ls", "-q", check=False)
        # The task goes before the sandbox's network: wait for containerd's CNI teardown too,
        # which removes the pod's network namespace last.
        return r.returncode != 0 or (not r.stdout.strip()
                                     and not _mounts_under(["/run/netns/cni-"]))
    try:
        wait_until("the kubelet to stop every pod", no_sandboxes, 30, interval=0.2)
    except RuntimeError as e:
        log(f"{e}; killing what is left")


def ctr(*args: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    return run("ctr", "--address", str(containerd_socket()), "-n", CONTAINERD_NS, *args,
               check=check, timeout=timeout)


def import_images(archives: list[Path]) -> None:
    """Imports each archive unless the image it holds is already there from the same archive
    (a record beside containerd's root says which archive, by size and mtime, made it)."""
    record_path = containerd_root() / "tidegate-imported.json"
    try:
        record = json.loads(record_path.read_text())
    except (OSError, ValueError):
        record = {}
    present = set(ctr("images", "ls", "-q").stdout.split())
    for a in archives:
        st = a.stat()
        key = f"{st.st_size}:{st.st_mtime_ns}"
        entry = record.get(str(a))
        if entry and entry["key"] == key and entry["names"] and \
                all(n in present for n in entry["names"]):
            continue
        t = time.monotonic()
        ctr("images", "import", str(a), timeout=300)
        names = _archive_names(a)
        record[str(a)] = {"key": key, "names": names}
        log(f"imported {a.name} in {time.monotonic() - t:.1f} s")
    record_path.write_text(json.dumps(record, indent=2))


def _archive_names(archive: Path) -> list[str]:
    """The image names a docker-archive declares (manifest.json's RepoTags)."""
    import tarfile
    try:
        with tarfile.open(archive) as tar:
            f = tar.extractfile("manifest.json")
            tags = [t for m in json.loads(f.read()) for t in m.get("RepoTags") or []]
    except (OSError, KeyError, ValueError, tarfile.TarError):
        return []
    return [t if "/" in t.split(":")[0] and "." in t.split("/")[0] else f"docker.io/{t}"
            for t in tags]


def _kill_containers() -> None:
    if pid_of("containerd") is not None:
        r = ctr("tasks", "ls", "-q", check=False)
        for task in r.stdout.split():
            ctr("tasks", "kill", "-s", "SIGKILL", task, check=False)
        time.sleep(0.2)
        for task in r.stdout.split():
            ctr("tasks", "delete", "-f", task, check=False)
        # Containers (pods' sandboxes among them) and their snapshots; images stay.
        for c in ctr("containers", "ls", "-q", check=False).stdout.split():
            ctr("containers", "delete", c, check=False)
    for pid in _shim_pids():
        # The shim is the parent of the container's processes; killing its process group ends
        # the container too.
        try:
            os.killpg(os.getpgid(pid), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        stop_pid(pid, timeout=2)


def _remove_cgroups() -> None:
    root = Path("/sys/fs/cgroup")
    for hierarchy in root.iterdir() if root.exists() else []:
        top = hierarchy / "kubepods"
        if not top.is_dir():
            continue
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts),
                        reverse=True) + [top]:
            try:
                d.rmdir()
            except OSError:
                pass


def down() -> list[str]:
    """Stops the cluster and removes what up() made. Returns a list of what was left behind
    (empty when everything went)."""
    if os.geteuid() != 0:
        raise RuntimeError("taking the cluster down needs root")
    try:
        record = json.loads((STATE / "created.json").read_text())
    except (OSError, ValueError):
        record = {}
    # Controllers first, so that nothing recreates the pods the kubelet is told to stop.
    for name in ("kube-controller-manager", "kube-scheduler"):
        pid = pid_of(name)
        if pid:
            stop_pid(pid)
    _delete_pods_via_kubelet()
    for name in ("kubelet", "kube-proxy"):
        pid = pid_of(name)
        if pid:
            stop_pid(pid)
    _kill_containers()
    for name in ("containerd", "kube-apiserver", "etcd"):
        pid = pid_of(name)
        if pid:
            stop_pid(pid)
    bins = None
    try:
        bins = Path((STATE / "bin-dir").read_text().strip())
    except OSError:
        pass
    if bins and (bins / "kube-proxy").exists():
        run(str(bins / "kube-proxy"), "--cleanup", "-v", "0", check=False, timeout=60)
    cleanup_iptables()
    # Pod network namespaces (containerd keeps them under /run/netns) and every mount below the
    # state folder (overlay rootfs, tmpfs secrets, netns bind mounts).
    netns_dir = Path("/run/netns")
    for mp in _mounts_under([str(STATE), str(containerd_root()), "/run/containerd",
                             "/run/netns/cni-"]):
        run("umount", "-l", mp, check=False)
    if netns_dir.is_dir():
        for f in netns_dir.glob("cni-*"):
            try:
                f.unlink()
            except OSError:
                pass
    if run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        run("ip", "link", "delete", BRIDGE, check=False)
    # veths whose pod side is gone go with their namespace; any left attached elsewhere:
    r = run("ip", "-o", "link", "show", "type", "veth", check=False)
    for line in r.stdout.splitlines():
        if f"master {BRIDGE}" in line:
            dev = line.split(":")[1].strip().split("@")[0]
            run("ip", "link", "delete", dev, check=False)
    if record.get("lo_address") and _lo_has_node_ip():
        run("ip", "addr", "del", f"{NODE_IP}/32", "dev", "lo", check=False)
    for key, old in record.get("sysctls", {}).items():
        try:
            _sysctl_path(key).write_text(old)
        except OSError:
            pass
    _remove_cgroups()
    for d in record.get("foreign_dirs", []):
        for mp in _mounts_under([d]):
            run("umount", "-l", mp, check=False)
        shutil.rmtree(d, ignore_errors=True)
    if STATE.exists():
        shutil.rmtree(STATE, ignore_errors=True)
    return leftovers(record)


def leftovers(record: dict | None = None) -> list[str]:
    """What of a cluster is still on the machine: processes, mounts, namespaces, links, chains,
    the node address, folders. Empty after a clean down()."""
    left = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cgroups = (d / "cgroup").read_text()
        except OSError:
            continue
        # Every component names a file in the state folder; containers live in kubepods. (The
        # folder itself, not a name that starts the same: `flock /tmp/tidegate-cluster.lock ...`
        # around a cluster command is no leftover.)
        if re.search(re.escape(str(STATE)) + r"(/|\s|$)", cmd) or "/kubepods" in cgroups:
            left.append(f"process {d.name}: {cmd[:200]}")
    left += [f"mount {m}" for m in _mounts_under([str(STATE), str(containerd_root()),
                                                  "/run/netns/cni-"])]
    if Path("/run/netns").is_dir():
        left += [f"netns {f.name}" for f in Path("/run/netns").glob("cni-*")]
    if run("ip", "link", "show", BRIDGE, check=False).returncode == 0:
        left.append(f"link {BRIDGE}")
    r = run("ip", "-o", "link", "show", "type", "veth", check=False)
    left += [f"veth {line.split(':')[1].strip()}" for line in r.stdout.splitlines()
             if BRIDGE in line]
    for tool in _iptables_tools():
        for table in ("nat", "filter", "mangle", "raw"):
            r = run(tool, "-w", "-t", table, "-S", check=False)
            left += [f"{tool} -t {table} {line}" for line in r.stdout.splitlines()
                     if re.match(r"^-N (KUBE-|CNI-)", line)]
    if _lo_has_node_ip() and (record is None or record.get("lo_address", True)):
        left.append(f"address {NODE_IP} on lo")
    if STATE.exists():
        left.append(f"folder {STATE}")
    for d in (record or {}).get("foreign_dirs", []):
        if os.path.exists(d):
            left.append(f"folder {d}")
    return left


def main(argv: list[str]) -> int:
    cmd = argv[1] if len(argv) > 1 else ""
    if cmd == "up":
        path = up()
        print(path)
        return 0
    if cmd == "down":
        left = down()
        for line in left:
            print(f"left behind: {line}", file=sys.stderr)
        return 1 if left else 0
    print("usage: cluster.py up|down", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
