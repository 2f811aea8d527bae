"""FRESHNESS: whether the workspace's selected files still match the generation an answer
came from (ADR 0039).

The reference is the stat cache (`storage.statcache`): the stat of every file the ingest that
made the current generation looked at, with the revision each became. The check walks the
workspace by discovery's rules and compares stats (the walk: `pipeline.freshness_walk`); it
never reads the ledger's whole source list and never changes an answer.

- A file whose stat matches its entry is as the generation saw it.
- A file the cache does not vouch for (new, its stat moved, or modified less than 2 s before
  that ingest looked at it, which the cache never records) is a suspect: if it is an active
  source of the generation, its bytes are hashed and compared with the revision's BLAKE3
  (so `touch` or a checkout that rewrites the same bytes is not a change); otherwise it is new.
- A source the generation has and the workspace no longer has is removed.
- An answer from an older generation (`--generation`) also differs by every path whose
  revision differs between it and the current generation.

The state is `stale` when anything differs (`changed` counts the paths, `examples` names the
first few), `fresh` when everything was checked and nothing differs, and `unknown` when the
check could not tell: no stat cache for the current generation (deleted, or the generation was
made on another machine that shares the ledger), or the bound ran out.

The bound: the walk stops `BOUND_S` seconds after the check began (it runs beside the
answer), and the verdict (ledger lookups, hashing) `BOUND_S` seconds after it began, so an
answer waits at most twice that for its freshness; at most `HASH_FILES` files and
`HASH_BYTES` bytes are hashed per check. What it did not get to makes the state `unknown`
unless it found a change (then a stat change from a trusted entry counts as a change too). A
one-shot process (the CLI) walks the workspace once per command, beside the query (in a
forked child, `freshness_walk.observe_forked`); a long-lived one (`Tracker`: the MCP and
Universe servers, a program's `Session`) walks once, then follows the OS's change
notifications and looks again only at the paths they name.
"""

from __future__ import annotations

import os
import threading
import time
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, Final

from ..discovery import Selection, StatKey
from ..storage import freshness_reads
from ..storage.generations import GenerationRef
from ..storage.reader import Reader
from ..workspace import RAW_DIR, STATE_DIR, Workspace
from .freshness_walk import BOUND_S, Observation, cache_key, observe
from .query import Answer

HASH_FILES: Final = 256
HASH_BYTES: Final = 64 * 2**20
EXAMPLES: Final = 5
# Past this many paths named by one drain of notifications, a walk is cheaper than looking
# at each (and a burst that large may have overflowed the kernel's queue).
REWALK_AFTER: Final = 1000
NOTIFY_MS: Final = 50  # the notification thread hands paths over, and checks for a stop
NOTIFY_STEP_MS: Final = 5  # after this long without a new notification
START_S: Final = 5.0  # the most a tracker waits for its watcher to start (or stop)


@dataclass(frozen=True)
class Freshness:
    """Whether the workspace still matches generation `number` (the answer's)."""

    state: str  # "fresh" | "stale" | "unknown"
    changed: int
    examples: tuple[str, ...]
    number: int
    reason: str = ""  # why `unknown`, for the text line
    older: bool = False  # the generation is not the current one

    def to_json(self) -> dict[str, Any]:
        return {"state": self.state, "changed": self.changed, "examples": list(self.examples)}

    def line(self) -> str:
        """One line for people."""
        if self.state == "fresh":
            return f"fresh: the workspace's files match generation {self.number}"
        if self.state == "stale":
            shown = ", ".join(self.examples)
            more = ", …" if self.changed > len(self.examples) else ""
            files = "file differs" if self.changed == 1 else "files differ"
            if self.older:
                return (
                    f"STALE: {self.changed} {files} from generation {self.number}, older than "
                    f"the current one ({shown}{more})"
                )
            return (
                f"STALE: {self.changed} {files} from generation {self.number} "
                f"({shown}{more}); run `raytsystem ingest`"
            )
        return f"freshness unknown: {self.reason}" if self.reason else "freshness unknown"


@dataclass(frozen=True)
class FreshAnswer(Answer):
    """An answer with the freshness of the workspace beside it (it never changes the answer)."""

    freshness: Freshness | None = None

    @classmethod
    def of(cls, answer: Answer, freshness: Freshness | None) -> FreshAnswer:
        values = {f.name: getattr(answer, f.name) for f in fields(Answer)}
        return cls(**values, freshness=freshness)

    def to_json(self) -> dict[str, Any]:
        """The query's JSON with `freshness` before `timing`; every other key as it was."""
        out = super().to_json()
        timing = out.pop("timing")
        if self.freshness is not None:
            out["freshness"] = self.freshness.to_json()
        out["timing"] = timing
        return out


def with_freshness(result: dict[str, Any], freshness: Freshness) -> dict[str, Any]:
    """A search's or bundle's JSON with `freshness` (before `timing`, if it has one)."""
    out = {k: v for k, v in result.items() if k != "timing"}
    out["freshness"] = freshness.to_json()
    if "timing" in result:
        out["timing"] = result["timing"]
    return out


