"""Bad inputs end with a specific, truthful error or finding, never `internal_error` (issue 34,
"No internal errors, no misleading ones"): odd file names and contents, odd option values, a
damaged or unwritable ledger, a workspace that is not there, selections that select nothing,
and requests that a local server and the MCP server must refuse or survive.

"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import Result, run_cli, write
from tamper_kit import (
    EXIT,
    SQLITE,
    build_one,
    copy_of,
    error_code,
    ledger,
    no_internal_error,
    one,
)
from test_tamper import overwrite_page


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory, _workspace_template: Path) -> Path:
    return build_one(tmp_path_factory.mktemp("inputs") / "ws", _workspace_template)


@pytest.fixture
def ws(template: Path, tmp_path: Path) -> Path:
    return copy_of(template, tmp_path / "ws")


def cli(ws: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return run_cli(*args, cwd=ws, env={**SQLITE, **(env or {})})


def fails_with(result: Result, *codes: str) -> dict[str, Any]:
    no_internal_error(result)
    code = error_code(result)
    assert code in codes, (result.code, result.stdout, result.stderr)
    assert result.code == EXIT[code or ""], (result.code, code)
    error: dict[str, Any] = result.json()["error"]
    return error


# --- files -----------------------------------------------------------------------------------


def test_a_file_name_of_invalid_utf8_is_a_finding_and_the_rest_is_ingested(ws: Path) -> None:
    bad = os.path.join(os.fsencode(ws / "docs"), b"bad\xff\xfename.md")
    with open(bad, "wb") as handle:
        handle.write(b"# Bad\n\nThe bad file mentions a walrus.\n")
    write(ws, "docs/good.md", "# Good\n\nThe good file holds a zebra.\n")
    result = cli(ws, "ingest", "--json")
    no_internal_error(result)
    assert result.code == 0, result.stdout
    report = result.json()
    assert report["created"] is True
    refused = [f for f in report["findings"] if f["code"] == "path_refused"]
    assert [f["subject"] for f in refused] == ["docs/bad\\xff\\xfename.md"], report["findings"]
    assert refused[0]["severity"] in ("warning", "error") and "UTF-8" in refused[0]["message"]
    answer = cli(ws, "query", "zebra", "--json")
    assert answer.code == 0 and "zebra" in answer.json()["answer"]


def test_a_file_that_turns_undecodable_keeps_its_last_good_revision(ws: Path) -> None:
    path = ws / "docs" / "onboarding.md"
    good = path.read_bytes()
    path.write_bytes(good + b"caf\xe9\n")  # one Latin-1 byte
    for _ in range(2):  # the second ingest reads the file again: no cache vouches for it
        result = cli(ws, "ingest", "--json")
        assert result.code == 0, result.stdout
        report = result.json()
        assert "undecodable_text" in {f["code"] for f in report["findings"]}
        assert report["counts"]["removed_sources"] == 0, report["counts"]
        assert report["counts"]["kept_sources"] == 1, report["counts"]
        answer = cli(ws, "query", "engineers laptop", "--json")
        assert answer.code == 0 and "laptop on day one" in answer.json()["answer"]
    summary = cli(ws, "ingest")
    assert "1 kept at their last revision" in summary.stdout, summary.stdout
    path.write_bytes(good.replace(b"day one", b"day two"))  # good again, and changed
    report = cli(ws, "ingest", "--json").json()
    assert report["counts"]["kept_sources"] == 0 and report["created"] is True, report
    answer = cli(ws, "query", "engineers laptop", "--json")
    assert "laptop on day two" in answer.json()["answer"]


@pytest.fixture
def big_line(ws: Path) -> Path:
    """A paragraph of 2.4 MB on one line, no sentence end (the issue's 20 MB, scaled down)."""
    config = ws / "raytsystem.toml"
    config.write_text(
        config.read_text().replace("max_file_bytes = 10485760", "max_file_bytes = 50000000")
    )
    words = ["alpha", "beta", "gamma", "delta", "zebra", "quartz", "lumen", "vortex"]
    line = " ".join(words[(i * 7 + i // 5) % len(words)] for i in range(400_000))
    write(ws, "docs/huge.md", "# Huge\n\n" + line + "\n")
    result = cli(ws, "ingest", "--json")
    assert result.code == 0, result.stdout
    return ws


def test_a_huge_one_line_paragraph_gives_bounded_claims_and_answers(big_line: Path) -> None:
    result = cli(big_line, "query", "zebra quartz", "--json")
    no_internal_error(result)
    assert result.code == 0
    assert len(result.stdout.encode()) < 1_000_000, len(result.stdout)
    for citation in result.json()["citations"]:
        assert len(citation["claim"]["statement"]) < 100_000


# --- option values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("1000000000000000000000000000000", id="huge"),
        pytest.param("１", id="full-width"),
        pytest.param("١", id="arabic-indic"),
        pytest.param("", id="empty"),
        pytest.param("-1", id="negative"),
    ],
)
def test_an_odd_generation_value_is_a_usage_error(ws: Path, value: str) -> None:
    fails_with(cli(ws, "query", "refunds", "--generation", value, "--json"), "invalid_generation")


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("2b07", id="short-hex"),
        pytest.param("6", id="a-number"),
        pytest.param("zz", id="not-hex"),
    ],
)
def test_a_malformed_expected_generation_is_a_usage_error(ws: Path, value: str) -> None:
    error = fails_with(
        cli(ws, "query", "refunds", "--expect-generation", value, "--json"),
        "invalid_generation",
        "usage_error",
    )
    assert value in error["message"]


