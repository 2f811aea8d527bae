"""Serve the Universe page and its read-only JSON API on a loopback address.

Routes (GET only):
  /                      the page for the current (or `?generation=`) generation, API enabled
  /api/graph             `?generation=&max_nodes=`: the graph JSON
  /api/node/<id>         any object with its chain (`raytsystem show`)
  /api/search            `?q=&generation=&limit=`: claim search hits

Errors are `{"error": {"code", "message"}}` with an HTTP status from the error's exit status
(2 → 400, 3 → 409, 4 → 404, 8 → 503: out of memory or disk, anything else → 500). A request
whose Host header is not a loopback name is refused (403 `host_refused`), so a web page cannot reach the API through DNS
rebinding; other methods get 405.
"""

from __future__ import annotations

import ipaddress
import json
import re
import socket
import sys
import traceback
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from ..api import DEFAULT_MAX_NODES, Session
from ..errors import UsageError, reportable
from .api import UniverseApi
from .page import content_security_policy, render_page

API_BASE = "/api"
MAX_NODES_LIMIT = 200_000
SEARCH_LIMIT_MAX = 100
STATUS_BY_EXIT = {2: 400, 3: 409, 4: 404, 8: 503}
JSON_CSP = "default-src 'none'; frame-ancestors 'none'"
COMMON_HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}


_PORT = re.compile(r"[0-9]{1,5}", re.ASCII)


def host_is_loopback(header: str | None) -> bool:
    """True when a Host header names a loopback host (`localhost`, 127.0.0.0/8, `[::1]`)."""
    if not header:
        return False
    host = header.strip()
    if host.startswith("["):
        end = host.find("]")
        rest = host[end + 1 :]
        if end < 0 or (rest and not rest.startswith(":")):
            return False
        name = host[1:end]
        if rest and not _PORT.fullmatch(rest[1:]):
            return False
    elif host.count(":") == 1:
        name, port = host.split(":", 1)
        if not _PORT.fullmatch(port):  # `127.0.0.1:80@evil.example` names evil.example
            return False
    else:
        name = host
    name = name.rstrip(".").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _param(params: dict[str, list[str]], name: str) -> str | None:
    values = params.get(name)
    return values[0] if values else None


