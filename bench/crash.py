"""Crash harness (issue 16): SIGKILL a real `autodoc` process at random points and
check that the store it leaves resumes to the state a clean index reaches.

Each round picks an operation, starts the real CLI on one store (in-process
service, as a user's `autodoc` runs without a daemon) and kills it with SIGKILL
after a random delay:

- index: the folder is first changed (edits, new files, deletes, renames), then `autodoc index kb`
- reindex: `autodoc index --full kb`
- embed: `autodoc index kb` with the bundled MiniLM configured (the CLI embeds what is pending)
- switch: `autodoc workspace configure kb '{"embedding": ...}'`, none ↔ onnx (a model switch re-chunks)
- configure: `autodoc workspace configure kb '{"section_tokens": N}'` (re-chunks)
- schema: `_schema/frontmatter.yaml` is changed, then `autodoc index kb` (facets re-derived)

After every round: the lease is free (flock), `problems()` of bench/store_state.py
is empty (integrity_check, generations, no orphan rows), and the next index (a
Service in this process, `index` without embedding) leaves a store whose dump
equals a clean index of the same folder under the same stored config, and
whose lexical answers to a few queries are identical (order, spans, scores),
the order of equal scores included. The folder holds two identical files, and
the harness's store starts with a history a clean index lacks: one twin was
renamed after the first index, so its chunk ids sort the other way round
(search/ties.py orders such ties by path and ordinal, not ids).

    python -m bench.crash --kills 100 --files 120 --seed 16

tests/test_crash.py runs a few rounds of the same code.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import REPO, git_commit, machine_note, replace_section
from bench.store_state import bm25, cached_vectors, differences, dump, problems

REPORT = REPO / "docs" / "benchmarks" / "reliability.md"
OPS = ("index", "reindex", "embed", "switch", "configure", "schema")
# Kill delays (seconds after the process starts; its imports take ~1 s on the shared
# machine, a full reindex of 120 files ~8 s, a model switch ~15 s): wide enough that
# most kills land inside the operation, some after it ended.
DELAYS = {
    "index": (0.5, 5.0),
    "reindex": (0.5, 9.0),
    "embed": (1.0, 15.0),
    "switch": (0.5, 15.0),
    "configure": (0.5, 9.0),
    "schema": (0.5, 5.0),
}
NONE = {"provider": "none"}
ONNX = {"provider": "onnx"}
SECTIONS = (96, 160, 256)
QUERIES = ("lease recovery", "sqlite write ahead log", "zebra migration", "owner alice", "rollback plan checkpoint")
WORDS = (
    "lease recovery sqlite write ahead log checkpoint zebra migration rollback plan owner alice bob "
    "index chunk token window vector search ranking fusion daemon socket schema facet link backlink "
    "generation cursor change feed embed model tokenizer section heading paragraph"
).split()
# Two identical files: every query ties their chunks (a short text dense in the queries' words)
TWIN = (
    "---\ntitle: Twin\n---\n# Twin\n\nlease recovery sqlite write ahead log zebra migration owner alice "
    "rollback plan checkpoint.\n"
)
TWINS = ("d0/twin-a.md", "d0/twin-b.md", "d0/twin-c.md")  # a, b written; a renamed to c after the first index
SCHEMAS = (
    None,
    "version: 1\ncommon:\n  owner: string\n  priority: integer\n  date: date\n",
    "version: 1\ncommon:\n  owner: {type: enum, values: [alice, bob]}\n  priority: string\n  reviewed: boolean\n",
)


@dataclass
class Tally:
    rounds: int = 0
    kills: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    completed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    corrupt: int = 0  # problems() right after the kill
    stale_lease: int = 0
    after_index: int = 0  # problems() after the next index
    wrong_state: int = 0  # dump differs from a clean index
    wrong_answers: int = 0  # lexical answers differ from a clean index, beyond the order of equal scores
    tie_order: int = 0  # answers differ only where BM25 scores are equal (ties broken unlike a clean index)
    tie_cut: int = 0  # ... and agree with the lexical leg uncut: a tie straddled the leg's LIMIT
    references: int = 0
    cached_vectors_max: int = 0
    examples: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def landed(self) -> int:
        return sum(self.kills.values())

    @property
    def failures(self) -> int:
        return (
            self.corrupt
            + self.stale_lease
            + self.after_index
            + self.wrong_state
            + self.wrong_answers
            + self.tie_order
            + self.tie_cut
        )

    def note(self, what: str) -> None:
        if len(self.examples) < 20:
            self.examples.append(what)


def _note(rng: random.Random, i: int, version: int) -> str:
    owner = rng.choice(["alice", "bob", "carol"])
    prio = rng.choice(["1", "2", "high", "3"])
    date = rng.choice(["2024-03-01", "2025-12-31", "2020-02-30", "soon"])
    paras = []
    for j in range(rng.randint(2, 9)):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(15, 90)))
        link = f" See [[note-{rng.randrange(0, 400):03d}]]." if rng.random() < 0.4 else ""
        paras.append(f"## Part {j}\n\n{words}.{link}\n")
    return (
        f"---\ntitle: Note {i} v{version}\nowner: {owner}\npriority: {prio}\ndate: {date}\n"
        f"tags: [t{i % 5}, {rng.choice(WORDS)}]\n---\n# Note {i}\n\n" + "\n".join(paras)
    )


class Folder:
    """The workspace folder, changed between rounds the way a user's would be."""

    def __init__(self, root: Path, files: int, rng: random.Random):
        self.root, self.rng, self.version, self.next_id = root, rng, 0, files
        for i in range(files):
            self._write(f"d{i % 4}/note-{i:03d}.md", i)
        for rel in TWINS[:2]:
            (root / rel).write_text(TWIN)
        self.schema = 0

    def _write(self, rel: str, i: int) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(_note(self.rng, i, self.version))

    def files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*.md") if "_schema" not in p.parts and "twin" not in p.name)

    def change(self) -> None:
        self.version += 1
        files = self.files()
        for _ in range(self.rng.randint(1, 8)):
            kind = self.rng.choice(("edit", "edit", "add", "delete", "rename"))
            files = self.files()
            if kind == "add" or not files:
                self._write(f"d{self.rng.randrange(5)}/note-{self.next_id:03d}.md", self.next_id)
                self.next_id += 1
                continue
            victim = self.rng.choice(files)
            if kind == "edit":
                victim.write_text(_note(self.rng, int(victim.stem.split("-")[1]), self.version))
            elif kind == "delete":
                victim.unlink()
            else:
                dest = self.root / f"d{self.rng.randrange(5)}" / f"moved-{self.version}-{victim.name}"
                dest.parent.mkdir(exist_ok=True)
                victim.rename(dest)

    def change_schema(self) -> None:
        self.schema = (self.schema + 1) % len(SCHEMAS)
        path = self.root / "_schema" / "frontmatter.yaml"
        if SCHEMAS[self.schema] is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_text(SCHEMAS[self.schema])

    def digest(self) -> str:
        h = hashlib.sha256()
        for p in sorted(self.root.rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(self.root)).encode() + b"\0" + p.read_bytes() + b"\0")
        return h.hexdigest()


