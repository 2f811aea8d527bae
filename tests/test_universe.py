"""The Knowledge Universe: the self-contained page, its JSON server, the CLI commands, and the
page itself in a real headless Chromium (Debian's `chromium` + `chromium-driver`, driven by
selenium). The browser tests are skipped, with the reason, only when those are not installed.

Hostile text (`<script>`, `</script>`, `<img onerror>`) goes through every path: it must reach
the page as JSON escapes and the screen as text, never as markup or code.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import re
import signal
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, run_cli, start_cli, write

from raytsystem.errors import IntegrityError, NotFound, UsageError
from raytsystem.universe.page import content_security_policy, embed_json, render_page
from raytsystem.universe.server import host_is_loopback, make_server

HOSTILE = (
    "Hostile text: <script>alert(1)</script> and </script> and <img src=x onerror=alert(2)> here."
)
ARTIFACTS = REPO / "tests" / "artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
BACKGROUND = (11, 16, 32)  # the canvas background, #0b1020

# ----------------------------------------------------------------------------- helpers

PAYMENTS = """# Payments

## Retries

Retries stop after at most 5 attempts. The backoff doubles after each failed attempt.

## Refunds

Refunds take 10 business days. Card refunds are issued by the Refund Service.
"""
LEGACY = """# Legacy payments

Retries stop after at most 3 attempts. The legacy gateway is read-only.
"""
ENTITIES = """# Entities

- Payments API: the service that charges cards.
- Refund Service: the service that issues refunds.
"""
NOTE = """---
title: Retry policy
retracts: [{retracted}]
disputes: [{disputed}]
---
# Retry policy

Payments retries stop after five attempts.[^p] The [[Payments API]] owns retries.
Wallet refunds are instant.[^q]

[^p]: docs/payments.md "at most 5 attempts"
[^q]: docs/payments.md "instant wallet refunds"
"""


def _claim_id(root: Path, text: str, env: dict[str, str] | None) -> str:
    result = run_cli("search", text, "--claims", "--json", cwd=root, env=env)
    assert result.code == 0, result.stderr
    hits = [h for h in result.json()["hits"] if h["text"].startswith(text)]
    assert hits, result.stdout
    return str(hits[0]["id"])


def build_workspace(root: Path, env: dict[str, str] | None = None) -> None:
    """Docs, a plain-text file with hostile text, entities and a note that retracts one claim,
    disputes another and has an unverifiable citation: all four statuses appear."""
    write(root, "docs/payments.md", PAYMENTS)
    write(root, "docs/legacy.md", LEGACY)
    write(root, "docs/evil.txt", HOSTILE + "\n")
    write(root, "knowledge/manual/entities.md", ENTITIES)
    first = run_cli("ingest", "--json", cwd=root, env=env)
    assert first.code == 0, first.stderr
    retracted = _claim_id(root, "Retries stop after at most 3 attempts.", env)
    disputed = _claim_id(root, "Refunds take 10 business days.", env)
    write(root, "knowledge/manual/retries.md", NOTE.format(retracted=retracted, disputed=disputed))
    second = run_cli("ingest", "--json", cwd=root, env=env)
    assert second.code == 0, second.stderr


def embedded_graph(page: str) -> dict[str, Any]:
    """The graph JSON inside a rendered page, decoded the way the browser's JSON.parse does."""
    match = re.search(r'<script type="application/json" id="rt-graph">(.*?)</script>', page, re.S)
    assert match, "no embedded graph"
    data: dict[str, Any] = json.loads(match.group(1))
    return data


