"""A slow-header client for the overload test (e2e/test_overload.py), run as a process of its own
so that its work does not share a GIL with the client whose latency is measured.

Opens CONNECTIONS connections to HOST:PORT (from 127.0.0.2.. as source addresses, so that the
ephemeral ports of one address are never the limit), sends a request line and then one header
byte every INTERVAL seconds on each, never finishing the header; a connection the server closes
is opened again. Prints one JSON line when SECONDS are over: connections opened, closed by the
server, open at the end, and the most open at once.

usage: slowloris.py HOST PORT CONNECTIONS INTERVAL SECONDS
"""

from __future__ import annotations

import errno
import json
import random
import resource
import selectors
import socket
import sys
import time


def main() -> int:
    host, port = sys.argv[1], int(sys.argv[2])
    wanted, interval, seconds = int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    sel = selectors.DefaultSelector()
    next_send: dict[socket.socket, float] = {}
    started: set[socket.socket] = set()  # sent the request line
    stats = {"opened": 0, "closed_by_server": 0, "connect_errors": 0, "max_open": 0}
    source = [0]

    def open_one() -> None:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        source[0] += 1
        s.bind((f"127.0.0.{2 + source[0] % 200}", 0))
        rc = s.connect_ex((host, port))
        if rc not in (0, errno.EINPROGRESS):
            stats["connect_errors"] += 1
            s.close()
            return
        sel.register(s, selectors.EVENT_READ)
        next_send[s] = time.monotonic() + random.uniform(0, interval)
        stats["opened"] += 1

    def drop(s: socket.socket) -> None:
        sel.unregister(s)
        next_send.pop(s, None)
        started.discard(s)
        s.close()

    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        # Open what is missing, a few hundred per round so that reading keeps up.
        for _ in range(min(500, wanted - len(next_send))):
            open_one()
        stats["max_open"] = max(stats["max_open"], len(next_send))
        for key, _ in sel.select(timeout=0.05):
            s = key.fileobj
            try:
                data = s.recv(4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                data = b""
            if not data:
                stats["closed_by_server"] += 1
                drop(s)
        now = time.monotonic()
        for s, due in list(next_send.items()):
            if due > now:
                continue
            try:
                # The first send starts the request; later ones add to a header never finished.
                s.send(b"a" if s in started else b"GET / HTTP/1.1\r\nX: ")
                started.add(s)
            except (BlockingIOError, InterruptedError):
                pass
            except OSError:
                stats["closed_by_server"] += 1
                drop(s)
                continue
            next_send[s] = now + interval
    stats["open_at_end"] = len(next_send)
    print(json.dumps(stats), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
