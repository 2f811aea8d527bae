"""`raytsystem mcp`: a read-only MCP server on stdio for AI clients.

Tools: `query` (the same JSON as `raytsystem query --json`), `search`, `show`, `bundle`,
`verify`. Answers carry `freshness` (the session follows the workspace's changes), and with
`--watch` the server also ingests those changes as they come (a loop beside the tools). The
workspace and the ledger are fixed when the server starts; no tool takes a filesystem path or
a database URL, and no tool writes anything. Every result carries the generation hash it was
made from. A RaytError, or the memory running out (`out_of_memory`),
becomes a tool error whose text is the JSON error envelope (`{"error": {"code", "message"}}`),
so a client sees the same stable codes as the CLI (`errors.reportable`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from . import __version__
from .api import Session
from .errors import reportable

INSTRUCTIONS = """\
raytsystem is a knowledge base whose answers are verified down to exact source bytes.
Use `query` for an answer with citations (status "answered" or "gap": a gap means the knowledge
base holds nothing confirmed on it; do not guess). Use `bundle` to gather verified context for a
task within a token budget, and read the sources it lists in `must_read` before acting on them.
`search` browses blocks by words, `show` explains any ID with its evidence chain, and `verify`
checks the integrity of the whole knowledge base. Errors carry stable codes; an integrity error
means the chain did not verify and nothing may be trusted from that call.
"""


def guarded(fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run a tool; an error a user can meet becomes a tool error whose text is the JSON error
    envelope, with the CLI's code."""
    try:
        return fn()
    except Exception as exc:
        error = reportable(exc)
        if error is None:
            raise  # a bug: the SDK reports it as a failed tool call
        raise ToolError(json.dumps(error.to_json(), ensure_ascii=False)) from exc


def build_server(session: Session) -> MCPServer:
    """The server's tools over `session` (read-only: none takes a path or writes)."""
    server: MCPServer = MCPServer(
        name="raytsystem", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    @server.tool()
    def query(
        text: str,
        limit: int = 5,
        generation: str | None = None,
        expect_generation: str | None = None,
    ) -> dict[str, Any]:
        """Answer a question from verified, confirmed claims with exact citations, or report a gap."""
        return guarded(
            lambda: session.query(
                text, limit=limit, generation=generation, expect_generation=expect_generation
            ).to_json()
        )

    @server.tool()
    def search(
        text: str, limit: int = 10, claims: bool = False, generation: str | None = None
    ) -> dict[str, Any]:
        """Browse the blocks (or, with claims=true, the confirmed claims) that contain the words."""
        return guarded(
            lambda: session.search(text, limit=limit, claims=claims, generation=generation)
        )

    @server.tool()
    def bundle(task: str, max_tokens: int = 4000, generation: str | None = None) -> dict[str, Any]:
        """Verified context for a task within a token budget (estimate: ceil(UTF-8 bytes / 4))."""
        return guarded(lambda: session.bundle(task, max_tokens=max_tokens, generation=generation))

    @server.tool()
    def show(object_id: str) -> dict[str, Any]:
        """Any object by ID (src_, rev_, nrm_, seg_, clm_, evd_, or a generation) with its chain."""
        return guarded(lambda: session.show(object_id))

    @server.tool()
    def verify() -> dict[str, Any]:
        """Full integrity check: re-hash every blob, re-derive every ID, chain and index."""
        return guarded(lambda: session.verify().to_json())

    return server


def run_stdio(
    session: Session,
    *,
    watch: bool = False,
    debounce_ms: int | None = None,
    max_wait_ms: int | None = None,
) -> None:
    """Serve on stdio until the client leaves. With `watch`, the server also ingests whenever
    the workspace's files change (`Session.watch`, in a thread of its own; what it reports
    goes to stderr, stdout being the protocol's), so every answer comes from the current
    files; an ingest under way when the client leaves finishes first."""
    server = build_server(session)
    if not watch:
        server.run("stdio")
        return
    import sys
    import threading

    session.ledger(create=True)  # opened once, before the threads that share it
    stop = threading.Event()

    def report(event: Any) -> None:
        print(json.dumps(event.to_json(), ensure_ascii=False), file=sys.stderr, flush=True)

    def loop() -> None:
        try:
            session.watch(report, stop, debounce_ms=debounce_ms, max_wait_ms=max_wait_ms)
        except Exception as exc:  # the server keeps answering without its watcher
            print(f"raytsystem mcp: the watch loop stopped: {exc}", file=sys.stderr, flush=True)

    watcher = threading.Thread(target=loop, name="raytsystem-watch", daemon=True)
    watcher.start()
    try:
        server.run("stdio")
    finally:
        stop.set()
        watcher.join()
