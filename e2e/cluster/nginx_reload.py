"""nginx from Debian's packages run the way reload-based ingress controllers run it, as the
scale test's peer (docs/benchmarks.md, "Scaling 2↔4 under load"):

- one `server` block per host proxying to an `upstream` block per Service, with ingress-nginx's
  defaults where they matter here (forwarding headers, a request id, upstream keep-alive,
  `proxy_next_upstream error timeout` with 3 tries, WebSocket upgrade headers,
  `worker_shutdown_timeout 240s`, an access log of every request); the TLS certificate (one
  wildcard for every host) is loaded once, by the catch-all default server, as ingress-nginx
  serves its certificates from memory instead of loading one file per server at each reload
  (docs/benchmarks.md says why it is not at the http{} level);
- a watcher that lists the Services' EndpointSlices once, then follows them from that list's
  resourceVersion (`kubectl get --raw …?watch=1`, as an informer does), keeps each Service's
  ready endpoints per slice, and whenever the set of a Service's ready endpoints changes,
  rewrites the upstream blocks, tests the configuration (`nginx -t`) and reloads nginx
  (`nginx -s reload`): what a controller without a dynamic API does. The work per event is that
  slice's endpoints and its Service's slices, not every slice seen.

Usable from the tests (NginxReload) and by hand:
  python3 e2e/cluster/nginx_reload.py --help
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

NGINX = "/usr/sbin/nginx"
SERVICE_LABEL = "kubernetes.io/service-name"


@dataclass
class Host:
    name: str      # server_name
    service: str   # the Service whose ready endpoints are the upstream
    port: int = 8080  # the pods' port


@dataclass
class Reload:
    at: float                 # time.monotonic() when the change was seen
    services: list[str]       # the Services whose ready endpoints changed
    test_seconds: float       # `nginx -t` of the new configuration
    signal_seconds: float     # `nginx -s reload` (it parses the configuration too)

    @property
    def seconds(self) -> float:
        return self.test_seconds + self.signal_seconds


def ready_addresses(endpoint_slice: dict) -> frozenset[str]:
    """The slice's ready endpoints as address:port. Ready only, as ingress-nginx takes them: a
    terminating pod leaves the upstream."""
    port = next((p.get("port") for p in endpoint_slice.get("ports") or [] if p.get("port")),
                8080)
    return frozenset(f"{a}:{port}" for ep in endpoint_slice.get("endpoints") or []
                     if ep.get("conditions", {}).get("ready") for a in ep.get("addresses", []))


@dataclass
class NginxReload:
    workdir: Path
    listen: str               # address:port of the TLS listener
    cert: Path
    key: Path
    hosts: list[Host]
    kubectl: list[str]        # the kubectl command line with its kubeconfig
    namespace: str
    reloads: list[Reload] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self):
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        # Per Service: its slices' ready endpoints (slice name -> addresses), and the sorted
        # union that is in the configuration, with its upstream block's text.
        self._slices: dict[str, dict[str, frozenset[str]]] = {h.service: {} for h in self.hosts}
        self._endpoints: dict[str, list[str]] = {s: [] for s in self._slices}
        self._blocks: dict[str, str] = {s: self._upstream_block(s) for s in self._slices}
        self._resource_version = ""
        self._watch: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.config_seconds = 0.0   # `nginx -t` of the first configuration
        self.list_seconds = 0.0     # the initial list of EndpointSlices

    # -- configuration ----------------------------------------------------------------------

    def _upstream_name(self, service: str) -> str:
        return f"{self.namespace}-{service}-80"

    def _upstream_block(self, service: str) -> str:
        # No ready endpoint: a server marked down, so that nginx answers 502 at once.
        servers = "".join(f"    server {a};\n"
                          for a in self._endpoints[service] or ["127.0.0.1:1 down"])
        return (f"upstream {self._upstream_name(service)} {{\n{servers}"
                "    keepalive 320;\n    keepalive_timeout 60s;\n"
                "    keepalive_requests 10000;\n}\n")

    def write_upstreams(self) -> None:
        """The upstreams file from the blocks kept per Service (only changed Services' blocks
        are rebuilt; the file is one join of them, as a template-rendering controller writes its
        whole configuration)."""
        tmp = self.workdir / "upstreams.conf.tmp"
        tmp.write_text("".join(self._blocks[s] for s in sorted(self._blocks)))
        tmp.rename(self.workdir / "upstreams.conf")

    def write_config(self) -> None:
        servers = []
        for h in self.hosts:
            servers.append(f"""    server {{
        listen {self.listen} ssl;
        server_name {h.name};
        location / {{
            proxy_pass http://{self._upstream_name(h.service)};
        }}
    }}""")
        conf = f"""# Written by e2e/cluster/nginx_reload.py: a reload-based ingress's nginx.