def claim_chain(graph: dict[str, Any], claim_id: str) -> dict[str, str]:
    """Claim hash, segment, revision and raw BLAKE3 of a claim's statement evidence."""
    nodes = {n["id"]: n for n in graph["nodes"]}
    out = {e["kind"]: e["target"] for e in graph["edges"] if e["source"] == claim_id}
    segment = out["evidence"]
    revision = next(
        e["target"] for e in graph["edges"] if e["source"] == segment and e["kind"] == "in_revision"
    )
    raw = next(
        e["target"] for e in graph["edges"] if e["source"] == revision and e["kind"] == "raw"
    )
    return {
        "hash": nodes[claim_id]["hash"],
        "segment": segment,
        "revision": revision,
        "raw": nodes[raw]["blake3"],
    }


def small_graph(statement: str = HOSTILE, truncated: Any = None) -> dict[str, Any]:
    """A two-node graph (a source and its claim) with hostile text in both."""
    claim = {
        "id": "clm_00000000000000000000000000000001",
        "kind": "claim",
        "label": statement,
        "statement": statement,
        "status": "confirmed",
        "authority": "extracted",
        "hash": "ab" * 32,
        "source_id": "src_00000000000000000000000000000001",
        "path": "docs/x.txt",
    }
    source = {
        "id": "src_00000000000000000000000000000001",
        "kind": "source",
        "label": "docs/<b>x</b>.txt",
        "path": "docs/<b>x</b>.txt",
        "revision_id": "rev_1",
        "note_status": None,
    }
    return {
        "schema_version": "1",
        "generation": {"number": 1, "hash": "cd" * 32},
        "counts": {"sources": 1, "claims": 1, "entities": 0, "nodes": 2, "edges": 1},
        "truncated": truncated,
        "nodes": [source, claim],
        "edges": [{"source": claim["id"], "target": source["id"], "kind": "in_source"}],
    }


# ----------------------------------------------------------------------------- the page


def test_embedded_json_is_inert_and_round_trips() -> None:
    graph = small_graph(HOSTILE + " \u2028 \u2029 & ünïcode 中文")
    page = render_page(graph)
    assert "<script>alert(1)</script>" not in page
    assert "<img src=x" not in page
    assert "<b>x</b>" not in page
    assert "\u2028" not in page and "\u2029" not in page
    # Only the page's own three script elements close: the hostile `</script>` is escaped.
    assert page.lower().count("</script") == 3
    assert embedded_graph(page) == graph
    fragment = embed_json({"t": "</script><!--&>"})
    assert fragment == '{"t":"\\u003c/script\\u003e\\u003c!--\\u0026\\u003e"}'
    assert json.loads(fragment) == {"t": "</script><!--&>"}


def test_page_is_self_contained_with_a_strict_csp() -> None:
    page = render_page(small_graph())
    csp = re.search(r'<meta http-equiv="Content-Security-Policy" content="([^"]+)">', page)
    assert csp
    policy = csp.group(1)
    assert policy.startswith("default-src 'none'")
    assert "connect-src" not in policy  # static file: no fetches at all
    assert "img-src data:" in policy
    for tag in ("script", "style"):
        # The policy allows exactly the inline script and style by their SHA-256.
        body = re.search(rf"<{tag}>(.*?)</{tag}>", page, re.S)
        assert body, tag
        digest = base64.b64encode(hashlib.sha256(body.group(1).encode()).digest()).decode()
        assert f"{tag}-src 'sha256-{digest}'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    assert not re.search(r"""\b(src|href)=["']?(https?:|//)""", page)
    assert "connect-src 'self'" in content_security_policy(with_api=True)
    assert "connect-src 'self'" in render_page(small_graph(), api_base="/api")
    assert render_page(small_graph()) == page  # deterministic bytes


def test_script_has_no_markup_sinks() -> None:
    script = (REPO / "src/raytsystem/universe/static/universe.js").read_text(encoding="utf-8")
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "new Function",
        'setAttribute("style',
        "srcdoc",
    ):
        assert sink not in script, sink


# ----------------------------------------------------------------------------- the server


