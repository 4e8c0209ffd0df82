"""A real HTTP server on 127.0.0.1 for download tests, with scripted misbehaviour."""

from __future__ import annotations

import hashlib
import http.server
import socket
import threading
import time
from dataclasses import dataclass, field


@dataclass
class Route:
    """What the server answers for one path."""

    body: bytes
    ranges: bool = True          # honour Range requests with 206
    fail: list = field(default_factory=list)  # statuses to answer first, one per request
    drop_after: int | None = None  # cut the connection after this many body bytes...
    drops: int = 0               # ...this many times
    delay: float = 0.0           # seconds to sleep per 64 KiB chunk
    slow_requests: int = 10**9   # only the first N requests are slow
    gets: int = 0
    range_requests: int = 0

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.body).hexdigest()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def do_GET(self) -> None:  # noqa: N802 - http.server's naming
        server = self.server
        with server.lock:
            route = server.routes.get(self.path.split("?")[0])
            if route is not None:
                route.gets += 1
                status = route.fail.pop(0) if route.fail else None
                slow = route.gets <= route.slow_requests
        if route is None:
            self.send_error(404)
            return
        if status is not None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body, start = route.body, 0
        header = self.headers.get("Range")
        if route.ranges and header and header.startswith("bytes="):
            route.range_requests += 1
            first, _, last = header[6:].partition("-")
            start = int(first)
            if last:  # an end too: answer just that range
                body = body[:int(last) + 1]
            self.send_response(206)
            self.send_header("Content-Range",
                             f"bytes {start}-{len(body) - 1}/{len(route.body)}")
        else:
            self.send_response(200)
        self.send_header("Content-Length", str(len(body) - start))
        self.send_header("ETag", '"' + route.sha256[:16] + '"')
        self.end_headers()
        sent, chunk = start, 1 << 16
        while sent < len(body):
            if route.drop_after is not None and sent >= route.drop_after:
                with server.lock:
                    cut = route.drops > 0
                    route.drops -= cut
                if cut:
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)
                    self.close_connection = True
                    return
            end = min(len(body), sent + chunk)
            if route.drop_after is not None and sent < route.drop_after < end:
                end = route.drop_after
            try:
                self.wfile.write(body[sent:end])
            except (BrokenPipeError, ConnectionResetError):
                return
            sent = end
            if slow and route.delay:
                time.sleep(route.delay)


class LocalServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.routes: dict[str, Route] = {}
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.serve_forever, daemon=True)

    def add(self, path: str, route: Route) -> str:
        self.routes[path] = route
        return self.url(path)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}{path}"
