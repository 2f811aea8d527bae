"""Git hooks that keep the knowledge base up to date: after a commit, a merge (`git pull`) and
a checkout, git runs an ingest (ADR 0039).

Each hook file gets one block between two marker lines, and nothing else is touched: a hook
that exists keeps every line it had (the block goes at its end, or before a final `exit`,
where it would never run), and `uninstall` removes exactly the block (and the file, when the
block was all it held). The block starts the ingest in the background, its output appended to
`.raytsystem/hooks.log`, and always succeeds: git's command never waits for the ingest and
never fails because of it. A second ingest started meanwhile waits for the writer lock.

Git runs hooks with `sh` unless their first line names another interpreter; a hook written in
another language (Python, Node) is not edited: `hook_not_shell` names it, with the line to
add by hand.
"""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path
from typing import Final

from .errors import WorkspaceError

HOOKS: Final = ("post-commit", "post-merge", "post-checkout")
BEGIN: Final = "# >>> raytsystem ingest >>>"
END: Final = "# <<< raytsystem ingest <<<"
SHEBANG: Final = "#!/bin/sh\n"
LOG: Final = ".raytsystem/hooks.log"
_SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "busybox"})


def hooks_dir(root: Path) -> Path:
    """The folder git runs this repository's hooks from (`core.hooksPath`, a worktree's
    common folder, or `.git/hooks`)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "--git-path", "hooks"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError as exc:
        raise WorkspaceError(
            f"cannot run git: {exc.strerror}", code="not_a_git_repository"
        ) from None
    if done.returncode != 0:
        raise WorkspaceError(
            f"{root} is not in a git repository: {done.stderr.strip()}",
            code="not_a_git_repository",
        )
    path = Path(done.stdout.strip())
    return path if path.is_absolute() else root / path


def command_line(python: str, root: Path) -> str:
    """The line a hook runs: the ingest in the background, never failing."""
    q = shlex.quote
    log = q(str(root / LOG))
    ingest = f"{q(python)} -m raytsystem --workspace {q(str(root))} ingest --json"
    return (
        f"( mkdir -p {q(str(root / '.raytsystem'))} && cd {q(str(root))} && "
        f"{ingest} >>{log} 2>&1 & ) >/dev/null 2>&1 || true"
    )


def block(python: str, root: Path) -> list[str]:
    return [
        f"{BEGIN} (added by `raytsystem hooks install`; `raytsystem hooks uninstall` removes it)",
        command_line(python, root),
        END,
    ]


def _is_shell(first_line: str) -> bool:
    if not first_line.startswith("#!"):
        return True  # git runs it with sh
    words = first_line[2:].split()
    if not words:
        return True
    name = os.path.basename(words[0])
    if name == "env" and len(words) > 1:
        name = os.path.basename(words[1] if words[1] != "-S" or len(words) < 3 else words[2])
    return name in _SHELLS


def _without_block(lines: list[str]) -> tuple[list[str], bool]:
    out: list[str] = []
    inside = found = False
    for line in lines:
        if line.startswith(BEGIN):
            inside = found = True
        elif inside and line.startswith(END):
            inside = False
        elif not inside:
            out.append(line)
    return out, found


def install(root: Path, python: str) -> list[dict[str, str]]:
    """Add the block to each hook; what was done to each (`created`, `appended`,
    `updated`)."""
    folder = hooks_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    ours = block(python, root)
    plan: list[tuple[Path, list[str], str]] = []
    for name in HOOKS:
        path = folder / name
        if not path.exists():
            plan.append((path, [SHEBANG.rstrip("\n"), *ours], "created"))
            continue
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        lines = text.splitlines()
        if lines and not _is_shell(lines[0]):
            raise WorkspaceError(
                f"{path} is not a shell script ({lines[0]}): add this line to it by hand: "
                f"{command_line(python, root)}",
                code="hook_not_shell",
                hook=str(path),
            )
        kept, found = _without_block(lines)
        at = len(kept)
        while at > 0 and (not kept[at - 1].strip() or kept[at - 1].lstrip().startswith("#")):
            at -= 1
        if at > 0 and kept[at - 1].strip().split()[0] == "exit":
            at -= 1  # before a final `exit`, where it runs
        else:
            at = len(kept)
        plan.append((path, [*kept[:at], *ours, *kept[at:]], "updated" if found else "appended"))
    done = []
    for path, lines, action in plan:
        _write(path, "\n".join(lines) + "\n")
        done.append({"hook": str(path), "action": action})
    return done


def uninstall(root: Path) -> list[dict[str, str]]:
    """Remove the block from each hook (`removed`; `deleted` when it was all the file held;
    `absent` when there was none)."""
    folder = hooks_dir(root)
    done = []
    for name in HOOKS:
        path = folder / name
        if not path.exists():
            done.append({"hook": str(path), "action": "absent"})
            continue
        text = path.read_text(encoding="utf-8", errors="surrogateescape")
        kept, found = _without_block(text.splitlines())
        if not found:
            done.append({"hook": str(path), "action": "absent"})
        elif "\n".join(kept).strip() in ("", SHEBANG.strip()):
            path.unlink()
            done.append({"hook": str(path), "action": "deleted"})
        else:
            _write(path, "\n".join(kept) + "\n")
            done.append({"hook": str(path), "action": "removed"})
    return done


def _write(path: Path, text: str) -> None:
    """Write the hook whole (a temp file renamed over it), executable, keeping its mode."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o755
    tmp = path.with_name(f".{path.name}.raytsystem-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8", errors="surrogateescape")
    os.chmod(tmp, mode | 0o111)
    os.replace(tmp, path)