def test_a_stale_expected_generation_does_not_contradict_itself(ws: Path) -> None:
    current = one(ledger(ws), "SELECT hash FROM generations WHERE number = 1")
    other = ("0" if current[0] != "0" else "1") + current[1:12]
    error = fails_with(
        cli(ws, "query", "refunds", "--expect-generation", other, "--json"), "generation_stale"
    )
    assert other in error["message"] and current in error["message"]


def test_a_huge_max_file_bytes_is_a_config_error(ws: Path) -> None:
    config = ws / "raytsystem.toml"
    config.write_text(
        config.read_text().replace(
            "max_file_bytes = 10485760", "max_file_bytes = 9223372036854775807"
        )
    )
    error = fails_with(cli(ws, "ingest", "--json"), "config_invalid")
    assert "max_file_bytes" in error["message"] and "at most" in error["message"], error


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (r"(?m)^include = .*$", "include = []"),
        (r"(?m)^exclude = .*$", 'exclude = ["**"]'),
    ],
    ids=["include-nothing", "exclude-everything"],
)
def test_a_selection_of_nothing_makes_no_empty_generation(ws: Path, old: str, new: str) -> None:
    config = ws / "raytsystem.toml"
    text, replaced = re.subn(old, new, config.read_text())
    assert replaced == 1
    config.write_text(text)
    result = cli(ws, "ingest", "--json")
    no_internal_error(result)
    if result.code == 0:
        report = result.json()
        assert report["created"] is False and report["generation"]["number"] == 1, report
        assert "nothing_selected" in {f["code"] for f in report["findings"]}, report
    generations = cli(ws, "generations", "--json").json()
    assert [g["number"] for g in generations] == [1]
    answer = cli(ws, "query", "refunds business days", "--json")
    assert answer.code == 0 and answer.json()["status"] == "answered"


def test_allow_empty_makes_a_generation_without_sources(ws: Path) -> None:
    config = ws / "raytsystem.toml"
    config.write_text(re.sub(r"(?m)^exclude = .*$", 'exclude = ["**"]', config.read_text()))
    result = cli(ws, "ingest", "--allow-empty", "--json")
    assert result.code == 0, result.stdout
    report = result.json()
    assert report["created"] is True and report["generation"]["number"] == 2, report
    assert "nothing_selected" not in {f["code"] for f in report["findings"]}
    assert cli(ws, "query", "refunds business days", "--json").json()["status"] == "gap"


# --- the ledger ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["query", "refunds"], ["status"], ["ingest"], ["generations"]],
    ids=lambda c: c[0],
)
def test_a_damaged_ledger_page_is_one_database_code(ws: Path, command: list[str]) -> None:
    path = ledger(ws)
    overwrite_page(path, one(path, "SELECT rootpage FROM sqlite_master WHERE name = 'head'"))
    error = fails_with(cli(ws, *command, "--json"), "database_corrupt")
    assert "SELECT" not in error["message"]


@pytest.mark.parametrize(
    "command",
    [["query", "refunds"], ["status"], ["ingest"], ["verify"]],
    ids=lambda c: c[0],
)
def test_a_folder_where_the_write_ahead_log_should_be_is_named(
    ws: Path, command: list[str]
) -> None:
    for extra in ledger(ws).parent.glob("ledger.sqlite3-*"):
        extra.unlink()
    ledger(ws).with_name("ledger.sqlite3-wal").mkdir()
    error = fails_with(cli(ws, *command, "--json"), "database_error")
    assert "ledger.sqlite3-wal" in error["message"]