worker_processes auto;
worker_rlimit_nofile 10000;
pid {self.workdir}/nginx.pid;
error_log {self.workdir}/logs/error.log notice;
worker_shutdown_timeout 240s;
events {{
    worker_connections 4096;
    multi_accept on;
}}
http {{
    log_format upstreaminfo '$remote_addr - $remote_user [$time_local] "$request" $status '
        '$body_bytes_sent "$http_referer" "$http_user_agent" $request_length $request_time '
        '[$proxy_upstream_name] $upstream_addr $upstream_response_length '
        '$upstream_response_time $upstream_status $request_id';
    map $host $proxy_upstream_name {{ default "-"; }}
    access_log {self.workdir}/logs/access.log upstreaminfo;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' ''; }}
    keepalive_timeout 75s;
    keepalive_requests 1000;
    client_body_temp_path {self.workdir}/tmp/body;
    proxy_temp_path {self.workdir}/tmp/proxy;
    fastcgi_temp_path {self.workdir}/tmp/fastcgi;
    uwsgi_temp_path {self.workdir}/tmp/uwsgi;
    scgi_temp_path {self.workdir}/tmp/scgi;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_session_cache shared:SSL:10m;
    ssl_session_timeout 10m;
    proxy_http_version 1.1;
    proxy_buffering off;
    proxy_connect_timeout 5s;
    proxy_send_timeout 60s;
    proxy_read_timeout 60s;
    proxy_next_upstream error timeout;
    proxy_next_upstream_tries 3;
    proxy_set_header Host $host;
    proxy_set_header X-Request-ID $request_id;
    proxy_set_header X-Real-IP $remote_addr;
    proxy_set_header X-Forwarded-For $remote_addr;
    proxy_set_header X-Forwarded-Host $host;
    proxy_set_header X-Forwarded-Port $server_port;
    proxy_set_header X-Forwarded-Proto $scheme;
    proxy_set_header X-Scheme $scheme;
    proxy_set_header Upgrade $http_upgrade;
    proxy_set_header Connection $connection_upgrade;
    include {self.workdir}/upstreams.conf;
    # The catch-all default server holds the certificate (ingress-nginx's default server holds
    # its default one). A TLS handshake starts in the default server's context, and a server
    # chosen by SNI that has no certificate of its own keeps it: every host is served with this
    # one wildcard certificate, loaded once per reload. Given at the http{{}} level instead, it
    # would be inherited and loaded again by every server block (nginx 1.22 makes each server
    # its own SSL context): one load per host at each reload (docs/benchmarks.md).
    server {{
        listen {self.listen} ssl default_server;
        server_name _;
        ssl_certificate {self.cert};
        ssl_certificate_key {self.key};
        location / {{
            return 404;
        }}
    }}
{chr(10).join(servers)}
}}
"""
        for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.workdir / "tmp" / d).mkdir(parents=True, exist_ok=True)
        (self.workdir / "nginx.conf").write_text(conf)
        self.write_upstreams()

    def _nginx(self, *args: str) -> float:
        """Runs nginx with our prefix and configuration (so that `-s` reads our pid file and
        signals our master); returns how long it took."""
        t = time.monotonic()
        r = subprocess.run([NGINX, "-p", str(self.workdir), "-c",
                            str(self.workdir / "nginx.conf"), *args],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"nginx {' '.join(args)} failed: {r.stderr}")
        return time.monotonic() - t

    # -- process ----------------------------------------------------------------------------

    def master_pid(self) -> int:
        return int((self.workdir / "nginx.pid").read_text())

    def start(self) -> None:
        """Lists the EndpointSlices, starts nginx with their ready endpoints, then follows them.
        When it returns, nginx runs with every host's configuration and the endpoints of the
        list; the watch goes on from the list's resourceVersion, so nothing is replayed and
        nothing is missed."""
        t = time.monotonic()
        self._relist()
        self.list_seconds = time.monotonic() - t
        self.write_config()
        self.config_seconds = self._nginx("-t", "-q")
        self._nginx()  # the master daemonizes once its workers are started
        self._stopping.clear()
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._watch:
            self._watch.terminate()
            try:
                self._watch.wait(10)
            except subprocess.TimeoutExpired:
                self._watch.kill()
        if self._thread:
            self._thread.join(10)
        try:
            pid = self.master_pid()
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, signal.SIGQUIT)  # graceful: workers finish what they are doing
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.kill(pid, signal.SIGKILL)
        # A master still parsing a reload's configuration may have had to be killed, and nginx
        # workers do not exit with their master: they would keep the port for the next run.
        for worker in self.leftover_pids():
            try:
                os.kill(worker, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def leftover_pids(self) -> list[int]:
        """nginx processes that still hold a file of our folder open (its logs): after stop(),
        workers whose master is gone."""
        out = []
        prefix = str(self.workdir)
        for d in Path("/proc").iterdir():
            if not d.name.isdigit():
                continue
            try:
                if (d / "comm").read_text().strip() != "nginx":
                    continue
                if any(os.readlink(fd).startswith(prefix) for fd in (d / "fd").iterdir()):
                    out.append(int(d.name))
            except OSError:
                continue
        return out

    def worker_pids(self) -> list[int]:
        """Every nginx process under the master (old workers still draining included)."""
        master = self.master_pid()
        out = []
        for d in Path("/proc").iterdir():
            if d.name.isdigit():
                try:
                    ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
                except (OSError, IndexError, ValueError):
                    continue
                if ppid == master:
                    out.append(int(d.name))
        return out

    # -- the watcher ------------------------------------------------------------------------

    def _relist(self) -> list[str]:
        """Lists every slice of the namespace and rebuilds the per-Service state from it;
        returns the Services whose ready endpoints changed. Once at start, and again only if the
        watch cannot go on from where it was (its resourceVersion expired)."""
        r = subprocess.run([*self.kubectl, "-n", self.namespace, "get", "endpointslices",
                            "-o", "json"], capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"listing EndpointSlices failed: {r.stderr}")
        listed = json.loads(r.stdout)
        for slices in self._slices.values():
            slices.clear()
        for item in listed.get("items", []):
            meta = item.get("metadata", {})
            service = meta.get("labels", {}).get(SERVICE_LABEL)
            if service in self._slices:
                self._slices[service][meta.get("name", "")] = ready_addresses(item)
        self._resource_version = listed.get("metadata", {}).get("resourceVersion", "")
        return [s for s in self._slices if self._update_service(s)]

    def _update_service(self, service: str) -> bool:
        """Recomputes one Service's ready endpoints from its slices; True if they changed."""
        addrs = sorted(set().union(*self._slices[service].values()))
        if addrs == self._endpoints[service]:
            return False
        self._endpoints[service] = addrs
        self._blocks[service] = self._upstream_block(service)
        return True

    def _follow(self) -> None:
        while not self._stopping.is_set():
            try:
                expired = self._watch_once()
                if self._stopping.is_set():
                    return
                if expired:
                    changed = self._relist()
                    if changed:
                        self._reload(changed, time.monotonic())
            except Exception as e:  # noqa: BLE001 - reported, the watcher goes on
                self.errors.append(f"{type(e).__name__}: {e}")
                self._stopping.wait(1)

    def _watch_once(self) -> bool:
        """Follows the slices from the last resourceVersion until the watch ends; True if it
        ended because that resourceVersion is too old (410 Gone: relist)."""
        path = (f"/apis/discovery.k8s.io/v1/namespaces/{self.namespace}/endpointslices"
                f"?watch=1&allowWatchBookmarks=true&resourceVersion={self._resource_version}")
        self._watch = subprocess.Popen([*self.kubectl, "get", "--raw", path],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                       text=True)
        decoder = json.JSONDecoder()
        buf = ""
        assert self._watch.stdout
        try:
            for line in self._watch.stdout:
                buf += line
                while True:
                    stripped = buf.lstrip()
                    if not stripped:
                        buf = ""
                        break
                    try:
                        event, end = decoder.raw_decode(stripped)
                    except json.JSONDecodeError:
                        buf = stripped
                        break  # an object not yet complete
                    buf = stripped[end:]
                    if event.get("type") == "ERROR":
                        return event.get("object", {}).get("code") == 410
                    try:
                        self._on_event(event)
                    except Exception as e:  # noqa: BLE001 - reported, the watcher goes on
                        self.errors.append(f"{type(e).__name__}: {e}")
        finally:
            self._watch.stdout.close()
            self._watch.wait()
        return False

    def _on_event(self, event: dict) -> None:
        obj = event.get("object", {})
        meta = obj.get("metadata", {})
        if meta.get("resourceVersion"):
            self._resource_version = meta["resourceVersion"]
        if event.get("type") == "BOOKMARK":
            return
        service = meta.get("labels", {}).get(SERVICE_LABEL)
        if service not in self._slices:
            return
        now = time.monotonic()
        name = meta.get("name", "")
        if event.get("type") == "DELETED":
            self._slices[service].pop(name, None)
        else:
            self._slices[service][name] = ready_addresses(obj)
        if self._update_service(service):
            self._reload([service], now)

    def _reload(self, services: list[str], seen_at: float) -> None:
        """What ingress-nginx does at a change it cannot apply dynamically: write the new
        configuration, test it, then `nginx -s reload`."""
        self.write_upstreams()
        test = self._nginx("-t", "-q")
        signal_seconds = self._nginx("-s", "reload")
        self.reloads.append(Reload(seen_at, services, test, signal_seconds))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workdir", type=Path, required=True)
    ap.add_argument("--listen", required=True, help="address:port")
    ap.add_argument("--cert", type=Path, required=True)
    ap.add_argument("--key", type=Path, required=True)
    ap.add_argument("--kubeconfig", type=Path, required=True)
    ap.add_argument("--namespace", required=True)
    ap.add_argument("--host", action="append", default=[], metavar="NAME=SERVICE",
                    help="a server block (repeat)")
    a = ap.parse_args()
    hosts = [Host(*h.split("=", 1)) for h in a.host]
    n = NginxReload(a.workdir, a.listen, a.cert, a.key, hosts,
                    ["kubectl", "--kubeconfig", str(a.kubeconfig)], a.namespace)
    n.start()
    print(f"nginx started (config test {n.config_seconds:.2f} s); Ctrl-C stops it", flush=True)
    try:
        while True:
            time.sleep(1)
            while n.reloads:
                r = n.reloads.pop(0)
                print(f"reload: {' '.join(r.services)} (nginx -t {r.test_seconds:.2f} s, "
                      f"nginx -s reload {r.signal_seconds:.2f} s)")
            while n.errors:
                print(f"watcher: {n.errors.pop(0)}")
    except KeyboardInterrupt:
        n.stop()


if __name__ == "__main__":
    main()
