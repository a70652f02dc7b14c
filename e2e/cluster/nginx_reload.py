"""nginx from Debian's packages run the way reload-based ingress controllers run it, as the
scale test's peer (docs/benchmarks.md, "Scaling 2↔4 under load"):

- one `server` block per host, each with its TLS certificate, proxying to an `upstream` block per
  Service, with ingress-nginx's defaults where they matter here (forwarding headers, a request
  id, upstream keep-alive, `proxy_next_upstream error timeout` with 3 tries, WebSocket upgrade
  headers, `worker_shutdown_timeout 240s`, an access log of every request);
- a watcher that follows the Services' EndpointSlices (`kubectl get -w`) and, whenever the set
  of ready endpoints of a Service changes, rewrites the upstream blocks and reloads nginx
  (SIGHUP to the master): what a controller without a dynamic API does.

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


@dataclass
class Host:
    name: str      # server_name
    service: str   # the Service whose ready endpoints are the upstream
    port: int = 8080  # the pods' port


@dataclass
class Reload:
    at: float                 # time.monotonic() when the change was seen
    service: str
    endpoints: list[str]
    seconds: float            # how long the new configuration took to test (nginx -t)


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
        self._endpoints: dict[str, list[str]] = {h.service: [] for h in self.hosts}
        self._slices: dict[str, dict] = {}
        self._seen: set[str] = set()  # Services the watch has shown a slice of
        self._watch: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.config_seconds = 0.0

    # -- configuration ----------------------------------------------------------------------

    def _upstream_name(self, service: str) -> str:
        return f"{self.namespace}-{service}-80"

    def write_upstreams(self) -> None:
        lines = []
        for service, addrs in sorted(self._endpoints.items()):
            lines.append(f"upstream {self._upstream_name(service)} {{")
            # No ready endpoint: a server marked down, so that nginx answers 502 at once.
            for a in addrs or ["127.0.0.1:1 down"]:
                lines.append(f"    server {a};")
            lines += ["    keepalive 320;", "    keepalive_timeout 60s;",
                      "    keepalive_requests 10000;", "}"]
        tmp = self.workdir / "upstreams.conf.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        tmp.rename(self.workdir / "upstreams.conf")

    def write_config(self) -> None:
        servers = []
        for h in self.hosts:
            servers.append(f"""    server {{
        listen {self.listen} ssl;
        server_name {h.name};
        ssl_certificate {self.cert};
        ssl_certificate_key {self.key};
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
{chr(10).join(servers)}
}}
"""
        for d in ("body", "proxy", "fastcgi", "uwsgi", "scgi"):
            (self.workdir / "tmp" / d).mkdir(parents=True, exist_ok=True)
        (self.workdir / "nginx.conf").write_text(conf)
        self.write_upstreams()

    def _test_config(self) -> float:
        t = time.monotonic()
        r = subprocess.run([NGINX, "-t", "-q", "-p", str(self.workdir), "-c",
                            str(self.workdir / "nginx.conf")], capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"nginx -t failed: {r.stderr}")
        return time.monotonic() - t

    # -- process ----------------------------------------------------------------------------

    def master_pid(self) -> int:
        return int((self.workdir / "nginx.pid").read_text())

    def start(self, initial_endpoints: dict[str, list[str]]) -> None:
        """Starts nginx with these endpoints, then the watcher."""
        self._endpoints.update(initial_endpoints)
        self.write_config()
        self.config_seconds = self._test_config()
        subprocess.run([NGINX, "-p", str(self.workdir), "-c", str(self.workdir / "nginx.conf")],
                       check=True, capture_output=True)
        # Every slice of the namespace (a selector naming a thousand Services would be longer
        # than it is worth); _on_event keeps those of our Services.
        self._watch = subprocess.Popen(
            [*self.kubectl, "-n", self.namespace, "get", "endpointslices", "--watch",
             "--output-watch-events", "-o", "json"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._watch:
            self._watch.terminate()
            self._watch.wait(10)
        if self._thread:
            self._thread.join(10)
        try:
            pid = self.master_pid()
        except (OSError, ValueError):
            return
        os.kill(pid, signal.SIGQUIT)  # graceful: workers finish what they are doing
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

    def _follow(self) -> None:
        decoder = json.JSONDecoder()
        buf = ""
        assert self._watch and self._watch.stdout
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
                try:
                    self._on_event(event)
                except Exception as e:  # noqa: BLE001 - reported, the watcher goes on
                    self.errors.append(f"{type(e).__name__}: {e}")

    def _on_event(self, event: dict) -> None:
        obj = event.get("object", {})
        name = obj.get("metadata", {}).get("name", "")
        owner = obj.get("metadata", {}).get("labels", {}).get("kubernetes.io/service-name")
        if owner not in self._endpoints:
            return
        self._seen.add(owner)
        if event.get("type") == "DELETED":
            self._slices.pop(name, None)
        else:
            self._slices[name] = obj
        # Only Services whose slices the watch has shown: the watch starts with one ADDED event
        # per existing slice, and a Service not reached yet keeps its initial endpoints.
        by_service: dict[str, set[str]] = {s: set() for s in self._seen}
        for s in self._slices.values():
            service = s.get("metadata", {}).get("labels", {}).get("kubernetes.io/service-name")
            if service not in by_service:
                continue
            port = next((p.get("port") for p in s.get("ports") or [] if p.get("port")), 8080)
            for ep in s.get("endpoints") or []:
                # Ready only, as ingress-nginx takes them: a terminating pod leaves the upstream.
                if ep.get("conditions", {}).get("ready"):
                    for a in ep.get("addresses", []):
                        by_service[service].add(f"{a}:{port}")
        now = time.monotonic()
        with self._lock:
            changed = [s for s, addrs in by_service.items()
                       if sorted(addrs) != self._endpoints[s]]
            if not changed:
                return
            for s in changed:
                self._endpoints[s] = sorted(by_service[s])
            self.write_upstreams()
            seconds = self._test_config()
            os.kill(self.master_pid(), signal.SIGHUP)
            for s in changed:
                self.reloads.append(Reload(now, s, self._endpoints[s], seconds))


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
    n.start({})
    print(f"nginx started (config test {n.config_seconds:.2f} s); Ctrl-C stops it", flush=True)
    try:
        while True:
            time.sleep(1)
            while n.reloads:
                r = n.reloads.pop(0)
                print(f"reload: {r.service} -> {' '.join(r.endpoints)} ({r.seconds:.2f} s)")
    except KeyboardInterrupt:
        n.stop()


if __name__ == "__main__":
    main()
