"""The Universe page: one self-contained HTML file that draws a generation's evidence graph.

The page carries everything it needs inline (CSS and JS from `static/`, the graph as JSON) and
makes no network request when opened as a file. Text from sources is data, never markup: the
graph is embedded with `<`, `>`, `&`, U+2028 and U+2029 as JSON `\\u` escapes inside a
`<script type="application/json">` that the browser never runs, the script reads it with
`JSON.parse` and writes text only with `textContent` / text nodes / canvas `fillText`. A strict
Content-Security-Policy allows only the page's own script and style (by SHA-256 hash), images
from `data:` and, when the page is served with an API, fetches to its own origin.

The output is deterministic: the same graph gives the same bytes.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from functools import cache
from importlib.resources import files
from typing import Any

_JSON_ESCAPES = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="@CSP@">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="color-scheme" content="dark">
<title>@TITLE@</title>
<link rel="icon" href="data:,">
<style>@STYLE@</style>
</head>
<body>
<header class="top">
  <h1>raytsystem <span class="sub">Universe</span></h1>
  <div id="rt-gen" class="gen"></div>
  <div id="rt-counts" class="counts"></div>
</header>
<div class="toolbar">
  <div id="rt-lenses" role="tablist" aria-label="Lens"></div>
  <span id="rt-lens-help" class="lens-help"></span>
  <div class="tools">
    <input id="rt-search" type="search" autocomplete="off" spellcheck="false"
      placeholder="Search labels (Enter: results)" aria-label="Search nodes by label">
    <span id="rt-search-count" class="search-count" aria-live="polite"></span>
    <button id="rt-fit" type="button" title="Fit the graph in view (0)">Fit</button>
    <button id="rt-zoom-in" type="button" title="Zoom in (+)" aria-label="Zoom in">+</button>
    <button id="rt-zoom-out" type="button" title="Zoom out (-)"
      aria-label="Zoom out">&#8722;</button>
    <button id="rt-list-toggle" type="button" aria-pressed="false"
      aria-controls="rt-list">List view</button>
  </div>
</div>
<div id="rt-notices" class="notices" role="status"></div>
<main>
  <section id="rt-stage" class="stage" aria-label="Graph">
    <canvas id="rt-canvas" tabindex="0" role="img"
      aria-label="Evidence graph. The list view is a keyboard-navigable list of its nodes.">
    </canvas>
    <div id="rt-list" class="list" hidden></div>
    <div id="rt-legend" class="legend" aria-label="Legend"></div>
    <div id="rt-tooltip" class="tooltip" hidden></div>
    <div id="rt-stats" class="stats" aria-live="off"></div>
    <noscript><p class="noscript">This page needs JavaScript to draw the graph.</p></noscript>
  </section>
  <aside id="rt-panel" class="panel" aria-label="Details" aria-live="polite"></aside>
</main>
<script type="application/json" id="rt-graph">@GRAPH@</script>
<script type="application/json" id="rt-config">@CONFIG@</script>
<script>@SCRIPT@</script>
</body>
</html>
"""


def embed_json(value: Any) -> str:
    """JSON that is inert inside an HTML `<script>` element (no `<`, `>`, `&`, U+2028/9)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).translate(_JSON_ESCAPES)


@cache
def _asset(name: str) -> str:
    text = files("raytsystem.universe").joinpath("static", name).read_text(encoding="utf-8")
    closing = "</script" if name.endswith(".js") else "</style"
    if closing in text.lower():
        raise ValueError(f"static/{name} must not contain {closing!r}")
    return text


def _sha256_source(text: str) -> str:
    return (
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"
    )


def content_security_policy(*, with_api: bool) -> str:
    """The page's policy: its own inline script and style only; `connect-src 'self'` with an API."""
    parts = [
        "default-src 'none'",
        f"script-src {_sha256_source(_asset('universe.js'))}",
        f"style-src {_sha256_source(_asset('universe.css'))}",
        "img-src data:",
        "base-uri 'none'",
        "form-action 'none'",
    ]
    if with_api:
        parts.append("connect-src 'self'")
    return "; ".join(parts)


def render_page(graph: dict[str, Any], *, api_base: str | None = None) -> str:
    """One self-contained HTML page drawing `graph` (the JSON of `pipeline.graph.graph`).

    `api_base` is the same-origin path prefix of the JSON API (e.g. "/api") when the page is
    served; the page then fetches full chains (`/node/<id>`) and index search (`/search`).
    Without it the page is static and shows what the graph JSON carries.
    """
    generation = graph.get("generation") or {}
    title = f"raytsystem Universe · generation {generation.get('number', '?')}"
    config = {"api_base": api_base}
    replacements = {
        # Double-quoted attribute: `'` may stay as is, which keeps the policy readable.
        "@CSP@": html.escape(
            content_security_policy(with_api=api_base is not None), quote=False
        ).replace('"', "&quot;"),
        "@TITLE@": html.escape(title),
        "@STYLE@": _asset("universe.css"),
        "@GRAPH@": embed_json(graph),
        "@CONFIG@": embed_json(config),
        "@SCRIPT@": _asset("universe.js"),
    }
    out = _TEMPLATE
    # One pass in template order, so text already inserted is never scanned for placeholders.
    pieces: list[str] = []
    for key, value in replacements.items():
        head, sep, out = out.partition(key)
        if not sep:
            raise AssertionError(f"template placeholder {key} missing")
        pieces.extend((head, value))
    pieces.append(out)
    return "".join(pieces)
