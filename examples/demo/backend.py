#!/usr/bin/env python3
"""A tiny demo backend: answers every request with its name, the path and a few headers.

Usage: backend.py NAME PORT [ADDRESS]   (ADDRESS defaults to 127.0.0.1; loopback only)
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = json.dumps(
            {
                "backend": self.server.name,
                "path": self.path,
                "host": self.headers.get("Host"),
                "x-forwarded-for": self.headers.get("X-Forwarded-For"),
                "x-request-id": self.headers.get("X-Request-ID"),
            },
            indent=2,
        ).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_POST = do_GET

    def log_message(self, fmt, *args):
        pass


def main():
    name, port = sys.argv[1], int(sys.argv[2])
    address = sys.argv[3] if len(sys.argv) > 3 else "127.0.0.1"
    server = ThreadingHTTPServer((address, port), Handler)
    server.daemon_threads = True
    server.name = name
    server.serve_forever()


if __name__ == "__main__":
    main()
