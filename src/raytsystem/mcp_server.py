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

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import JSONRPCError, JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

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
        per_source: int = 2,
        generation: str | None = None,
        expect_generation: str | None = None,
    ) -> dict[str, Any]:
        """Answer a question from verified, confirmed claims with exact citations, or report a gap.
        At most `limit` citations; at most `per_source` of one source before other sources'."""
        return guarded(
            lambda: session.query(
                text,
                limit=limit,
                per_source=per_source,
                generation=generation,
                expect_generation=expect_generation,
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
        anyio.run(_serve_stdio, server)
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
        anyio.run(_serve_stdio, server)
    finally:
        stop.set()
        watcher.join()


async def _serve_stdio(server: MCPServer) -> None:
    """The SDK's stdio transport, with the end of stdin held back until every request read
    before it has its reply: a client that sends its calls and closes stdin at once (a pipe,
    a script) gets every reply. The SDK alone ends the session at the end of stdin, and a
    call still running then was cancelled and its reply lost.

    Requests read are counted out as their replies are written; one the client cancels
    (`notifications/cancelled`) is not waited for. `_lowlevel_server` is the SDK's own
    server under `MCPServer` (no public name; mcp is pinned in uv.lock)."""
    lowlevel = server._lowlevel_server
    waiting: set[Any] = set()
    answered = anyio.Condition()
    to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage](16)

    async def settle(request_id: Any) -> None:
        async with answered:
            waiting.discard(request_id)
            answered.notify_all()

    async def pump_in(stdin: Any) -> None:
        async with to_server:
            async for item in stdin:
                if isinstance(item, SessionMessage):
                    message = item.message
                    if isinstance(message, JSONRPCRequest):
                        waiting.add(message.id)
                    elif (
                        isinstance(message, JSONRPCNotification)
                        and message.method == "notifications/cancelled"
                    ):
                        await settle((message.params or {}).get("requestId"))
                await to_server.send(item)
            async with answered:
                while waiting:
                    await answered.wait()

    written = anyio.Event()

    async def pump_out(stdout: Any) -> None:
        # Closing the transport's stdout when the server's replies end lets it finish.
        async with from_server, stdout:
            async for item in from_server:
                await stdout.send(item)
                if isinstance(item.message, JSONRPCResponse | JSONRPCError):
                    await settle(item.message.id)
        written.set()

    async with stdio_server() as (stdin, stdout), anyio.create_task_group() as tasks:
        tasks.start_soon(pump_in, stdin)
        tasks.start_soon(pump_out, stdout)
        await lowlevel.run(from_client, to_client, lowlevel.create_initialization_options())
        await written.wait()  # every reply out (the server closed its side when it ended)
        tasks.cancel_scope.cancel()  # stdin, if the server ended before it did