# --- judging it against a generation ---------------------------------------------------------

Memo = dict[tuple[str, StatKey, str], bool]  # (path, stat, blob) -> the bytes hash to the blob


def judge(
    obs: Observation,
    reader: Reader,
    answered: GenerationRef,
    current: GenerationRef,
    deadline: float,
    memo: Memo | None = None,
) -> Freshness:
    """The freshness of generation `answered`, given the workspace as `obs` saw it and the
    current generation `current` (read in the same snapshot of the ledger as the answer)."""
    differing: list[str] = []
    if answered.hash != current.hash:
        differing = freshness_reads.paths_differing(reader, answered.number, current.number)
    if obs.cache_generation != current.hash:
        reason = (
            "no stat cache here for the current generation (run `raytsystem ingest` on "
            "this machine)"
        )
        return _verdict(answered, set(differing), unsure=True, reason=reason, older=bool(differing))
    memo = {} if memo is None else memo
    changed = set(obs.removed)
    unsure = not obs.complete
    blobs = freshness_reads.active_blobs(reader, list(obs.suspects), current.number)
    uncached_sources = 0
    unverified: set[str] = set()  # trusted entries whose stat moved, bytes not hashed
    hashed_files = hashed_bytes = 0
    for path in sorted(obs.suspects):
        blob = blobs.get(path)
        entry = obs.entries.get(path)
        if blob is None:
            changed.add(path)  # a new file, or a non-source that changed
            continue
        if entry is None or not entry[3]:
            uncached_sources += 1
        key = obs.keys[path]
        same = memo.get((path, key, blob))
        if same is None and (
            hashed_files < HASH_FILES
            and hashed_bytes + key[0] <= HASH_BYTES
            and time.monotonic() < deadline
        ):
            hashed_files += 1
            hashed_bytes += key[0]
            same = _hashes_to(obs.suspects[path], blob)
            if same is not None:
                memo[(path, key, blob)] = same
        if same is None:
            if entry is not None and entry[3]:
                unverified.add(path)  # its stat moved from what the generation's ingest saw
            else:
                unsure = True
        elif not same:
            changed.add(path)
    if obs.complete:
        present = obs.sources_cached - len(obs.removed) + uncached_sources
        if current.source_count > present:
            # A source the cache never recorded (saved less than 2 s before its ingest) is
            # gone: name them from the ledger.
            changed.update(
                p for p in freshness_reads.active_paths(reader, current.number) if p not in obs.seen
            )
    changed.update(differing)
    if changed:
        changed.update(unverified)  # stale already: a moved stat counts as a change
    elif unverified:
        unsure = True  # nothing found changed, and these could not be told
    reason = "the check ran out of its time or hashing bound" if unsure else ""
    older = answered.hash != current.hash
    return _verdict(answered, changed, unsure=unsure, reason=reason, older=older)


def _verdict(
    answered: GenerationRef, changed: set[str], *, unsure: bool, reason: str, older: bool = False
) -> Freshness:
    examples = tuple(sorted(changed)[:EXAMPLES])
    if changed:
        return Freshness("stale", len(changed), examples, answered.number, "", older)
    if unsure:
        return Freshness("unknown", 0, (), answered.number, reason)
    return Freshness("fresh", 0, (), answered.number)


