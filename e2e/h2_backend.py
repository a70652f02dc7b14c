"""A cleartext HTTP/2 backend with prior knowledge (Debian's python3-h2) for the loopback tests:
one thread per connection; each request, once its stream has ended, goes to answer() with its
head, body and trailers. A connection that does not start with the HTTP/2 preface (an HTTP/1.1
request) is counted in `refused` and closed."""

from __future__ import annotations

import socket
import threading

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class H2Server:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.host, self.port = self.sock.getsockname()
        self.refused = 0
        self.running = True
        threading.Thread(target=self._accept, daemon=True).start()

    def answer(self, conn, stream_id: int, head: dict, body: bytes, trailers: list) -> None:
        """Sends the response on `conn` (an h2 H2Connection); not sending one leaves the stream
        unanswered."""
        raise NotImplementedError

    def _accept(self):
        while self.running:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, sock):
        import h2.config
        import h2.connection
        import h2.events as ev
        import h2.exceptions
        conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False,
                                                                    header_encoding="utf-8"))
        streams: dict[int, dict] = {}
        try:
            # The client's first bytes decide, before this side says anything: a client that
            # does not start with the preface is counted in `refused` whether or not it closes
            # at once (it would read our SETTINGS as a bad response and hang up, and a send to a
            # closed socket must not lose the count).
            data = sock.recv(65536)
            if not data or not (data.startswith(PREFACE) or PREFACE.startswith(data)):
                self.refused += bool(data)
                return
            conn.initiate_connection()
            sock.sendall(conn.data_to_send())
            while True:
                if not data:
                    data = sock.recv(65536)
                if not data:
                    return
                try:
                    events = conn.receive_data(data)
                except h2.exceptions.ProtocolError:
                    self.refused += 1  # not HTTP/2 (an HTTP/1.1 request line)
                    return
                for e in events:
                    if isinstance(e, ev.RequestReceived):
                        streams[e.stream_id] = {"head": dict(e.headers), "body": b"",
                                                "trailers": []}
                    elif isinstance(e, ev.DataReceived):
                        streams[e.stream_id]["body"] += e.data
                        conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
                    elif isinstance(e, ev.TrailersReceived):
                        streams[e.stream_id]["trailers"] = list(e.headers)
                    elif isinstance(e, ev.StreamEnded):
                        st = streams.pop(e.stream_id)
                        self.answer(conn, e.stream_id, st["head"], st["body"], st["trailers"])
                sock.sendall(conn.data_to_send())
                data = b""
        except Exception:  # noqa: BLE001 - a connection that breaks ends its thread
            return
        finally:
            sock.close()

    def stop(self):
        self.running = False
        self.sock.close()