class FakeApi:
    """Stands in for UniverseApi: canned answers and the raytsystem errors the server maps."""

    def __init__(self) -> None:
        self.calls: list[tuple[Any, ...]] = []

    def graph(self, generation: str | None = None, max_nodes: int = 20_000) -> dict[str, Any]:
        self.calls.append(("graph", generation, max_nodes))
        if generation == "404":
            raise NotFound("no generation 404", code="generation_not_found")
        return small_graph()

    def node(self, object_id: str) -> dict[str, Any]:
        self.calls.append(("node", object_id))
        if object_id == "clm_broken":
            raise IntegrityError("hash mismatch", code="excerpt_mismatch")
        if object_id == "clm_bug":
            raise RuntimeError("a bug")
        if object_id == "clm_nomem":
            raise MemoryError
        if object_id == "clm_full":  # as SQLAlchemy wraps SQLite's "database or disk is full"
            try:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), "ledger.sqlite3-wal")
            except OSError as exc:
                raise RuntimeError("a wrapper") from exc
        if not object_id.startswith("clm_"):
            raise UsageError(f"not a raytsystem ID: {object_id!r}", code="invalid_id")
        return {"kind": "claim", "claim": {"id": object_id}}

    def search(self, text: str, generation: str | None = None, limit: int = 20) -> dict[str, Any]:
        self.calls.append(("search", text, generation, limit))
        if not text.strip():
            raise UsageError("the query is empty", code="query_empty")
        return {"hits": [{"id": "clm_1", "text": text}]}


@pytest.fixture
def served() -> Iterator[tuple[str, FakeApi]]:
    api = FakeApi()
    server = make_server(api, "127.0.0.1", 0)  # type: ignore[arg-type]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.port}", api
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def fetch(
    url: str, *, method: str = "GET", host: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, method=method, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_server_answers_the_page_and_json_api(served: tuple[str, FakeApi]) -> None:
    base, api = served
    status, headers, body = fetch(base + "/")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert "connect-src 'self'" in headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in headers["Content-Security-Policy"]
    page = body.decode()
    assert '{"api_base":"/api"}' in page
    assert "<script>alert(1)</script>" not in page

    status, headers, body = fetch(base + "/api/graph?generation=3&max_nodes=500")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert headers["X-Content-Type-Options"] == "nosniff"
    assert json.loads(body)["generation"]["number"] == 1
    assert ("graph", "3", 500) in api.calls

    status, _, body = fetch(base + "/api/node/clm_abc")
    assert status == 200 and json.loads(body)["claim"]["id"] == "clm_abc"
    status, _, body = fetch(base + "/api/search?q=retry%20attempts&generation=ab12cd34&limit=5")
    assert status == 200 and json.loads(body)["hits"][0]["text"] == "retry attempts"
    assert ("search", "retry attempts", "ab12cd34", 5) in api.calls


@pytest.mark.parametrize(
    ("path", "status", "code"),
    [
        ("/api/node/not-an-id", 400, "invalid_id"),
        ("/api/node/clm_broken", 409, "excerpt_mismatch"),
        ("/api/graph?generation=404", 404, "generation_not_found"),
        ("/api/node/clm_bug", 500, "internal_error"),
        ("/api/node/clm_nomem", 503, "out_of_memory"),
        ("/api/node/clm_full", 503, "disk_full"),
        ("/api/graph?max_nodes=many", 400, "invalid_limit"),
        ("/api/search?q=", 400, "query_empty"),
        ("/api/search?q=x&limit=0", 400, "invalid_limit"),
        ("/api/nothing", 404, "not_found"),
        ("/api/node/", 404, "not_found"),
    ],
)
def test_server_errors_are_json_envelopes(
    served: tuple[str, FakeApi], path: str, status: int, code: str
) -> None:
    base, _ = served
    got, headers, body = fetch(base + path)
    assert got == status
    assert headers["Content-Type"].startswith("application/json")
    error = json.loads(body)["error"]
    assert error["code"] == code and error["message"]
    if code == "internal_error":
        assert "a bug" not in error["message"]  # details stay in the server's log


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:8765", "127.0.0.1.nip.io", "10.0.0.1", "[::2]:80"]
)
def test_server_refuses_foreign_host_headers(served: tuple[str, FakeApi], host: str) -> None:
    base, api = served
    status, _, body = fetch(base + "/api/graph", host=host)
    assert status == 403
    assert json.loads(body)["error"]["code"] == "host_refused"
    assert not api.calls