@contextlib.contextmanager
def immutable(path: Path) -> Iterator[None]:
    """`path` made immutable (`chattr +i`): read-only even for root."""
    if shutil.which("chattr") is None:
        pytest.skip("needs chattr")
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"chattr +i refused: {made.stderr.decode()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_a_read_only_ledger_folder_says_so(ws: Path) -> None:
    """The ledger's folder cannot be written (the write-ahead log cannot be made there)."""
    for extra in ledger(ws).parent.glob("ledger.sqlite3-*"):
        extra.unlink()
    with immutable(ledger(ws).parent):
        result = cli(ws, "query", "refunds", "--json")
    no_internal_error(result)
    if result.code == 0:
        assert result.json()["status"] == "answered"
        return
    error = fails_with(result, "database_error")
    assert "empty" not in error["message"] and "read-only" in error["message"], error


# --- the workspace ---------------------------------------------------------------------------

NO_SUCH = "/no/such/dir"


@pytest.mark.parametrize(
    "command",
    [["status"], ["ingest"], ["generations"], ["verify"], ["query", "refunds"]],
    ids=lambda c: c[0],
)
def test_a_workspace_that_does_not_exist(tmp_path: Path, command: list[str]) -> None:
    result = run_cli("--workspace", NO_SUCH, *command, "--json", cwd=tmp_path, env=SQLITE)
    fails_with(result, "workspace_not_found")
    assert not Path(NO_SUCH).exists()


def test_a_workspace_from_the_environment_that_does_not_exist(tmp_path: Path) -> None:
    result = run_cli(
        "status", "--json", cwd=tmp_path, env={**SQLITE, "RAYTSYSTEM_WORKSPACE": NO_SUCH}
    )
    fails_with(result, "workspace_not_found")


@pytest.mark.parametrize(
    "command", [["status"], ["ingest"], ["query", "refunds"]], ids=lambda c: c[0]
)
def test_a_folder_without_raytsystem_toml_is_no_workspace(
    tmp_path: Path, command: list[str]
) -> None:
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "notes.md").write_text("# Notes\n\nNothing here is a workspace.\n")
    result = run_cli("--workspace", str(folder), *command, "--json", cwd=tmp_path, env=SQLITE)
    fails_with(result, "workspace_not_found")
    assert sorted(p.name for p in folder.iterdir()) == ["notes.md"], "only init makes a workspace"


def test_a_global_option_after_the_command_says_where_it_goes(ws: Path) -> None:
    result = cli(ws, "status", "--workspace", str(ws))
    no_internal_error(result)
    assert result.code == 2
    assert "before the command" in result.stderr, result.stderr
    assert "raytsystem --workspace ... status" in result.stderr, result.stderr


def test_an_unknown_option_after_the_command_gets_no_placement_hint(ws: Path) -> None:
    result = cli(ws, "status", "--no-such-thing")
    assert result.code == 2
    assert "No such option" in result.stderr and "global" not in result.stderr, result.stderr