def _hashes_to(disk: str, blob: str) -> bool | None:
    """Whether the file's bytes hash to `blob` (None: it cannot be read)."""
    import blake3

    try:
        with open(disk, "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    return blake3.blake3(data).hexdigest() == blob


# --- a one-shot check, and a tracker for long-lived processes --------------------------------


class Probe:
    """One check in progress: the walk runs in a thread while the caller answers, and
    `result` judges it against the answer's generation."""

    def __init__(self, observe_: Any, memo: Memo | None, bound: float = BOUND_S) -> None:
        self.deadline = time.monotonic() + bound
        self.bound = bound
        self._memo = memo
        self._obs: Observation | None = None
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        if isinstance(observe_, Observation):
            self._obs = observe_
        else:
            self._thread = threading.Thread(target=self._run, args=(observe_,), daemon=True)
            self._thread.start()

    def _run(self, observe_: Any) -> None:
        try:
            self._obs = observe_(self.deadline)
        except Exception as exc:  # reported as `unknown`: freshness never fails an answer
            self._error = exc

    def result(
        self, reader: Reader, answered: GenerationRef, current: GenerationRef | None = None
    ) -> Freshness:
        from ..storage.generations import head

        if self._thread is not None:
            self._thread.join(max(0.0, self.deadline - time.monotonic()) + 0.05)
        obs = self._obs
        if obs is None or (self._thread is not None and self._thread.is_alive()):
            why = f"the workspace could not be walked ({self._error})" if self._error else ""
            return Freshness(
                "unknown", 0, (), answered.number, why or "the walk ran past its bound"
            )
        try:
            now = current or head(reader) or answered
            # The verdict has a bound of its own: the time the answer took is not its.
            verdict_deadline = time.monotonic() + self.bound
            return judge(obs, reader, answered, now, verdict_deadline, self._memo)
        except Exception as exc:
            # Freshness is said beside an answer and never fails it: a file or a row it
            # could not read makes it `unknown`, with what went wrong.
            return Freshness("unknown", 0, (), answered.number, f"the check failed: {exc}")


class Notifications:
    """The OS's change notifications for the workspace (watchfiles), collected by a thread of
    their own, so that taking them (`drain`) never waits: what has arrived is there."""

    def __init__(self, root: str) -> None:
        self._stop = threading.Event()
        self._ready = threading.Event()
        self._lock = threading.Lock()
        self._paths: set[str] = set()
        self._overflow = False
        self.alive = True
        self._thread = threading.Thread(
            target=self._run, args=(root,), name="raytsystem-notifications", daemon=True
        )
        self._thread.start()
        self._ready.wait(START_S)  # live from here: a walk after this misses no change

    def _run(self, root: str) -> None:
        try:
            import watchfiles

            for changes in watchfiles.watch(
                root,
                watch_filter=None,
                debounce=NOTIFY_MS,
                step=NOTIFY_STEP_MS,
                stop_event=self._stop,
                rust_timeout=NOTIFY_MS,
                yield_on_timeout=True,
                raise_interrupt=False,
                ignore_permission_denied=True,
            ):
                self._ready.set()
                if changes:
                    with self._lock:
                        if len(self._paths) > REWALK_AFTER:
                            self._overflow = True  # a walk will do: stop keeping paths
                        else:
                            self._paths.update(p for _change, p in changes)
        except Exception:
            pass  # no notifications: every check walks
        finally:
            self.alive = False
            self._ready.set()

    def drain(self) -> set[str] | None:
        """The paths named since the last drain; None when only a walk will do (the
        watcher stopped, or too many paths came)."""
        with self._lock:
            paths, overflow = self._paths, self._overflow
            self._paths, self._overflow = set(), False
        return None if overflow or not self.alive else paths

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=START_S)


class Tracker:
    """Freshness for a long-lived process: one walk, then the OS's change notifications
    (`Notifications`), so a check costs what changed, not the size of the workspace. A new
    stat cache (an ingest ran), a folder that moved, or a burst past `REWALK_AFTER` paths
    makes it walk again. Without notifications (the watcher could not start) every check
    walks."""

    def __init__(self, ws: Workspace, bound: float = BOUND_S) -> None:
        self.ws = ws
        self.bound = bound
        self._lock = threading.Lock()
        self._events: Notifications | None = None
        self._obs: Observation | None = None
        self._cache: StatKey | None = None
        self._memo: Memo = {}

    def probe(self) -> Probe:
        deadline = time.monotonic() + self.bound
        with self._lock:
            return Probe(self._observation(deadline), self._memo, self.bound)

    def close(self) -> None:
        with self._lock:
            if self._events is not None:
                self._events.close()
                self._events = None

    def _observation(self, deadline: float) -> Observation:
        if self._events is None:
            self._events = Notifications(str(self.ws.root))
        key = cache_key(self.ws)
        paths = self._events.drain()
        obs = self._obs
        if (
            obs is None
            or paths is None
            or key != self._cache
            or not obs.complete
            or not self._apply(obs, paths)
        ):
            self._cache = key
            obs = self._obs = observe(self.ws, deadline)
            if len(self._memo) > 10 * HASH_FILES:
                self._memo.clear()
        return obs

    def _apply(self, obs: Observation, paths: Iterable[str]) -> bool:
        """Look again at each path; False when only a walk will do."""
        rels = [r for r in map(self._rel, paths) if r is not None]
        if len(rels) > REWALK_AFTER:
            return False
        selection = Selection(self.ws)
        for rel in rels:
            disk = os.path.join(self.ws.root, *rel.split("/"))
            if os.path.isdir(disk):
                return False  # a folder came (or was moved in): its files are unknown
            c = selection.candidate(rel)
            if c is None and rel not in obs.seen and rel not in obs.entries:
                inside = rel + "/"
                if not os.path.lexists(disk) and any(p.startswith(inside) for p in obs.seen):
                    return False  # a folder with files in it went away
                continue  # a file that is not selected (an editor's temporary file, say)
            obs.put(rel, c.key if c else None, c.disk if c else "")
        return True

    def _rel(self, path: str) -> str | None:
        try:
            rel = os.path.relpath(path, self.ws.root).replace(os.sep, "/")
        except ValueError:
            return None
        top = rel.partition("/")[0]
        if (
            rel in (".", "..")
            or rel.startswith("../")
            or top in (STATE_DIR, RAW_DIR)
            or ".git" in rel.split("/")
        ):
            return None
        return unicodedata.normalize("NFC", rel)
