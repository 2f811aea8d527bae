"""The workspace: path policy, globs, discovery, `init`, and `raytsystem.toml`.

Everything here runs on real files in tmp_path. The path policy is what stands between a
crafted path (or symlink) and the ledger, so every refusal is listed on its own row.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from pathlib import Path

import pytest
from conftest import REPO, run_cli, write

from raytsystem.config import (
    CONFIG_NAME,
    DEFAULT_CONFIG_TEXT,
    DEFAULT_EXCLUDE,
    DEFAULT_INCLUDE,
    DEFAULT_KEEP_INDEXES,
    Config,
    IdsConfig,
    load_config,
)
from raytsystem.discovery import Candidate, Refusal, discover
from raytsystem.errors import PathRefused, WorkspaceError
from raytsystem.ids import NEWEST_SCHEME
from raytsystem.workspace import (
    GITIGNORE_LINES,
    RAW_README,
    Workspace,
    check_rel_path,
    glob_regex,
    init_workspace,
)

# --- check_rel_path ----------------------------------------------------------------------------

REFUSED = [
    # (path, a fragment of the reason)
    ("", "empty"),
    (" docs/a.md", "whitespace"),
    ("docs/a.md ", "whitespace"),
    ("docs/a.md\u3000", "whitespace"),  # ideographic space is whitespace too
    ("docs/a\x00.md", "control"),
    ("docs/a\n.md", "control"),
    ("docs/a\t.md", "control"),
    ("docs/a\x1b.md", "control"),
    ("docs/a\x7f.md", "control"),
    ("/x", "absolute"),
    ("/etc/passwd", "absolute"),
    ("C:\\x", "absolute"),
    ("c:/x", "absolute"),
    ("docs\\a.md", "separator"),
    ("..", "components"),
    ("../x", "components"),
    ("docs/../../x", "components"),
    ("docs/..", "components"),
    (".", "components"),
    ("./docs/a.md", "components"),
    ("docs/./a.md", "components"),
    ("docs//a.md", "components"),
    ("docs/", "components"),
    ("_raw", "own state"),
    ("_raw/README.md", "own state"),
    ("_raw/blake3/aa/" + "a" * 64, "own state"),
    (".raytsystem", "own state"),
    (".raytsystem/ledger.sqlite3", "own state"),
    (".git", ".git"),
    (".git/config", ".git"),
    ("docs/.git/HEAD", ".git"),
    ("a/b/c/.git", ".git"),
]


@pytest.mark.parametrize(("path", "reason"), REFUSED, ids=[repr(p) for p, _ in REFUSED])
def test_check_rel_path_refuses(path: str, reason: str) -> None:
    with pytest.raises(PathRefused) as info:
        check_rel_path(path)
    assert reason in info.value.reason
    assert info.value.path == path
    assert info.value.code == "path_refused"
    assert info.value.exit_status == 5


ACCEPTED = [
    ("docs/a.md", "docs/a.md"),
    ("README.md", "README.md"),
    ("docs/a b/c d.md", "docs/a b/c d.md"),
    ("docs/cafe\u0301.md", "docs/caf\u00e9.md"),  # NFD in, NFC out
    ("e\u0301/x.md", "\u00e9/x.md"),
    ("日本/文書.md", "日本/文書.md"),
    ("docs/_raw/x.md", "docs/_raw/x.md"),  # only the top-level _raw/ is reserved
    ("docs/.raytsystem/x.md", "docs/.raytsystem/x.md"),
    (".github/workflows/ci.md", ".github/workflows/ci.md"),
    ("docs/.gitignore", "docs/.gitignore"),
    ("..md", "..md"),
    ("docs/...", "docs/..."),
    ("_rawish/a.md", "_rawish/a.md"),
]


@pytest.mark.parametrize(("path", "canonical"), ACCEPTED, ids=[repr(p) for p, _ in ACCEPTED])
def test_check_rel_path_accepts_and_returns_nfc(path: str, canonical: str) -> None:
    out = check_rel_path(path)
    assert out == canonical
    assert unicodedata.is_normalized("NFC", out)


# --- glob_regex --------------------------------------------------------------------------------

GLOBS = [
    ("*.md", "README.md", True),
    ("*.md", "docs/a.md", False),  # `*` never crosses /
    ("*.md", "a.txt", False),
    ("*.md", "a.md.txt", False),
    ("knowledge/**", "knowledge/a.md", True),
    ("knowledge/**", "knowledge/manual/deep/n.md", True),
    ("knowledge/**", "knowledge", False),
    ("knowledge/**", "knowledgebase/a.md", False),
    ("knowledge/**", "x/knowledge/a.md", False),
    ("docs/*.md", "docs/a.md", True),
    ("docs/*.md", "docs/sub/a.md", False),
    ("**/*.md", "a.md", True),  # `**/` may match no folder at all
    ("**/*.md", "x/y/z/a.md", True),
    ("**/*.md", "x/a.txt", False),
    ("docs/**/x.md", "docs/x.md", True),
    ("docs/**/x.md", "docs/a/b/x.md", True),
    ("docs/**/x.md", "docs/a/bx.md", False),
    ("ops/reviews/**", "ops/reviews/2026/r.md", True),
    ("ops/reviews/**", "ops/reviewsX/r.md", False),
    ("?.md", "a.md", True),
    ("?.md", "ab.md", False),
    ("a?b", "a/b", False),  # `?` never crosses / either
    ("a+b.md", "a+b.md", True),  # regex metacharacters are literal
    ("a+b.md", "aab.md", False),
    ("[ab].md", "[ab].md", True),
    ("[ab].md", "a.md", False),
    ("docs/a.md", "docs/a.md", True),
    ("docs/a.md", "docs/a.mdx", False),
]


@pytest.mark.parametrize(("pattern", "path", "matches"), GLOBS)
def test_glob_regex(pattern: str, path: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).match(path)) is matches


# --- discover ----------------------------------------------------------------------------------


def _ws(root: Path, config: str | None = None) -> Workspace:
    root.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (root / CONFIG_NAME).write_text(config, encoding="utf-8")
    return Workspace.open(root)


def _paths(items: list[Candidate | Refusal]) -> list[str]:
    return [i.path for i in items if isinstance(i, Candidate)]


def _refusals(items: list[Candidate | Refusal]) -> dict[str, str]:
    return {i.path: i.code for i in items if isinstance(i, Refusal)}


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    for rel in [
        "README.md",
        "CHANGELOG.md",
        "notes.txt",
        "knowledge/manual/n.md",
        "knowledge/deep/er/x.md",
        "ops/decisions/0001-x.md",
        "ops/reviews/r-1.md",
        "ops/reviews/2026/r-2.md",
        "docs/a.md",
        "docs/sub/b.txt",
        "docs/.git/HEAD.md",
        "src/code.py",
        "other/b.md",
        "_raw/README.md",
        ".raytsystem/x.md",
        ".git/config.md",
    ]:
        write(root, rel, f"content of {rel}\n")
    return root


def test_discover_default_includes_and_excludes(tree: Path) -> None:
    items = list(discover(_ws(tree)))
    assert _paths(items) == [
        "CHANGELOG.md",
        "README.md",
        "docs/a.md",
        "docs/sub/b.txt",
        "knowledge/deep/er/x.md",
        "knowledge/manual/n.md",
        "notes.txt",
        "ops/decisions/0001-x.md",
        "other/b.md",
        "src/code.py",
    ]
    assert _refusals(items) == {}


def test_discover_candidates_carry_disk_path_and_stat(tree: Path) -> None:
    ws = _ws(tree)
    (candidate,) = [c for c in discover(ws) if c.path == "docs/a.md"]
    assert isinstance(candidate, Candidate)
    assert candidate.disk == str(ws.root / "docs" / "a.md")
    size, mtime_ns, inode = candidate.key
    st = os.stat(candidate.disk)
    assert size == len("content of docs/a.md\n") and (mtime_ns, inode) == (
        st.st_mtime_ns,
        st.st_ino,
    )


def test_discover_never_descends_into_state_or_git(tree: Path) -> None:
    # Include everything: anything walked under a reserved folder would surface, at least as
    # a path_refused Refusal.
    items = list(discover(_ws(tree, '[ingest]\ninclude = ["**"]\nexclude = []\n')))
    seen = [i.path for i in items]
    assert not [p for p in seen if p.split("/")[0] in ("_raw", ".raytsystem", ".git")]
    assert not [p for p in seen if "/.git/" in f"/{p}"]
    assert "other/b.md" in seen and "src/code.py" in seen and "notes.txt" in seen
    assert _refusals(items) == {}


def test_discover_results_are_sorted(tree: Path) -> None:
    for name in ["z.md", "a.md", "B.md", "é.md", "0.md", "a-b.md"]:
        write(tree, f"docs/{name}", name)
    write(tree, "docs/a/z.md", "nested")
    paths = [i.path for i in discover(_ws(tree))]
    assert paths == sorted(paths)
    assert len(paths) == len(set(paths))


def test_discover_with_several_scopes_is_sorted(tree: Path) -> None:
    write(tree, "knowledge/a/z.md", "z")
    write(tree, "knowledge/a-b/a.md", "a")
    paths = [i.path for i in discover(_ws(tree), ["knowledge/a", "knowledge/a-b"])]
    assert set(paths) == {"knowledge/a/z.md", "knowledge/a-b/a.md"}
    assert paths == sorted(paths)


def test_discover_scope_limits_the_walk(tree: Path) -> None:
    assert _paths(list(discover(_ws(tree), ["knowledge"]))) == [
        "knowledge/deep/er/x.md",
        "knowledge/manual/n.md",
    ]


def test_discover_explicit_file_in_scope(tree: Path) -> None:
    assert _paths(list(discover(_ws(tree), ["docs/a.md"]))) == ["docs/a.md"]


def test_discover_explicit_path_not_included_is_not_selected(tree: Path) -> None:
    items = list(discover(_ws(tree, '[ingest]\ninclude = ["docs/**"]\n'), ["notes.txt"]))
    assert _refusals(items) == {"notes.txt": "not_selected"}
    assert _paths(items) == []


def test_discover_explicit_excluded_path_is_not_selected(tree: Path) -> None:
    items = list(discover(_ws(tree), ["ops/reviews/r-1.md"]))
    assert _refusals(items) == {"ops/reviews/r-1.md": "not_selected"}


def test_discover_symlink_leaving_the_workspace_is_refused(tree: Path, tmp_path: Path) -> None:
    outside = write(tmp_path, "outside/secret.md", "secret")
    (tree / "docs" / "leak.md").symlink_to(outside)
    (tree / "docs" / "leak-relative.md").symlink_to(Path("..") / ".." / "outside" / "secret.md")
    items = list(discover(_ws(tree)))
    assert _refusals(items) == {
        "docs/leak.md": "symlink_outside",
        "docs/leak-relative.md": "symlink_outside",
    }
    assert "docs/leak.md" not in _paths(items)


def test_discover_symlink_into_raw_store_is_refused(tree: Path) -> None:
    (tree / "docs" / "raw.md").symlink_to(Path("..") / "_raw" / "README.md")
    items = list(discover(_ws(tree)))
    assert _refusals(items) == {"docs/raw.md": "path_refused"}


def test_discover_symlink_inside_the_workspace_is_followed(tree: Path) -> None:
    link = tree / "docs" / "link.md"
    link.symlink_to(Path("..") / "knowledge" / "manual" / "n.md")
    items = list(discover(_ws(tree)))
    (candidate,) = [i for i in items if i.path == "docs/link.md"]
    assert isinstance(candidate, Candidate)
    assert Path(candidate.disk).read_text() == "content of knowledge/manual/n.md\n"
    assert candidate.key[0] == len("content of knowledge/manual/n.md\n")  # the target's size


def test_discover_folder_symlink_leaving_the_workspace_is_refused(
    tree: Path, tmp_path: Path
) -> None:
    write(tmp_path, "vendor/guide.md", "outside")
    (tree / "docs" / "vendor").symlink_to(tmp_path / "vendor", target_is_directory=True)
    refusals = _refusals(list(discover(_ws(tree))))
    assert [code for path, code in refusals.items() if path.startswith("docs/vendor")] == [
        "symlink_outside"
    ]


def test_discover_refuses_a_scope_through_a_folder_symlink_leaving_the_workspace(
    tree: Path, tmp_path: Path
) -> None:
    write(tmp_path, "vendor/guide.md", "outside")
    (tree / "docs" / "vendor").symlink_to(tmp_path / "vendor", target_is_directory=True)
    for scope in ("docs/vendor", "docs/vendor/guide.md"):
        items = list(discover(_ws(tree), [scope]))
        assert _refusals(items) == {scope: "symlink_outside"}, scope
        assert _paths(items) == []


def test_discover_reports_a_symlink_loop_and_goes_on(tree: Path) -> None:
    (tree / "docs" / "loop.md").symlink_to("loop.md")
    items = list(discover(_ws(tree)))
    assert _refusals(items)["docs/loop.md"] == "read_error"
    assert "docs/a.md" in _paths(items)


def test_discover_settles_two_names_of_one_nfc_path_whatever_the_folder_order(
    tree: Path,
) -> None:
    composed, decomposed = "café", unicodedata.normalize("NFD", "café")
    write(tree, f"docs/{composed}/m.md", "composed")
    write(tree, f"docs/{decomposed}/m.md", "decomposed")
    items = list(discover(_ws(tree)))
    (candidate,) = [i for i in items if isinstance(i, Candidate) and i.path == "docs/café/m.md"]
    # The first name in code-point (and UTF-8 byte) order: "e" + U+0301 before "é".
    assert Path(candidate.disk).read_text(encoding="utf-8") == "decomposed"
    assert _refusals(items)["docs/café/m.md"] == "path_collision"


def test_discover_returns_nfc_paths_for_nfd_file_names(tree: Path) -> None:
    nfd_name = unicodedata.normalize("NFD", "café.md")
    write(tree, f"docs/{nfd_name}", "accent")
    items = [i for i in discover(_ws(tree)) if isinstance(i, Candidate)]
    (candidate,) = [c for c in items if c.path.startswith("docs/caf")]
    assert candidate.path == "docs/café.md"
    assert unicodedata.is_normalized("NFC", candidate.path)
    assert Path(candidate.disk).read_text(encoding="utf-8") == "accent"


# --- rel_from_cli ------------------------------------------------------------------------------


def test_rel_from_cli_turns_user_paths_into_workspace_paths(tree: Path) -> None:
    ws = _ws(tree)
    assert ws.rel_from_cli("docs/a.md", ws.root) == "docs/a.md"
    assert ws.rel_from_cli("a.md", ws.root / "docs") == "docs/a.md"
    assert ws.rel_from_cli("../README.md", ws.root / "docs") == "README.md"
    assert ws.rel_from_cli(str(ws.root / "docs" / "a.md"), Path("/")) == "docs/a.md"
    assert ws.rel_from_cli(".", ws.root) == ""


@pytest.mark.parametrize("arg", ["..", "../elsewhere/a.md", "docs/../../x", "/etc/passwd"])
def test_rel_from_cli_refuses_paths_outside_the_workspace(tree: Path, arg: str) -> None:
    ws = _ws(tree)
    with pytest.raises(PathRefused) as info:
        ws.rel_from_cli(arg, ws.root)
    assert "outside the workspace" in info.value.reason


def test_rel_from_cli_refuses_raytsystem_state(tree: Path) -> None:
    ws = _ws(tree)
    with pytest.raises(PathRefused):
        ws.rel_from_cli("_raw/README.md", ws.root)


# --- init_workspace ----------------------------------------------------------------------------


def test_init_creates_the_layout(tmp_path: Path) -> None:
    ws, created = init_workspace(tmp_path)
    assert ws.root == tmp_path.resolve()
    assert (tmp_path / CONFIG_NAME).read_text(encoding="utf-8") == DEFAULT_CONFIG_TEXT
    assert (tmp_path / "_raw" / "README.md").read_text(encoding="utf-8") == RAW_README
    assert (tmp_path / "knowledge" / "manual").is_dir()
    assert (tmp_path / "ops" / "decisions").is_dir()
    lines = (tmp_path / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert "/_raw/blake3/" in lines and "/.raytsystem/" in lines
    assert {CONFIG_NAME, "_raw/", "_raw/README.md", "knowledge/manual/", "ops/decisions/"} <= set(
        created
    )


def test_init_default_config_is_the_default_with_the_newest_id_scheme(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    assert load_config(tmp_path) == Config(ids=IdsConfig(NEWEST_SCHEME))


def test_this_repository_is_a_workspace_as_init_makes_one() -> None:
    """The repository's own raytsystem.toml is `init`'s text, so a fresh clone ingests itself
    the way a new workspace would (by the newest ID scheme, among the rest), but for `include`:
    the repository ingests its knowledge and documentation, not its code and test data."""
    ours = (REPO / CONFIG_NAME).read_text(encoding="utf-8")
    default_include = f"include = {json.dumps(DEFAULT_INCLUDE)}\n"
    assert default_include in DEFAULT_CONFIG_TEXT
    assert re.sub(r"(?m)^include = .*\n", default_include, ours) == DEFAULT_CONFIG_TEXT


def test_a_config_that_names_no_id_scheme_keeps_scheme_1(tmp_path: Path) -> None:
    """A workspace made before scheme 2 existed: its clones must derive the IDs its notes
    quote, so no [ids] table means scheme 1 (ADR 0030)."""
    (tmp_path / CONFIG_NAME).write_text("[index]\nkeep = 3\n", encoding="utf-8")
    assert load_config(tmp_path).ids.scheme == 1
    (tmp_path / CONFIG_NAME).write_text("[ids]\nscheme = 2\n", encoding="utf-8")
    assert load_config(tmp_path).ids.scheme == 2


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("4", "must be one of 1, 2, 3, not 4"),
        ("0", "must be a whole number of at least 1, not 0"),
        ('"2"', "must be a whole number of at least 1, not '2'"),
        ("true", "must be a whole number of at least 1, not True"),
        ("[2]", "must be a whole number of at least 1, not [2]"),
    ],
)
def test_an_unknown_id_scheme_is_a_config_error(tmp_path: Path, value: str, problem: str) -> None:
    (tmp_path / CONFIG_NAME).write_text(f"[ids]\nscheme = {value}\n", encoding="utf-8")
    with pytest.raises(WorkspaceError) as info:
        load_config(tmp_path)
    assert info.value.code == "config_invalid"
    assert str(info.value).endswith(f"is invalid: ids.scheme: {problem}")


def test_the_ids_table_takes_a_whole_float_and_refuses_unknown_keys(tmp_path: Path) -> None:
    (tmp_path / CONFIG_NAME).write_text("[ids]\nscheme = 2.0\n", encoding="utf-8")
    assert load_config(tmp_path).ids.scheme == 2
    (tmp_path / CONFIG_NAME).write_text("[ids]\nscheme = 2\nprefix = 8\n", encoding="utf-8")
    with pytest.raises(WorkspaceError, match=r"ids\.prefix: not a setting") as info:
        load_config(tmp_path)
    assert info.value.code == "config_invalid"


def test_init_twice_creates_nothing_and_changes_nothing(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    before = {
        p.relative_to(tmp_path).as_posix(): p.read_bytes() if p.is_file() else None
        for p in tmp_path.rglob("*")
    }
    _, created = init_workspace(tmp_path)
    after = {
        p.relative_to(tmp_path).as_posix(): p.read_bytes() if p.is_file() else None
        for p in tmp_path.rglob("*")
    }
    assert created == []
    assert after == before


def test_init_keeps_user_gitignore_lines_and_adds_ours_once(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("node_modules/\n*.pyc", encoding="utf-8")  # no final \n
    init_workspace(tmp_path)
    init_workspace(tmp_path)
    lines = (tmp_path / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert lines[:2] == ["node_modules/", "*.pyc"]
    for line in GITIGNORE_LINES:
        assert lines.count(line) == 1


def test_init_adds_only_the_missing_gitignore_line(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("/_raw/blake3/\n", encoding="utf-8")
    _, created = init_workspace(tmp_path)
    lines = (tmp_path / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert lines.count("/_raw/blake3/") == 1
    assert lines.count("/.raytsystem/") == 1
    assert lines.count("/_raw/.staging/") == 1
    assert ".gitignore (/_raw/.staging/, /.raytsystem/)" in created


def test_init_keeps_an_existing_config(tmp_path: Path) -> None:
    custom = '[ingest]\ninclude = ["notes/**"]\n'
    (tmp_path / CONFIG_NAME).write_text(custom, encoding="utf-8")
    ws, created = init_workspace(tmp_path)
    assert CONFIG_NAME not in created
    assert (tmp_path / CONFIG_NAME).read_text(encoding="utf-8") == custom
    assert ws.config.ingest.include == ("notes/**",)


def test_init_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError) as info:
        init_workspace(tmp_path / "missing")
    assert info.value.code == "workspace_not_found"


def test_find_walks_up_to_the_nearest_config(tmp_path: Path) -> None:
    init_workspace(tmp_path)
    deep = tmp_path / "docs" / "a" / "b"
    deep.mkdir(parents=True)
    assert Workspace.find(deep).root == tmp_path.resolve()


def test_find_without_config_is_workspace_not_found(tmp_path: Path) -> None:
    # tmp_path's parents may in theory hold a raytsystem.toml; none of pytest's do.
    with pytest.raises(WorkspaceError) as info:
        Workspace.find(tmp_path)
    assert info.value.code == "workspace_not_found"


# --- config ------------------------------------------------------------------------------------

BAD_CONFIGS = [
    pytest.param("[ingest\ninclude = [", id="bad-toml"),
    pytest.param(b"\xff\xfe[ingest]", id="not-utf8"),
    pytest.param("[unknown]\nx = 1\n", id="unknown-table"),
    pytest.param("[ingest]\nincluded = []\n", id="unknown-key"),
    pytest.param("top = 1\n", id="unknown-top-level-key"),
    pytest.param('[ingest]\ninclude = "docs/**"\n', id="include-not-a-list"),
    pytest.param("[ingest]\nmax_file_bytes = 0\n", id="zero-limit"),
    pytest.param('[ingest]\nmax_file_bytes = "big"\n', id="limit-not-int"),
    pytest.param('[ingest]\nmax_file_bytes = "5"\n', id="limit-a-string-of-digits"),
    pytest.param("[ingest]\nmax_file_bytes = 1.5\n", id="limit-a-fraction"),
    pytest.param("[ingest]\nmax_file_bytes = true\n", id="limit-a-bool"),
    pytest.param("[index]\nkeep = true\n", id="keep-a-bool"),
    pytest.param("[ingest]\nexclude = [1]\n", id="exclude-not-strings"),
    pytest.param("index = 3\n", id="table-not-a-table"),
]


@pytest.mark.parametrize("text", BAD_CONFIGS)
def test_bad_config_is_config_invalid(tmp_path: Path, text: str | bytes) -> None:
    path = tmp_path / CONFIG_NAME
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    ws = Workspace.open(tmp_path)  # the config is read on first use, not on open
    with pytest.raises(WorkspaceError) as info:
        _ = ws.config
    assert info.value.code == "config_invalid"
    assert info.value.exit_status == 5
    assert CONFIG_NAME in info.value.message


def test_config_error_names_every_problem(tmp_path: Path) -> None:
    (tmp_path / CONFIG_NAME).write_text(
        '[ingest]\nincluded = []\nmax_file_bytes = 0\nexclude = ["a", 2]\n[index]\nkeep = "2"\n',
        encoding="utf-8",
    )
    with pytest.raises(WorkspaceError) as info:
        _ = Workspace.open(tmp_path).config
    for name in ("ingest.included", "ingest.max_file_bytes", "index.keep", "ingest.exclude.1"):
        assert name in info.value.message


def test_config_values_and_defaults(tmp_path: Path) -> None:
    (tmp_path / CONFIG_NAME).write_text(
        '[ingest]\ninclude = ["notes/**"]\nmax_file_bytes = 1e7\n', encoding="utf-8"
    )
    config = Workspace.open(tmp_path).config
    assert config.ingest.include == ("notes/**",) and config.ingest.max_file_bytes == 10**7
    assert config.ingest.exclude == DEFAULT_EXCLUDE and config.index.keep == DEFAULT_KEEP_INDEXES


def test_bad_config_stops_discover(tmp_path: Path) -> None:
    (tmp_path / CONFIG_NAME).write_text("[ingest]\nincluded = []\n", encoding="utf-8")
    with pytest.raises(WorkspaceError) as info:
        list(discover(Workspace.open(tmp_path)))
    assert info.value.code == "config_invalid"


def test_cli_ingest_with_bad_config_exits_5(tmp_path: Path) -> None:
    (tmp_path / CONFIG_NAME).write_text("[ingest]\nincluded = []\n", encoding="utf-8")
    write(tmp_path, "docs/a.md", "# A\n\nA sentence.\n")
    result = run_cli("ingest", "--json", cwd=tmp_path)
    assert result.code == 5
    assert result.json()["error"]["code"] == "config_invalid"
    assert not (tmp_path / "_raw" / "blake3").exists()


def test_unknown_key_is_named_in_the_error(tmp_path: Path) -> None:
    (tmp_path / CONFIG_NAME).write_text("[ingest]\nincluded = []\n", encoding="utf-8")
    with pytest.raises(WorkspaceError, match="included"):
        load_config(tmp_path)


def test_missing_config_gives_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path) == Config()


def test_custom_include_and_exclude_drive_discover(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    for rel in ["notes/a.md", "notes/drafts/b.md", "notes/x.txt", "docs/c.md", "README.md"]:
        write(root, rel, rel)
    ws = _ws(
        root,
        '[ingest]\ninclude = ["notes/**"]\nexclude = ["notes/drafts/**", "**/*.txt"]\n'
        "max_file_bytes = 123\n",
    )
    assert ws.config.ingest.max_file_bytes == 123
    assert _paths(list(discover(ws))) == ["notes/a.md"]


def test_custom_max_file_bytes_is_honored_by_ingest(tmp_path: Path) -> None:
    # discover only lists files; the limit is applied where the bytes are read (pipeline/files).
    root = tmp_path / "ws"
    _ws(root, '[ingest]\ninclude = ["docs/**"]\nexclude = []\nmax_file_bytes = 64\n')
    write(root, "docs/small.md", "# Small\n\nThis file fits.\n")
    write(root, "docs/big.md", "# Big\n\n" + "This sentence is long. " * 10 + "\n")
    result = run_cli("ingest", "--json", cwd=root)
    assert result.code == 0, result.stderr
    findings = {(f["code"], f["subject"]) for f in result.json()["findings"]}
    assert ("file_too_large", "docs/big.md") in findings
    assert ("file_too_large", "docs/small.md") not in findings
    assert result.json()["counts"]["new_sources"] == 1


def test_default_config_text_is_valid_toml_for_the_defaults(tmp_path: Path) -> None:
    (tmp_path / CONFIG_NAME).write_text(DEFAULT_CONFIG_TEXT, encoding="utf-8")
    assert load_config(tmp_path) == Config(ids=IdsConfig(NEWEST_SCHEME))