def test_server_accepts_loopback_names_and_only_get(served: tuple[str, FakeApi]) -> None:
    base, _ = served
    port = base.rsplit(":", 1)[1]
    for host in (f"localhost:{port}", f"127.0.0.1:{port}", f"[::1]:{port}", "LOCALHOST"):
        assert fetch(base + "/api/graph", host=host)[0] == 200, host
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        status, headers, body = fetch(base + "/api/graph", method=method)
        assert status == 405 and headers["Allow"] == "GET"
        assert json.loads(body)["error"]["code"] == "method_not_allowed"
    assert host_is_loopback("127.8.9.10:1") and not host_is_loopback(None)
    assert not host_is_loopback("[::1]x") and not host_is_loopback("localhost.evil.example")
    for host in ("127.0.0.1:80@evil.example", "[::1]:80@evil.example", "localhost:", "[::1]:"):
        assert not host_is_loopback(host), host


# ----------------------------------------------------------------------------- the CLI


def test_cli_universe_writes_the_page(workspace: Path) -> None:
    build_workspace(workspace)
    result = run_cli("universe", "--out", "x.html", "--json", cwd=workspace)
    assert result.code == 0, result.stderr
    report = result.json()
    assert Path(report["path"]) == workspace / "x.html"
    assert report["truncated"] is None
    assert report["generation"]["number"] == 2
    page = (workspace / "x.html").read_text(encoding="utf-8")
    assert "<script>alert(1)</script>" not in page and "<img src=x" not in page
    graph = embedded_graph(page)
    assert graph["generation"] == report["generation"]
    assert graph["counts"] == report["counts"]
    statuses = {n["status"] for n in graph["nodes"] if n["kind"] == "claim"}
    assert statuses == {"confirmed", "unverified", "disputed", "retracted"}
    assert any(n.get("statement") == HOSTILE for n in graph["nodes"])
    assert {"entity", "note", "source", "segment", "revision", "raw"} <= {
        n["kind"] for n in graph["nodes"]
    }
    assert {"retracts", "disputes", "evidence", "cites"} <= {e["kind"] for e in graph["edges"]}


def test_cli_serve_refuses_non_loopback(tmp_path: Path) -> None:
    result = run_cli("serve", "--host", "0.0.0.0", cwd=tmp_path)
    assert result.code == 2
    assert "bind_refused" in result.stderr


def test_cli_serve_answers_and_stops_on_ctrl_c(workspace: Path) -> None:
    build_workspace(workspace)
    proc = start_cli("serve", "--port", "0", cwd=workspace, session=False)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line + (proc.stderr.read() if proc.poll() is not None and proc.stderr else "")
        status, _, body = fetch(url.group(0) + "api/graph")
        assert status == 200 and json.loads(body)["generation"]["number"] == 2
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "stopped" in out


# ----------------------------------------------------------------------------- the browser