# --- serve -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(template: Path) -> Iterator[tuple[int, subprocess.Popen[str]]]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(SQLITE)
    proc = subprocess.Popen(
        [sys.executable, "-m", "raytsystem", "serve", "--port", "0"],
        cwd=template,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:(\d+)/", line)
    assert found, line
    yield int(found.group(1)), proc
    proc.kill()
    proc.communicate()


def raw_request(port: int, request: bytes) -> tuple[int, bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=30) as conn:
        conn.sendall(request)
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    status = int(data.split(b" ", 2)[1]) if data.startswith(b"HTTP/") else 0
    return status, data


@pytest.mark.parametrize(
    "request_bytes",
    [
        pytest.param(
            b"GET /api/graph HTTP/1.1\r\nHost: 127.0.0.1:80@evil.example\r\nConnection: close\r\n\r\n",
            id="userinfo-host",
        ),
        pytest.param(
            b"GET /api/graph HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: evil.example\r\n"
            b"Connection: close\r\n\r\n",
            id="duplicate-host",
        ),
        pytest.param(
            b"GET http://evil.example/api/graph HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Connection: close\r\n\r\n",
            id="absolute-form",
        ),
        pytest.param(
            b"GET /api/graph HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
            id="foreign-host",
        ),
    ],
)
def test_serve_refuses_requests_for_another_host(
    server: tuple[int, subprocess.Popen[str]], request_bytes: bytes
) -> None:
    port, _ = server
    status, data = raw_request(port, request_bytes)
    assert 400 <= status < 500, data[:300]


def test_serve_answers_a_plain_request(server: tuple[int, subprocess.Popen[str]]) -> None:
    port, _ = server
    status, data = raw_request(
        port, b"GET /api/graph HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    assert status == 200, data[:300]


def test_serve_refuses_a_huge_generation(server: tuple[int, subprocess.Popen[str]]) -> None:
    port, _ = server
    status, data = raw_request(
        port,
        b"GET /api/graph?generation=1000000000000000000000000000000 HTTP/1.1\r\n"
        b"Host: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    assert status == 400, data[:500]


def test_serve_survives_a_client_that_leaves(template: Path, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(SQLITE)
    proc = subprocess.Popen(
        [sys.executable, "-m", "raytsystem", "serve", "--port", "0"],
        cwd=template,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", proc.stdout.readline())
        assert found
        port = int(found.group(1))
        for _ in range(5):  # ask for the page, then leave without reading it
            conn = socket.create_connection(("127.0.0.1", port), timeout=30)
            conn.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            conn.close()  # an RST: the server's writes fail
        time.sleep(1)
        status, _ = raw_request(
            port, b"GET /api/graph HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        assert status == 200, "the server goes on serving"
    finally:
        proc.kill()
        _, err = proc.communicate()
    assert "Traceback" not in err and "BrokenPipe" not in err, err[-3000:]


# --- mcp -------------------------------------------------------------------------------------


def mcp_messages(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """An MCP session's messages: initialize, then one `tools/call` per call (ids 1, 2, ...)."""
    messages: list[dict[str, Any]] = [
        {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "tamper-tests", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    for n, call in enumerate(calls, 1):
        messages.append(
            {
                "jsonrpc": "2.0",
                "id": n,
                "method": "tools/call",
                "params": {"name": call["name"], "arguments": call["arguments"]},
            }
        )
    return messages


def mcp_server(ws: Path) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(SQLITE)
    return subprocess.Popen(
        [sys.executable, "-m", "raytsystem", "mcp"],
        cwd=ws,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def mcp_exchange(
    ws: Path, calls: list[dict[str, Any]], *, close_at_once: bool
) -> tuple[dict[Any, dict[str, Any]], str]:
    """Replies by id, and the server's stderr. `close_at_once`: stdin is closed right after the
    last message, as a client that sends its calls and hangs up does; otherwise it stays open
    until every reply is in."""
    proc = mcp_server(ws)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in mcp_messages(calls)))
    proc.stdin.flush()
    replies: dict[Any, dict[str, Any]] = {}
    if close_at_once:
        proc.stdin.close()
    reader = threading.Thread(target=_read_replies, args=(proc, replies, len(calls) + 1))
    reader.start()
    reader.join(timeout=120)
    with contextlib.suppress(OSError):
        proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    reader.join(timeout=30)
    assert proc.stderr is not None
    stderr = proc.stderr.read()
    return replies, stderr


def _read_replies(
    proc: subprocess.Popen[str], replies: dict[Any, dict[str, Any]], wanted: int
) -> None:
    assert proc.stdout is not None
    while len(replies) < wanted and (line := proc.stdout.readline()):
        if line.strip():
            message = json.loads(line)
            replies[message.get("id")] = message


@pytest.mark.parametrize(
    "close_at_once",
    [
        False,
        True,
    ],
    ids=["stdin-open", "stdin-closed-at-once"],
)
def test_mcp_answers_a_call_made_just_before_stdin_closes(
    template: Path, close_at_once: bool
) -> None:
    replies, stderr = mcp_exchange(
        template,
        [{"name": "query", "arguments": {"text": "refunds business days"}}],
        close_at_once=close_at_once,
    )
    assert 1 in replies, f"the reply to the call was lost: {replies} {stderr[-2000:]}"
    text = replies[1]["result"]["content"][0]["text"]
    assert json.loads(text)["status"] == "answered"


def test_mcp_refuses_a_huge_generation_with_the_cli_code(template: Path) -> None:
    replies, stderr = mcp_exchange(
        template,
        [
            {
                "name": "query",
                "arguments": {"text": "refunds", "generation": "1000000000000000000000000000000"},
            }
        ],
        close_at_once=False,
    )
    reply = replies[1]
    assert reply["result"]["isError"] is True
    text = reply["result"]["content"][0]["text"]
    assert json.loads(text[text.index("{") :])["error"]["code"] == "invalid_generation"
    assert "Traceback" not in stderr