def stored_config(store: Path) -> dict[str, Any]:
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30)
    try:
        return json.loads(db.execute("SELECT config FROM workspaces WHERE name='kb'").fetchone()[0])
    finally:
        db.close()


def lease_free(store: Path) -> bool:
    fd = os.open(str(store) + ".lease", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@contextmanager
def uncut_lexical_leg():
    """The lexical leg holding every match (a diagnostic): FTS5 cuts its ranking at the leg's
    LIMIT with `ORDER BY s, rowid` (store/matches.py), so a tie straddling the cut admits
    chunks by id. Answers that differ cut and agree uncut differ by that edge alone."""
    from autodoc.search import engine

    saved = engine.LEXICAL_TOP
    engine.LEXICAL_TOP = 10**6
    try:
        yield
    finally:
        engine.LEXICAL_TOP = saved


def answers(service: Any) -> list[Any]:
    """The lexical answers to QUERIES, then the same with the leg uncut (uncut_lexical_leg)."""
    cut = _answers(service)
    with uncut_lexical_leg():
        return [cut, _answers(service)]


def _answers(service: Any) -> list[Any]:
    from autodoc.connect import invoke

    out = []
    for q in QUERIES:
        got = invoke(
            service, "search.query", {"workspace": "kb", "query": q, "opts": {"limit": 20, "stages": ["lexical"]}}
        )
        out.append([(h["path"], h["line_start"], h["line_end"], h["score"], h.get("breadcrumb")) for h in got["hits"]])
    return out


def index_and_answer(store: Path, *, add: tuple[Path, dict] | None = None) -> list[Any]:
    from autodoc.config import Settings
    from autodoc.service import Service

    s = Service(Settings.from_env(store=store))
    try:
        if add is not None:
            s.workspace_add("kb", str(add[0]), add[1])
        s.index("kb")
        return answers(s)
    finally:
        s.close()


class Harness:
    def __init__(self, base: Path, files: int, seed: int, ops: tuple[str, ...] = OPS, verbose: bool = True):
        self.base, self.ops, self.verbose = base, ops, verbose
        self.rng = random.Random(seed)
        self.folder = Folder(base / "kb", files, random.Random(seed + 1))
        self.store = base / "store" / "autodoc.db"
        self.refs: dict[tuple[str, str], tuple[dict, list, list]] = {}
        self.tally = Tally()
        index_and_answer(self.store, add=(self.folder.root, {"embedding": NONE, "section_tokens": SECTIONS[1]}))
        (self.folder.root / TWINS[0]).rename(self.folder.root / TWINS[2])  # c keeps a's rows: ids below b's
        index_and_answer(self.store)

    def reference(self, config: dict[str, Any]) -> tuple[dict, list, list]:
        key = (self.folder.digest(), json.dumps(config, sort_keys=True))
        if key not in self.refs:
            ref = Path(tempfile.mkdtemp(prefix="ref-", dir=self.base)) / "autodoc.db"
            got = index_and_answer(ref, add=(self.folder.root, config))
            self.refs[key] = (dump(ref, "kb"), got, [bm25(ref, "kb", q) for q in QUERIES])
            shutil.rmtree(ref.parent)
            self.tally.references += 1
        return self.refs[key]

    def argv(self, op: str) -> list[str]:
        base = [sys.executable, "-m", "autodoc.cli", "--store", str(self.store)]
        cfg = stored_config(self.store)
        if op == "index":
            self.folder.change()
            return base + ["index", "kb"]
        if op == "reindex":
            return base + ["index", "--full", "kb"]
        if op == "embed":
            if cfg.get("embedding", {}).get("provider") != "onnx":
                subprocess.run(
                    base + ["workspace", "configure", "kb", json.dumps({"embedding": ONNX})],
                    check=True,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            return base + ["index", "kb"]
        if op == "switch":
            to = NONE if cfg.get("embedding", {}).get("provider") == "onnx" else ONNX
            return base + ["workspace", "configure", "kb", json.dumps({"embedding": to})]
        if op == "configure":
            n = self.rng.choice([s for s in SECTIONS if s != cfg.get("section_tokens")])
            return base + ["workspace", "configure", "kb", json.dumps({"section_tokens": n})]
        if op == "schema":
            self.folder.change_schema()
            return base + ["index", "kb"]
        raise ValueError(op)

    def round(self) -> None:
        t = self.tally
        op = self.rng.choice(self.ops)
        argv = self.argv(op)
        delay = self.rng.uniform(*DELAYS[op])
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            env={**os.environ, "AUTODOC_LOG": "WARNING"},
        )
        try:
            proc.wait(timeout=delay)
            t.completed[op] += 1
            killed = False
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            if proc.returncode != 0:
                t.note(f"round {t.rounds} {op}: exit {proc.returncode} without a kill: {err[-300:]}")
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            t.kills[op] += 1
            killed = True
        if proc.stderr:
            proc.stderr.close()
        t.rounds += 1
        what = f"round {t.rounds} {op} ({'killed' if killed else 'completed'} at {delay:.2f} s)"
        if not lease_free(self.store):
            t.stale_lease += 1
            t.note(f"{what}: the lease is still held")
        if bad := problems(self.store):
            t.corrupt += 1
            t.note(f"{what}: after the kill: {bad}")
        got, got_uncut = index_and_answer(self.store)
        if bad := problems(self.store):
            t.after_index += 1
            t.note(f"{what}: after the next index: {bad}")
        config = stored_config(self.store)
        want_dump, (want_answers, want_uncut), want_bm25 = self.reference(config)
        if diff := differences(dump(self.store, "kb"), want_dump):
            t.wrong_state += 1
            t.note(f"{what}: store differs from a clean index ({config}): {diff}")
        if got != want_answers:
            first = next(i for i, (a, b) in enumerate(zip(got, want_answers)) if a != b)
            at = next(i for i, (a, b) in enumerate(zip(got[first], want_answers[first])) if a != b)
            if [bm25(self.store, "kb", q) for q in QUERIES] == want_bm25:
                # every chunk scores exactly as in the clean index: only the order among equal
                # scores differs (a failure: ties follow content, not the store's history)
                cut = got_uncut == want_uncut
                if cut:
                    t.tie_cut += 1
                else:
                    t.tie_order += 1
                if (t.tie_cut if cut else t.tie_order) <= 3:
                    t.note(
                        f"{what}: tie order only{' (agrees with the leg uncut)' if cut else ''}, e.g. "
                        f"{QUERIES[first]!r} at rank {at + 1}: {got[first][at]} vs {want_answers[first][at]}"
                    )
            else:
                t.wrong_answers += 1
                t.note(
                    f"{what}: answers to {QUERIES[first]!r} differ at rank {at + 1}: {got[first][at]} vs "
                    f"{want_answers[first][at]}"
                )
        t.cached_vectors_max = max(t.cached_vectors_max, cached_vectors(self.store))
        if self.verbose:
            print(f"{what}: {t.landed} kills, {t.failures} failures", file=sys.stderr, flush=True)


def run(
    kills: int, files: int, seed: int, ops: tuple[str, ...] = OPS, verbose: bool = True, max_rounds: int | None = None
) -> Tally:
    base = Path(tempfile.mkdtemp(prefix="ad-crash-"))
    started = time.monotonic()
    try:
        h = Harness(base, files, seed, ops, verbose)
        while h.tally.landed < kills and (max_rounds is None or h.tally.rounds < max_rounds):
            h.round()
        h.tally.seconds = time.monotonic() - started
        return h.tally
    finally:
        shutil.rmtree(base, ignore_errors=True)


def report(t: Tally, args: argparse.Namespace) -> str:
    by_op = ", ".join(f"{op} {t.kills[op]}" for op in OPS)
    done = ", ".join(f"{op} {t.completed[op]}" for op in OPS if t.completed[op])
    m = machine_note()
    lines = [
        "## Crash harness",
        "",
        f"`python -m bench.crash --kills {args.kills} --files {args.files} --seed {args.seed}` (bench/crash.py): "
        "SIGKILL of a real `autodoc` CLI process (in-process service on one store) at a random delay into "
        "index (after edits, adds, deletes, renames), full reindex, embed (bundled MiniLM), model switch "
        "(none ↔ onnx), configure (section size) and a frontmatter-schema change. After each: the lease, "
        "`PRAGMA integrity_check` and the row invariants of bench/store_state.py; then the next index, and "
        "its store compared table by table (documents, chunks with spans and token counts, facets, links, "
        "skips) and by the lexical answers to 5 queries (paths, spans, scores, order, the order of equal "
        "scores included) with a clean index of the same folder under the same config. The folder holds two "
        "identical files, one renamed after the store's first index, so ties in the store and in a clean "
        "index are between chunks whose ids sort the other way round. tests/test_crash.py runs a short version.",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| rounds | {t.rounds} |",
        f"| SIGKILLs inside an operation | {t.landed} ({by_op}) |",
        f"| operations that ended before their kill (checked the same way) | {sum(t.completed.values())} ({done}) |",
        f"| corrupt stores or broken invariants after a kill | {t.corrupt} |",
        f"| stale leases | {t.stale_lease} |",
        f"| broken invariants after the next index | {t.after_index} |",
        f"| stores differing from a clean index (counts, chunks, facets, links) | {t.wrong_state} |",
        f"| answers differing from a clean index (a chunk's BM25 score or the hit set) | {t.wrong_answers} |",
        f"| answers differing only in the order of equal scores, the lexical leg cut or uncut (the store "
        f"starts with a renamed twin) | {t.tie_order} |",
        f"| answers differing only in the order of equal scores and agreeing once the lexical leg holds every "
        f"match (a tie straddling the leg's LIMIT: store/matches.py) | {t.tie_cut} |",
        f"| clean reference indexes built | {t.references} |",
        f"| most cached vectors of texts no chunk has (kept on purpose) | {t.cached_vectors_max} |",
        f"| duration | {t.seconds:.0f} s |",
        "",
        f"Run on {time.strftime('%Y-%m-%d')} at {git_commit()} with Python {m['python']}, {m['nproc']} cores "
        f"(load {m['load'][0]}), shared.",
    ]
    if t.examples:
        lines += ["", "Problems found:", ""] + [f"- {e}" for e in t.examples]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--files", type=int, default=120)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--report", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    t = run(args.kills, args.files, args.seed)
    replace_section(args.report, "bench.crash", report(t, args))
    print(f"{t.rounds} rounds, {t.landed} kills, {t.failures} failures; report: {args.report}")
    return 0 if t.failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