def _int_param(params: dict[str, list[str]], name: str, default: int, low: int, high: int) -> int:
    raw = _param(params, name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        value = low - 1
    if not low <= value <= high:
        raise UsageError(f"{name} must be an integer from {low} to {high}", code="invalid_limit")
    return value


class UniverseHandler(BaseHTTPRequestHandler):
    """Answers GET requests for the page and the JSON API; everything else is refused."""

    server: UniverseServer
    server_version = "raytsystem-universe"
    sys_version = ""

    # -- responses
    def _send(
        self,
        status: int,
        body: bytes,
        content_type: str,
        csp: str,
        extra: dict[str, str] | None = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Content-Security-Policy", csp)
        for name, value in {**COMMON_HEADERS, **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, status: int, data: Any, extra: dict[str, str] | None = None) -> None:
        body = json.dumps(data, ensure_ascii=False, indent=1).encode("utf-8")
        self._send(status, body, "application/json; charset=utf-8", JSON_CSP, extra)

    def _error(
        self, status: int, code: str, message: str, extra: dict[str, str] | None = None
    ) -> None:
        self._json(status, {"error": {"code": code, "message": message}}, extra)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Protocol-level errors (bad request line, unknown method) as the JSON envelope too."""
        if code == HTTPStatus.NOT_IMPLEMENTED:
            self._error(405, "method_not_allowed", "only GET is supported", {"Allow": "GET"})
            return
        status = HTTPStatus(code)
        self._error(
            code, "bad_request" if code < 500 else "internal_error", message or status.phrase
        )

    def log_message(self, format: str, *args: Any) -> None:
        sys.stderr.write(f"{self.address_string()} {format % args}\n")

    # -- methods
    def do_GET(self) -> None:
        hosts = self.headers.get_all("Host") or []
        if len(hosts) != 1 or not host_is_loopback(hosts[0]):
            self._error(
                403,
                "host_refused",
                "requests must name one loopback host (localhost, 127.0.0.1, [::1])",
            )
            return
        if not self.path.startswith("/") or self.path.startswith("//"):
            # Only the origin form (`GET /path`): an absolute URL names a host of its own.
            self._error(400, "bad_request", "the request target must be a path (/...)")
            return
        try:
            self._route()
        except ConnectionError:
            raise  # the client left while its answer was written: `handle_error` says so
        except Exception as exc:
            error = reportable(exc)
            if error is not None:
                self._json(STATUS_BY_EXIT.get(error.exit_status, 500), error.to_json())
                return
            traceback.print_exc(file=sys.stderr)
            self._error(
                500, "internal_error", "internal error; the traceback is in the server's log"
            )

    def _refuse_method(self) -> None:
        self._error(405, "method_not_allowed", "only GET is supported", {"Allow": "GET"})

    do_HEAD = do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = _refuse_method

    def _route(self) -> None:
        url = urlsplit(self.path)
        params = parse_qs(url.query, keep_blank_values=True)
        path = url.path
        api = self.server.api
        if path in ("/", "/index.html"):
            graph = api.graph(_param(params, "generation") or None, self._max_nodes(params))
            body = render_page(graph, api_base=API_BASE).encode("utf-8")
            csp = content_security_policy(with_api=True) + "; frame-ancestors 'none'"
            self._send(200, body, "text/html; charset=utf-8", csp)
        elif path == "/favicon.ico":
            self._send(204, b"", "image/x-icon", JSON_CSP)
        elif path == f"{API_BASE}/graph":
            self._json(
                200, api.graph(_param(params, "generation") or None, self._max_nodes(params))
            )
        elif path.startswith(f"{API_BASE}/node/") and len(path) > len(f"{API_BASE}/node/"):
            self._json(200, api.node(unquote(path[len(f"{API_BASE}/node/") :])))
        elif path == f"{API_BASE}/search":
            limit = _int_param(params, "limit", 20, 1, SEARCH_LIMIT_MAX)
            text = _param(params, "q") or ""
            self._json(200, api.search(text, _param(params, "generation") or None, limit))
        else:
            self._error(404, "not_found", f"no such endpoint: {path}")

    @staticmethod
    def _max_nodes(params: dict[str, list[str]]) -> int:
        return _int_param(params, "max_nodes", DEFAULT_MAX_NODES, 1, MAX_NODES_LIMIT)


class UniverseServer(ThreadingHTTPServer):
    """A threading HTTP server bound to one address, answering from one `UniverseApi`."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], api: UniverseApi) -> None:
        self.api = api
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        super().__init__(address, UniverseHandler)

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that left before its answer was written (a broken pipe, a reset) is one
        line in the log, not a traceback; anything else is reported as socketserver does."""
        error = sys.exc_info()[1]
        if isinstance(error, ConnectionError):
            sys.stderr.write(f"{client_address[0]} left before its answer: {error.strerror}\n")
            return
        super().handle_error(request, client_address)

    @property
    def url(self) -> str:
        host = str(self.server_address[0])
        return f"http://[{host}]:{self.port}/" if ":" in host else f"http://{host}:{self.port}/"


def make_server(api: UniverseApi, host: str = "127.0.0.1", port: int = 0) -> UniverseServer:
    """A bound, not yet running server (port 0 picks a free port: read `server.port`)."""
    return UniverseServer((host, port), api)


def serve(session: Session, host: str, port: int) -> None:
    """Serve `session`'s workspace until Ctrl-C, then close the socket and return."""
    session.ledger()  # opened once, before the threads that share it
    server = make_server(UniverseApi(session), host, port)
    print(f"raytsystem universe: serving {server.url} (Ctrl-C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("raytsystem universe: stopped", flush=True)
    finally:
        server.server_close()