browser_missing = not (CHROMIUM.exists() and CHROMEDRIVER.exists())
needs_browser = pytest.mark.skipif(
    browser_missing,
    reason="browser tests need Debian's chromium and chromium-driver (/usr/bin/chromium, "
    "/usr/bin/chromedriver): apt-get install chromium chromium-driver",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    profile = tempfile.mkdtemp(prefix="rt-chromium-")
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1440,900",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(str(CHROMEDRIVER)))
    driver.set_script_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def universe_ws(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SQLite workspace shared by the browser tests (they only read it)."""
    root = tmp_path_factory.mktemp("universe") / "ws"
    root.mkdir()
    env = {"RAYTSYSTEM_DATABASE_URL": ""}
    assert run_cli("init", cwd=root, env=env).code == 0
    build_workspace(root, env)
    result = run_cli("universe", "--out", "universe.html", "--json", cwd=root, env=env)
    assert result.code == 0, result.stderr
    return root


def real_api(root: Path) -> Any:
    from raytsystem.api import Session
    from raytsystem.universe.api import UniverseApi

    return UniverseApi(Session.open(root))


def wait_for(
    driver: Any, predicate: Callable[[], Any], timeout: float = 60, what: str = "condition"
) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def load(driver: Any, url: str, timeout: float = 60) -> None:
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get(url)
    wait_for(
        driver,
        lambda: driver.execute_script(
            "return document.getElementById('rt-canvas').dataset.ready === 'true'"
        ),
        timeout,
        "the layout",
    )


def console_errors(driver: Any) -> list[dict[str, Any]]:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def painted_pixels(driver: Any) -> int:
    """Canvas pixels that are not the background colour."""
    return int(
        driver.execute_script(
            """const c = document.getElementById('rt-canvas');
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let p = 0; p < d.length; p += 4)
          if (Math.abs(d[p] - arguments[0]) + Math.abs(d[p + 1] - arguments[1])
              + Math.abs(d[p + 2] - arguments[2]) > 24) n++;
        return n;""",
            *BACKGROUND,
        )
    )


def click_node(driver: Any, node_id: str) -> None:
    """Bring a node to the middle of the canvas, then click it with a real pointer."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    driver.execute_script("window.raytsystemUniverse.centerOn(arguments[0])", node_id)
    pos = driver.execute_script(
        "return window.raytsystemUniverse.nodeScreenPosition(arguments[0])", node_id
    )
    assert pos, f"{node_id} is not drawn"
    canvas = driver.find_element(By.ID, "rt-canvas")
    rect = driver.execute_script(
        "const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.width, r.height]",
        canvas,
    )
    dx = round(pos["x"] - (rect[0] + rect[2] / 2))
    dy = round(pos["y"] - (rect[1] + rect[3] / 2))
    ActionChains(driver).move_to_element_with_offset(canvas, dx, dy).click().perform()


def panel_text(driver: Any) -> str:
    return str(driver.execute_script("return document.getElementById('rt-panel').textContent"))


def assert_no_script_ran(driver: Any) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018  (an alert would mean hostile text ran)
    assert driver.find_elements(By.CSS_SELECTOR, "img") == []
    assert (
        driver.find_elements(By.CSS_SELECTOR, "script")
        and len(driver.find_elements(By.CSS_SELECTOR, "script")) == 3
    )


@needs_browser
def test_browser_static_file(browser: Any, universe_ws: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    page_path = universe_ws / "universe.html"
    graph = embedded_graph(page_path.read_text(encoding="utf-8"))
    load(browser, page_path.as_uri())
    assert console_errors(browser) == []
    canvas = browser.find_element(By.ID, "rt-canvas")
    assert int(canvas.get_attribute("data-drawn-nodes")) > 0
    assert painted_pixels(browser) > 500
    header = browser.find_element(By.ID, "rt-gen").text
    assert "generation 2" in header and graph["generation"]["hash"][:16] in header
    assert graph["generation"]["hash"] in panel_text(browser)
    assert browser.find_elements(By.ID, "rt-truncated") == []  # `truncated` is null here

    nodes = {n["id"]: n for n in graph["nodes"]}
    claim = next(
        i
        for i, n in nodes.items()
        if n.get("statement") == "Retries stop after at most 5 attempts."
    )
    click_node(browser, claim)
    chain = claim_chain(graph, claim)
    wait_for(
        browser, lambda: chain["raw"] in panel_text(browser), 10, "the evidence chain in the panel"
    )
    text = panel_text(browser)
    for value in (claim, chain["hash"], chain["segment"], chain["revision"], chain["raw"]):
        assert value in text

    # Each lens draws its own subset.
    for lens, kinds in (("evidence", {"raw", "segment"}), ("sources", {"source"})):
        browser.find_element(By.ID, f"rt-lens-{lens}").click()
        browser.find_element(By.ID, "rt-fit").click()
        some = next(i for i, n in nodes.items() if n["kind"] in kinds)
        assert browser.execute_script(
            "return window.raytsystemUniverse.nodeScreenPosition(arguments[0]) !== null", some
        )
    browser.find_element(By.ID, "rt-lens-knowledge").click()

    # The list view: a plain table of buttons, keyboard-navigable, same details on click.
    browser.find_element(By.ID, "rt-list-toggle").click()
    assert browser.find_element(By.ID, "rt-list").is_displayed()
    assert not canvas.is_displayed()
    hostile = next(i for i, n in nodes.items() if n.get("statement") == HOSTILE)
    button = browser.find_element(By.CSS_SELECTOR, f'.row-btn[data-id="{hostile}"]')
    assert button.text == HOSTILE  # shown as text, not markup
    retracted = next(i for i, n in nodes.items() if n.get("status") == "retracted")
    browser.find_element(By.CSS_SELECTOR, f'.row-btn[data-id="{retracted}"]').click()
    wait_for(browser, lambda: retracted in panel_text(browser), 10, "details from the list")
    assert "retracted" in panel_text(browser) and "retracted by" in panel_text(browser)
    focused = browser.switch_to.active_element
    focused.send_keys(Keys.ARROW_DOWN)
    assert browser.switch_to.active_element.get_attribute("data-id") != retracted
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    wait_for(
        browser,
        lambda: browser.switch_to.active_element.get_attribute("data-id") in panel_text(browser),
        10,
        "keyboard selection",
    )

    # Search narrows the list.
    search = browser.find_element(By.ID, "rt-search")
    search.send_keys("legacy gateway")
    wait_for(
        browser,
        lambda: len(browser.find_elements(By.CSS_SELECTOR, ".row-btn")) == 1,
        10,
        "a filtered list",
    )
    browser.find_element(By.ID, "rt-list-toggle").click()
    assert canvas.is_displayed()
    assert_no_script_ran(browser)
    assert console_errors(browser) == []


@needs_browser
def test_browser_served_page(browser: Any, universe_ws: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    api = real_api(universe_ws)
    server = make_server(api, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        load(browser, f"http://127.0.0.1:{server.port}/")
        assert console_errors(browser) == []
        assert int(browser.find_element(By.ID, "rt-canvas").get_attribute("data-drawn-nodes")) > 0
        assert painted_pixels(browser) > 500
        graph = api.graph()
        claim = next(
            n["id"]
            for n in graph["nodes"]
            if n.get("statement") == "Retries stop after at most 5 attempts."
        )
        click_node(browser, claim)
        wait_for(
            browser,
            lambda: browser.execute_script(
                "const r = document.getElementById('rt-remote'); return r && r.dataset.loaded"
            ),
            20,
            "the full chain",
        )
        shown = api.node(claim)
        evidence = shown["evidence"][0]
        assert hashlib.sha256(evidence["cited_excerpt"].encode()).hexdigest() == evidence["sha256"]
        text = panel_text(browser)
        for value in (
            evidence["sha256"],
            evidence["cited_excerpt"],
            evidence["chain"]["raw_blob"]["address"],
            evidence["chain"]["segment"]["id"],
            evidence["chain"]["revision"]["id"],
            claim_chain(graph, claim)["hash"],
        ):
            assert value in text
        assert "✓ matches the excerpt" in text
        # The whole generation with the claim's chain highlighted, for people to look at.
        browser.find_element(By.ID, "rt-lens-all").click()
        browser.find_element(By.ID, "rt-fit").click()
        browser.save_screenshot(str(_artifact("universe.png")))

        search = browser.find_element(By.ID, "rt-search")
        search.send_keys("attempts", Keys.ENTER)
        wait_for(
            browser,
            lambda: "Claim index of the generation (" in panel_text(browser),
            20,
            "index search hits",
        )
        assert "Retries stop after at most 5 attempts." in panel_text(browser)
        assert_no_script_ran(browser)
        assert console_errors(browser) == []
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def _artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / name


def synthetic_graph(total: int, *, truncated: bool) -> dict[str, Any]:
    """A graph shaped like an export: sources with revision, raw blob, segments and claims (all
    four statuses, some manual), entities mentioned across sources, notes that retract."""

    def h(*parts: object) -> str:
        return hashlib.blake2b("/".join(map(str, parts)).encode(), digest_size=16).hexdigest()

    statuses = ["confirmed"] * 17 + ["unverified", "disputed", "retracted"]
    entities = [
        {"id": f"ent_{h('e', k)}", "kind": "entity", "label": f"Entity {k}", "description": ""}
        for k in range(60)
    ]
    nodes: list[dict[str, Any]] = []
    edges: list[dict[str, str]] = []
    notes: list[str] = []
    claims: list[str] = []
    s = 0
    while len(nodes) + len(entities) < total:
        note = s % 10 == 0
        src, rev, raw = f"src_{h('s', s)}", f"rev_{h('r', s)}", h("b", s) + h("c", s)
        path = f"knowledge/manual/n{s:04d}.md" if note else f"docs/area{s % 7}/file{s:04d}.md"
        nodes += [
            {
                "id": src,
                "kind": "note" if note else "source",
                "label": path,
                "path": path,
                "revision_id": rev,
                "note_status": "current" if note else None,
            },
            {"id": rev, "kind": "revision", "label": rev, "source_id": src},
            {"id": f"raw:{raw}", "kind": "raw", "label": raw[:16], "blake3": raw},
        ]
        edges += [
            {"source": rev, "target": src, "kind": "revision_of"},
            {"source": rev, "target": f"raw:{raw}", "kind": "raw"},
        ]
        if note:
            notes.append(src)
        segment = ""
        for c in range(130):
            if len(nodes) + len(entities) >= total:
                break
            if c % 3 == 0:
                segment = f"seg_{h('g', s, c)}"
                nodes.append(
                    {
                        "id": segment,
                        "kind": "segment",
                        "label": f"paragraph: Section {c // 3}",
                        "segment_kind": "paragraph",
                    }
                )
                edges.append({"source": segment, "target": rev, "kind": "in_revision"})
                continue
            cid = f"clm_{h('k', s, c)}"
            text = f"Claim {c} of file {s}: the service retries at most {c % 9 + 1} times."
            nodes.append(
                {
                    "id": cid,
                    "kind": "claim",
                    "label": text,
                    "statement": text,
                    "status": statuses[(s * 31 + c) % len(statuses)],
                    "authority": "manual" if note else "extracted",
                    "hash": h("x", s, c) * 2,
                    "source_id": src,
                    "path": path,
                }
            )
            claims.append(cid)
            edges += [
                {"source": cid, "target": src, "kind": "in_source"},
                {"source": cid, "target": segment, "kind": "evidence"},
            ]
            if c % 11 == 0:
                edges.append(
                    {"source": cid, "target": entities[(s + c) % 60]["id"], "kind": "mentions"}
                )
        s += 1
    for k, note_id in enumerate(notes):
        edges.append(
            {"source": note_id, "target": claims[(k * 977) % len(claims)], "kind": "retracts"}
        )
    nodes += entities
    return {
        "schema_version": "1",
        "generation": {"number": 42, "hash": h("generation") * 2},
        "counts": {
            "sources": s,
            "claims": len(claims),
            "entities": len(entities),
            "nodes": len(nodes),
            "edges": len(edges),
        },
        "truncated": {"claims_left_out": 1234, "claims_shown": len(claims), "max_nodes": total}
        if truncated
        else None,
        "nodes": nodes,
        "edges": edges,
    }


@needs_browser
def test_browser_20000_nodes(browser: Any, tmp_path: Path) -> None:
    """Smoke at the export's default limit: it becomes interactive, draws, hit-tests, and says
    the graph was truncated. Timings are printed (benchmarks judge them, not this test)."""
    from selenium.webdriver.common.by import By

    graph = synthetic_graph(20_000, truncated=True)
    assert len(graph["nodes"]) == 20_000
    page = tmp_path / "big.html"
    page.write_text(render_page(graph), encoding="utf-8")
    started = time.monotonic()
    load(browser, page.as_uri(), timeout=240)
    interactive = time.monotonic() - started
    assert console_errors(browser) == []
    stats = browser.execute_script("return window.raytsystemUniverse.stats()")
    draw_ms = {}
    for lens in ("knowledge", "all"):
        browser.find_element(By.ID, f"rt-lens-{lens}").click()
        browser.find_element(By.ID, "rt-fit").click()
        draw_ms[lens] = [
            round(browser.execute_script("return window.raytsystemUniverse.measureDraw()"), 1)
            for _ in range(3)
        ]
    drawn = int(browser.find_element(By.ID, "rt-canvas").get_attribute("data-drawn-nodes"))
    print(
        f"\nuniverse 20k: interactive after {interactive:.2f}s; "
        f"layout {stats['layoutMs']:.0f} ms wall, {stats['computeMs']:.0f} ms compute, "
        f"{stats['iterations']} steps; draw (flushed) {draw_ms} ms; "
        f"{drawn} nodes drawn in the All lens"
    )
    assert drawn == 20_000
    assert painted_pixels(browser) > 5_000
    notice = browser.find_element(By.ID, "rt-truncated")
    assert notice.is_displayed() and "1,234 claims were left out" in notice.text
    claim = next(n for n in graph["nodes"] if n["kind"] == "claim" and n["status"] == "disputed")
    click_node(browser, claim["id"])
    wait_for(browser, lambda: claim["hash"] in panel_text(browser), 10, "details of a clicked node")
    browser.save_screenshot(str(_artifact("universe-20k.png")))


@needs_browser
def test_browser_reduced_motion(browser: Any, tmp_path: Path) -> None:
    """With prefers-reduced-motion the layout settles without animated previews."""
    page = tmp_path / "calm.html"
    page.write_text(render_page(synthetic_graph(6_000, truncated=False)), encoding="utf-8")
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia",
        {"features": [{"name": "prefers-reduced-motion", "value": "reduce"}]},
    )
    try:
        load(browser, page.as_uri())
        stats = browser.execute_script("return window.raytsystemUniverse.stats()")
        assert stats["reducedMotion"] is True
        assert stats["previews"] == 0
        assert stats["drawnNodes"] > 0 and painted_pixels(browser) > 1_000
        assert browser.find_elements("id", "rt-truncated") == []
        assert console_errors(browser) == []
    finally:
        browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"features": []})


@needs_browser
def test_browser_empty_and_untruncated(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    empty = small_graph()
    empty.update(nodes=[], edges=[], counts={"nodes": 0, "edges": 0})
    page = tmp_path / "empty.html"
    page.write_text(render_page(empty), encoding="utf-8")
    load(browser, page.as_uri())
    assert console_errors(browser) == []
    assert "no nodes" in browser.find_element(By.ID, "rt-stage").text
    page.write_text(render_page(small_graph(truncated=True)), encoding="utf-8")
    load(browser, page.as_uri())
    assert "Partial graph" in browser.find_element(By.ID, "rt-truncated").text
    assert_no_script_ran(browser)
    assert console_errors(browser) == []
