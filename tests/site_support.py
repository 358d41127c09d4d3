"""A tiny website on loopback for CLI tests that need real fetches: `pages`
HTML pages, each linking to the next, a robots.txt that allows all, and
`/to/HOST:PORT/PATH`, a redirect to `http://HOST:PORT/PATH` (any host name
pinned to it with --resolve reaches the same site),
served by a threaded `http.server` on 127.0.0.1 (an ephemeral port)."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator


def page_body(n: int, pages: int) -> bytes:
    """Page `n` of a site of `pages`: a paragraph and a link to the next page."""
    link = f'<a href="/p{n + 1}">next</a>' if n + 1 < pages else ""
    return f"<html><body><p>page {n}</p>{link}</body></html>".encode()


@contextmanager
def tiny_site(pages: int = 8) -> Iterator[str]:
    """Yields the site's root URL; every request is answered at once."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:   # noqa: N802 (http.server's name)
            if self.path.startswith("/to/"):   # /to/HOST:PORT/PATH redirects to http://HOST:PORT/PATH
                self.send_response(301)
                self.send_header("Location", "http://" + self.path[4:])
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            if self.path == "/robots.txt":
                body, kind = b"User-agent: *\nAllow: /\n", "text/plain"
            elif self.path == "/" or self.path.startswith("/p"):
                n = int(self.path[2:] or 0) if self.path != "/" else 0
                body, kind = page_body(n, pages), "text/html"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
