"""Shared fixtures: real workspaces in tmp_path, the real CLI in a subprocess, and both ledger
backends.

Every test that takes the `workspace` fixture runs twice: on the embedded SQLite ledger and on
PostgreSQL. The PostgreSQL run needs `RAYTSYSTEM_TEST_PG_URL` (an SQLAlchemy URL of a database
the tests may create databases from; `bash .ci/run` starts a throwaway server and sets it) and
is skipped without it. Each PostgreSQL test gets a fresh database cloned from a migrated template.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=200, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
CORPORA = Path(os.environ.get("RAYTSYSTEM_CORPORA", SHARED / "corpora"))


@dataclass
class Result:
    code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


CliRunner = Callable[..., Result]


def cli_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a CLI process of a test runs in: this one, with `env` over it."""
    full_env = {**os.environ, **(env or {})}
    # Let the CLI processes cache their bytecode: with PYTHONDONTWRITEBYTECODE set (as on
    # these machines), every process would recompile every module, about a second each.
    full_env.pop("PYTHONDONTWRITEBYTECODE", None)
    # A command that hangs says where: on SIGABRT faulthandler prints every thread's stack.
    full_env.setdefault("PYTHONFAULTHANDLER", "1")
    return full_env


def start_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, session: bool = True
) -> subprocess.Popen[str]:
    """`raytsystem ARGS` started, not awaited, for a test that interrupts it or waits for it:
    stdout and stderr piped as text, Ctrl-C at its default, and with `session` in a process
    group of its own (a Ctrl-C sent to the group reaches it as a terminal's would)."""
    return subprocess.Popen(
        [sys.executable, "-m", "raytsystem", *args],
        cwd=cwd,
        env=cli_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=default_sigint,
        start_new_session=session,
    )


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> Result:
    """Run `raytsystem ARGS` as a real process (the installed console script's module)."""
    with subprocess.Popen(
        [sys.executable, "-m", "raytsystem", *args],
        cwd=cwd,
        env=cli_env(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            stdout, stderr = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            try:
                _, stderr = proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                _, stderr = proc.communicate()
            pytest.fail(
                f"`raytsystem {' '.join(args)}` ran past {timeout} s; its threads when stopped:\n"
                + stderr[-12000:]
            )
    return Result(proc.returncode, stdout, stderr)


PG_ADMIN_URL = os.environ.get("RAYTSYSTEM_TEST_PG_URL")


def _pg_conninfo(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def _pg_admin() -> Any:
    import psycopg

    assert PG_ADMIN_URL
    return psycopg.connect(_pg_conninfo(PG_ADMIN_URL), autocommit=True)


def _pg_url(database: str) -> str:
    assert PG_ADMIN_URL
    base, _, _ = PG_ADMIN_URL.rpartition("/")
    return f"{base}/{database}"


class LedgerDB:
    """Direct SQL on a test's ledger (to corrupt or inspect rows), with `?` placeholders."""

    def __init__(self, backend: str, target: str) -> None:
        self.backend = backend
        if backend == "sqlite":
            import sqlite3

            self._conn: Any = sqlite3.connect(target)
        else:
            import psycopg

            self._conn = psycopg.connect(_pg_conninfo(target))

    def execute(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        if self.backend == "postgresql":
            sql = sql.replace("?", "%s")
        cursor = self._conn.execute(sql, params)
        try:
            return [tuple(r) for r in cursor.fetchall()]
        except Exception:  # statements without a result set
            return []

    def commit(self) -> None:
        self._conn.commit()

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> LedgerDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.commit()
        self.close()


@dataclass
class Backend:
    name: str
    url: str | None  # None: the workspace's embedded SQLite ledger

    def db(self, ws: Path) -> LedgerDB:
        if self.url is None:
            return LedgerDB("sqlite", str(ws / ".raytsystem" / "ledger.sqlite3"))
        return LedgerDB("postgresql", self.url)


@pytest.fixture(scope="session")
def _pg_template() -> Any:
    if not PG_ADMIN_URL:
        yield None
        return
    name = f"rt_template_{os.getpid()}"
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}"')
        admin.execute(f'CREATE DATABASE "{name}"')
    from raytsystem.storage.db import open_ledger

    open_ledger(_pg_url(name)).close()
    yield name
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def backend(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, _pg_template: str | None
) -> Any:
    if request.param == "sqlite":
        monkeypatch.delenv("RAYTSYSTEM_DATABASE_URL", raising=False)
        yield Backend("sqlite", None)
        return
    if _pg_template is None:
        pytest.skip("PostgreSQL tests need RAYTSYSTEM_TEST_PG_URL (bash .ci/run starts a server)")
    import uuid

    name = f"rt_{uuid.uuid4().hex[:12]}"
    with _pg_admin() as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{_pg_template}"')
    url = _pg_url(name)
    monkeypatch.setenv("RAYTSYSTEM_DATABASE_URL", url)
    yield Backend("postgresql", url)
    with _pg_admin() as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def _workspace_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("template") / "ws"
    root.mkdir()
    result = run_cli("init", cwd=root, env={"RAYTSYSTEM_DATABASE_URL": ""})
    assert result.code == 0, result.stderr
    return root


@pytest.fixture
def workspace(tmp_path: Path, _workspace_template: Path, backend: Backend) -> Path:
    """An initialized, empty workspace (a copy of one `raytsystem init` made per session),
    whose CLI runs use the test's ledger backend (RAYTSYSTEM_DATABASE_URL for PostgreSQL)."""
    root = tmp_path / "ws"
    shutil.copytree(_workspace_template, root, symlinks=True)
    return root


@pytest.fixture
def cli() -> CliRunner:
    return run_cli


def default_sigint() -> None:
    """For `Popen(preexec_fn=...)` of a process a test interrupts: a runner that starts the
    tests in the background (SIGINT ignored, as in a non-interactive shell's `cmd &`) must not
    keep Python from installing its Ctrl-C handler in the child."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def write(root: Path, rel: str, text: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# One store per raw store a test fills file by file, as one ingest has: a store reads the packs'
# tables once, and then only those of packs published since.
_stores: dict[Path, Any] = {}


def blob_file(raw_root: Path, address: str) -> tuple[Path, int, int]:
    """(file, offset, length) of a stored blob: its own file or the pack holding it."""
    from raytsystem.storage.blobs import DiskBlobStore

    where = DiskBlobStore(raw_root).location(address)
    assert where is not None, f"blob {address} is not stored"
    return where


def blob_bytes(raw_root: Path, address: str) -> bytes:
    """A stored blob's bytes, read straight from its file (not through the store's checks)."""
    path, offset, length = blob_file(raw_root, address)
    return path.read_bytes()[offset : offset + length]


def pack_blobs(data: bytes) -> dict[str, bytes]:
    """address -> bytes of each blob in a pack's bytes, as its table says."""
    from raytsystem.storage.packs import pack_entries

    entries = pack_entries(lambda offset, n: data[offset : offset + n], len(data))
    return {a: data[o : o + n] for a, o, n in entries}


def tamper_blob(raw_root: Path, address: str, transform: Any) -> None:
    """Change a stored blob's bytes where they are, as disk rot or a hand edit would: its own
    file, or its part of the pack holding it (None: removed from the pack's table). A pack is
    rewritten with its table adjusted and keeps its name, which its bytes no longer hash to."""
    from raytsystem.storage.packs import pack_bytes

    path, _, _ = blob_file(raw_root, address)
    path.chmod(0o644)
    data = path.read_bytes()
    if path.name != address:  # a pack
        blobs = pack_blobs(data)
        new = transform(blobs.pop(address))
        if new is not None:
            blobs[address] = new
        path.write_bytes(pack_bytes(blobs))
    elif (new := transform(data)) is not None:
        path.write_bytes(new)
    else:
        path.unlink()


def store_for(raw_root: Path) -> Any:
    """The store `process_one` writes to under `raw_root`."""
    from raytsystem.storage.blobs import DiskBlobStore

    return _stores.setdefault(raw_root, DiskBlobStore(raw_root))


def process_one(rel: str, disk: Path, raw_root: Path, max_bytes: int) -> Any:
    """`process_file` on one file, then publish its staged blobs as ingest's parent does;
    `store_for(raw_root)` reads them back."""
    from raytsystem.ids import NEWEST_SCHEME
    from raytsystem.pipeline.files import FileTask, process_chunk
    from raytsystem.storage.blobs import STAGING

    staging_dir = raw_root / STAGING
    staging_dir.mkdir(parents=True, exist_ok=True)
    store = store_for(raw_root)
    [result] = process_chunk(
        [FileTask(rel, str(disk), str(staging_dir), max_bytes, NEWEST_SCHEME, None, None)], store
    )
    store.publish(result.staged)
    return result


def mcp_server(ws: Path, *args: str, **extra_env: str) -> Any:
    """`raytsystem mcp ARGS` for `ws` as an MCP client starts it: a process on stdio."""
    from mcp.client.stdio import StdioServerParameters

    env = {
        k: v
        for k, v in os.environ.items()
        if k.startswith(("RAYTSYSTEM_", "PYTHON", "PATH", "HOME"))
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "raytsystem", "--workspace", str(ws), "mcp", *args],
        env=env | extra_env,
        cwd=str(ws),
    )
