"""Generative file tests of issue 36: hostile files (b) and file operations against index runs (c).

(b) `files_worlds()`: a workspace holding three ordinary notes beside files of
every kind the product reads — Markdown notes with generated frontmatter
values (unicode digits, numbers past int()'s 4,300 digits and past a float's
range, lone surrogates, deep nesting, odd YAML tags, dates real and not, long
strings), `.gitignore` files, `_schema/frontmatter.yaml`, a session
transcript — each as a generated kind: a regular file, a FIFO, a socket, a
symlink to /dev/zero or /dev/urandom, a symlink loop, a dangling link, a
folder, an unreadable file, a sparse 2 GiB file, a file growing while it is
read, invalid UTF-8. `check_files_world` adds it to a real daemon, indexes it
(workspace.index), saves a note for the live index beside the hostile ones,
imports the transcript (sessioncli's reader, then session.append) and writes
to a second workspace; it lists what broke: an ordinary note not indexed or
not readable, a -32603, a call that got no answer in time, a daemon gone.

(c) `ops_worlds()`: a sequence of file operations (create, edit, a same-size
rewrite that keeps the mtime, rename, delete, mkdir, rmdir, moves in and out
of the root, of files and of folders) interleaved with index runs — a whole
one (Service.index, what workspace.index runs) and a live one
(Service.index_paths with the paths the operations touched since, what the
watcher hands over). `check_ops_world` runs it on a real store and then
compares the store with the disk: the documents are exactly the Markdown
files under the root, each with the sha256 and size of its bytes, and the
store's dump (documents with content hashes and line counts, chunks, facets,
links with their resolved targets) equals a clean index of the same folder;
after the last live run and again after one more whole run.

tests/integration/test_files_property.py and test_ops_property.py run both at
a CI budget; `python -m bench.reliability generative` runs them long and
writes docs/benchmarks/reliability.md.

Runs on: the caller's thread, plus one thread per growing file while it grows.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

NO_MODEL = {"embedding": {"provider": "none"}}
INTERNAL_ERROR = -32603
# Small, so an oversized note is cheap to make; the limit logic is the same at the default.
MAX_FILE_BYTES = 64 * 1024
CALL_DEADLINE = 60.0  # a write stuck behind a blocked reader would never answer
LIVE_DEADLINE = 30.0

# ==== (b) hostile files ===========================================================================

# The ordinary notes every world holds, each with a word found nowhere else.
GOOD = {
    "a.md": "# Alpha\n\nThe quillwort grows here. See [[b]] and [c](good/c.md).\n",
    "good/b.md": "---\ntitle: Bravo\ntags: [plants]\n---\n# Bravo\n\nThe bladderwrack floats.\n",
    "good/c.md": "# Charlie\n\nThe cordgrass holds the dune. Back to [alpha](../a.md).\n",
}
WORDS = {"a.md": "quillwort", "good/b.md": "bladderwrack", "good/c.md": "cordgrass"}
LIVE_NOTE = ("good/live.md", "marramgrass")

KINDS = (
    "regular",
    "invalid_utf8",
    "growing",
    "fifo",
    "socket",
    "dev_zero",
    "dev_urandom",
    "loop",
    "dangling",
    "folder",
    "unreadable",
    "sparse_huge",
)

_ODD_TAGS = [
    "!!int twelve",
    "!!float x",
    "!!binary '@@@'",
    "!!timestamp 2020-13-45",
    "!ruby/object:Foo {a: 1}",
    "!!python/object/apply:os.system ['true']",
    "!!python/name:os.system",
    "!!set {a, b}",
    "!!omap [a: 1, b: 2]",
    "!!pairs [a: 1, a: 2]",
    "!!null nope",
    "!!bool maybe",
    "!local 5",
    "!<tag:yaml.org,2002:int> 7",
    "!<!> x",
    "!!str",
    "!!map {}",
    "!!seq []",
    "!!merge x",
]
_SPECIAL = [
    '"²"',
    '"٣"',
    '"¹²³"',
    "٣٤",
    "²",
    "½",
    '"\\ud800"',
    '"x\\udfffy"',
    '["\\udc00", a]',
    "2020-02-30",
    "2020-01-45",
    "0000-00-00",
    "9999-12-31T23:59:60Z",
    "2024-12-04T25:61:00+99:00",
    "1e999",
    "-1e999",
    "1e-999",
    ".nan",
    "-.inf",
    "0x1F",
    "0o17",
    "0b101",
    "1_000",
    "+12",
    "~",
    "null",
    "yes",
    "''",
    '""',
    "&a [1, *a]",
    "*nope",
    "? x",
    "|-\n  multi\n  line",
    ">\n  folded\n  text",
    "'it''s'",
    '"\\x00"',
    '"\\a\\b\\e\\0"',
    "- x",
    "[",
    "{a: [}",
    "'",
    "\t",
    "a: b: c",
    "0001",
    "ADR-0001",
    "[[wiki]]",
    "../../../etc/passwd",
]
FIELDS = [
    "adr",
    "title",
    "tags",
    "status",
    "date",
    "supersedes",
    "superseded_by",
    "aliases",
    "rank",
    "id",
    "links",
    "description",
    "created",
    "updated",
]


def _nested(n: int, kind: str) -> str:
    return "[" * n + "1" + "]" * n if kind == "flow" else "{a: " * n + "1" + "}" * n


def fm_values() -> st.SearchStrategy[str]:
    """One frontmatter value as YAML source text."""
    digits = st.text(st.characters(categories=("Nd", "No")), min_size=1, max_size=12)
    return st.one_of(
        st.sampled_from(_SPECIAL + _ODD_TAGS),
        digits.flatmap(lambda s: st.sampled_from([s, json.dumps(s, ensure_ascii=False), f"[{s}, {s}]"])),
        st.builds(lambda n, sign: sign + "7" * n, st.integers(15, 6000), st.sampled_from(["", "-", "+"])),
        st.builds(lambda n: "9" * n + ".5e" + "9" * 3, st.integers(300, 400)),
        st.dates().map(str),
        st.datetimes().map(lambda d: d.isoformat()),
        st.builds(_nested, st.integers(1, 400), st.sampled_from(["flow", "map"])),
        # any text, lone surrogates included (JSON's \\udXXX escapes are YAML's too)
        st.text(st.characters(codec=None), max_size=40).map(json.dumps),
        st.builds(lambda s, n: json.dumps(s * n), st.text(min_size=1, max_size=8), st.integers(1000, 20_000)),
        st.lists(st.text(max_size=10).map(json.dumps), max_size=5).map(lambda xs: "[" + ", ".join(xs) + "]"),
    )


def frontmatter_texts() -> st.SearchStrategy[str]:
    keys = st.one_of(
        st.sampled_from(FIELDS), st.text(st.characters(codec=None), min_size=1, max_size=12).map(json.dumps)
    )
    pairs = st.lists(st.tuples(keys, fm_values()), max_size=6)
    return pairs.map(lambda kv: "---\n" + "".join(f"{k}: {v}\n" for k, v in kv) + "---\n")


def markdown_texts() -> st.SearchStrategy[str]:
    body = st.one_of(
        st.text(st.characters(codec=None), max_size=200),
        st.sampled_from(["[[a]]", "[x](../a.md)", "[y](good/c.md#charlie)", "#tag", "[[²]]", "ADR-٣"]),
    )
    return st.builds(
        lambda fm, title, parts: fm + f"# {title}\n\n" + "\n\n".join(parts) + "\n",
        st.one_of(st.just(""), frontmatter_texts()),
        st.text(max_size=30).map(lambda s: s.replace("\n", " ")),
        st.lists(body, max_size=4),
    )


_GITIGNORE_LINES = [
    "*",
    "!*.md",
    "**/",
    "**",
    "\\",
    "[",
    "[!]",
    "[z-a]",
    "a/**/b",
    "/",
    "!",
    "#",
    " ",
    "*.md\\",
    "../good/",
    "/../a.md",
    "!/../../",
    "n0.md",
    "x" * 5000,
]


def gitignore_texts() -> st.SearchStrategy[str]:
    line = st.one_of(st.sampled_from(_GITIGNORE_LINES), st.text(st.characters(codec=None), max_size=30))
    return st.lists(line, max_size=12).map(lambda xs: "\n".join(xs) + "\n")


_SCHEMA_SPECS = [
    "integer",
    "number",
    "date",
    "string",
    "boolean",
    "list",
    "{type: integer, link: true}",
    "{type: enum, values: [a, b]}",
    "{type: enum, values: []}",
    "{type: nope}",
    "{required: true}",
    "{type: integer, minimum: 1e999}",
    "[]",
    "null",
]


def schema_texts() -> st.SearchStrategy[str]:
    spec = st.one_of(st.sampled_from(_SCHEMA_SPECS), fm_values())
    entry = st.tuples(st.one_of(st.sampled_from(FIELDS), st.text(max_size=8).map(json.dumps)), spec)
    head = st.sampled_from(["version: 1\n", "version: 2\n", "version: ²\n", "", "version: " + "9" * 5000 + "\n"])
    well_formed = st.builds(
        lambda h, es: h + "common:\n" + "".join(f"  {k}: {v}\n" for k, v in es), head, st.lists(entry, max_size=6)
    )
    return st.one_of(well_formed, frontmatter_texts().map(lambda t: t.strip("-\n") + "\n"), fm_values())


def transcript_texts() -> st.SearchStrategy[str]:
    text = st.one_of(st.text(st.characters(codec=None), max_size=60), fm_values())
    value: st.SearchStrategy[Any] = st.one_of(
        text,
        st.integers(-(10**30), 10**30),
        st.floats(),
        st.none(),
        st.builds(lambda n: [[[]]] * n, st.integers(0, 5)),
    )
    event = st.one_of(
        st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "tool", "system", "x"]), "content": text}),
        st.fixed_dictionaries(
            {
                "type": st.sampled_from(["user", "assistant", "summary"]),
                "message": st.fixed_dictionaries({"role": st.just("user"), "content": value}),
            }
        ),
        st.fixed_dictionaries(
            {"id": value, "kind": st.sampled_from(["message", "tool.call", "nope"]), "text": value, "time": value}
        ),
        st.dictionaries(st.text(max_size=8), value, max_size=4),
    )
    line = st.one_of(
        st.builds(lambda e, ascii_: json.dumps(e, ensure_ascii=ascii_), event, st.booleans()),
        st.sampled_from(["{", "[]", "1e999", "null", "", '{"id": 1e999}', "\x00"]),
    )
    return st.lists(line, max_size=8).map("\n".join)


@dataclass(frozen=True)
class Slot:
    """One file of a world: where (root-relative; the transcript lives beside the root), what kind, what bytes."""

    relpath: str
    kind: str
    data: bytes


@dataclass(frozen=True)
class FilesWorld:
    slots: tuple[Slot, ...]

    def describe(self) -> str:
        return ", ".join(f"{s.relpath}:{s.kind}({len(s.data)} B)" for s in self.slots)

    def __repr__(self) -> str:  # hypothesis shows a failing world: its shape, and the start of each file
        return "FilesWorld(" + ", ".join(f"{s.relpath}:{s.kind}:{s.data[:80]!r}" for s in self.slots) + ")"


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate stays what it is: invalid UTF-8


@st.composite
def _slot(draw: Any, relpath: str, texts: st.SearchStrategy[str], kinds: tuple[str, ...] = KINDS) -> Slot:
    kind = draw(st.sampled_from(kinds))
    data = _encode(draw(texts))
    if kind == "invalid_utf8":
        at = draw(st.integers(0, len(data)))
        data = (
            data[:at]
            + draw(st.sampled_from([b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xfe\xff", b"\xe2\x82"]))
            + data[at:]
        )
    return Slot(relpath, kind, data)


@st.composite
def files_worlds(draw: Any) -> FilesWorld:
    """A world's hostile files (the ordinary notes are always GOOD)."""
    notes = [draw(_slot(f"hostile/n{i}.md", markdown_texts())) for i in range(draw(st.integers(1, 3)))]
    others = [
        draw(_slot("hostile/.gitignore", gitignore_texts())),
        # the root's .gitignore may be any kind but a regular file of generated patterns, which could
        # rightly ignore the ordinary notes
        draw(_slot(".gitignore", st.just("hostile/ignored.md\n"))),
        draw(_slot("_schema/frontmatter.yaml", schema_texts())),
        draw(_slot("../transcript.jsonl", transcript_texts())),
    ]
    return FilesWorld(tuple(notes + others))


class Grower:
    """Appends to a file until stopped (at most 8 MiB): a log, a download, a file being saved."""

    def __init__(self, path: Path, data: bytes):
        self.path, self.data = path, data or b"x"
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._run, name=f"grow-{path.name}", daemon=True)

    def _run(self) -> None:
        written = 0
        with open(self.path, "ab") as fh:
            while not self.stopped.is_set() and written < 8 << 20:
                fh.write(self.data * max(1, 4096 // len(self.data)))
                fh.flush()
                written += 4096
                time.sleep(0.002)

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join()


@dataclass
class Placed:
    """What writing a world left running or locked, undone by `undo`."""

    growers: list[Grower] = field(default_factory=list)
    sockets: list[socket.socket] = field(default_factory=list)
    locked: list[Path] = field(default_factory=list)

    def undo(self) -> None:
        for g in self.growers:
            g.stop()
        for s in self.sockets:
            s.close()
        for p in self.locked:
            if p.exists():
                os.chmod(p, 0o600)


def place(path: Path, slot: Slot, placed: Placed) -> None:
    """Make `path` the slot's kind of file holding its bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    kind = slot.kind
    if kind == "unreadable" and os.geteuid() == 0:
        kind = "regular"  # root reads a chmod 000 file anyway
    if kind in ("regular", "invalid_utf8", "growing", "unreadable", "sparse_huge"):
        path.write_bytes(slot.data)
        if kind == "growing":
            g = Grower(path, slot.data)
            placed.growers.append(g)
            g.thread.start()
        elif kind == "unreadable":
            os.chmod(path, 0)
            placed.locked.append(path)
        elif kind == "sparse_huge":
            os.truncate(path, 2 << 30)  # 2 GiB of holes: costs no disk, reads as zeros
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind(str(path))
        placed.sockets.append(s)
    elif kind in ("dev_zero", "dev_urandom"):
        path.symlink_to("/dev/zero" if kind == "dev_zero" else "/dev/urandom")
    elif kind == "loop":
        path.symlink_to(path.name)
    elif kind == "dangling":
        path.symlink_to("no-such-file")
    elif kind == "folder":
        path.mkdir()
        (path / "inside.md").write_bytes(slot.data)
    else:
        raise ValueError(kind)


def write_world(root: Path, world: FilesWorld) -> Placed:
    root.mkdir(parents=True)
    for rel, text in GOOD.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    placed = Placed()
    try:
        for slot in world.slots:
            place(root / slot.relpath, slot, placed)
    except BaseException:
        placed.undo()
        raise
    return placed


class Answer:
    """One call's outcome: a result, an error answer, or no answer (timeout, connection lost)."""

    def __init__(self, result: Any = None, error: dict | None = None, failure: str | None = None):
        self.result, self.error, self.failure = result, error, failure

    @property
    def ok(self) -> bool:
        return self.error is None and self.failure is None

    def __repr__(self) -> str:
        return f"Answer(result={str(self.result)[:200]}, error={self.error}, failure={self.failure})"


def call(sock: Path, method: str, params: Any, timeout: float = CALL_DEADLINE) -> Answer:
    """One request on a fresh connection to the daemon's socket, newline-framed, with a deadline."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(sock))
            s.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).encode() + b"\n")
            buf = b""
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                chunk = s.recv(1 << 20)
                if not chunk:
                    return Answer(failure=f"{method}: the daemon closed the connection unanswered")
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    msg = json.loads(line)
                    if msg.get("id") == 1:
                        return Answer(msg.get("result"), msg.get("error"))
            return Answer(failure=f"{method}: no answer in {timeout:.0f} s")
    except TimeoutError:
        return Answer(failure=f"{method}: no answer in {timeout:.0f} s")
    except OSError as e:
        return Answer(failure=f"{method}: {e}")


def _transcript(path: Path) -> tuple[Any, str | None]:
    """sessioncli's reader on the file, in a thread with a deadline: (its transcript or None, a problem)."""
    from autodoc.sessioncli import SessionUsage, _read_transcript

    out: dict[str, Any] = {}

    def read() -> None:
        try:
            out["t"] = _read_transcript(path, [])
        except SessionUsage as e:
            out["usage"] = str(e)
        except BaseException as e:  # anything else is what the CLI would die of
            out["crash"] = f"{type(e).__name__}: {e}"

    t = threading.Thread(target=read, daemon=True)
    t.start()
    t.join(CALL_DEADLINE)
    if t.is_alive():
        return None, "reading the transcript did not end"
    if "crash" in out:
        return None, f"reading the transcript raised {out['crash'][:300]}"
    return out.get("t"), None


def check_files_world(sock: Path, base: Path, n: int, world: FilesWorld, control: str) -> list[str]:
    """Add, index and live-edit one world on the daemon at `sock`; what broke (empty: nothing).
    `control` is a second workspace that must take a write afterwards."""
    problems: list[str] = []
    root = base / f"w{n}" / "kb"
    name = f"w{n}"
    placed = write_world(root, world)

    def need(a: Answer, what: str) -> bool:
        if a.failure:
            problems.append(f"{what}: {a.failure}")
        elif a.error:
            problems.append(f"{what}: error {a.error}")
        return a.ok

    def no_internal(a: Answer, what: str) -> None:
        if a.failure or (a.error and a.error.get("code") == INTERNAL_ERROR):
            problems.append(f"{what}: {a.failure or a.error}")

    try:
        cfg = {**NO_MODEL, "max_file_bytes": MAX_FILE_BYTES}
        if not need(call(sock, "workspace.add", {"name": name, "root": str(root), "config": cfg}), "workspace.add"):
            return problems
        got = call(sock, "workspace.index", [name])
        if need(got, "workspace.index"):
            skipped = {s["path"]: s["reason"] for s in got.result["skipped"]}
            for rel in GOOD:
                if rel in skipped:
                    problems.append(f"ordinary note {rel} skipped: {skipped[rel]}")
        for rel, word in WORDS.items():
            read = call(sock, "document.read", [name, rel])
            if need(read, f"document.read {rel}") and word not in read.result["text"]:
                problems.append(f"document.read {rel}: its text lacks {word!r}")
        found = call(sock, "search.query", [name, WORDS["a.md"], {"limit": 5}])
        if need(found, "search.query") and "a.md" not in [h["path"] for h in found.result["hits"]]:
            problems.append(f"search.query {WORDS['a.md']!r} did not find a.md: {found.result['hits'][:3]}")
        # the live index: an ordinary note saved with the hostile notes touched again, one batch
        rel, word = LIVE_NOTE
        (root / rel).write_text(f"# Live\n\nThe {word} was saved while the daemon ran.\n")
        for slot in world.slots:
            p = root / slot.relpath
            if slot.relpath.endswith(".md") and slot.kind in ("regular", "invalid_utf8") and p.is_file():
                with open(p, "ab") as fh:
                    fh.write(slot.data[:100])
        deadline = time.monotonic() + LIVE_DEADLINE
        while True:
            read = call(sock, "document.read", [name, rel])
            if read.ok and word in read.result["text"]:
                break
            no_internal(read, "document.read of the live note")
            if read.failure or time.monotonic() > deadline:
                problems.append(f"the live index did not take {rel} in {LIVE_DEADLINE:.0f} s: {read}")
                break
            time.sleep(0.1)
        # the transcript, as `autodoc session import` reads and sends it
        (tslot,) = [s for s in world.slots if s.relpath.endswith(".jsonl")]
        transcript, trouble = _transcript(root / tslot.relpath)
        if trouble:
            problems.append(trouble)
        if transcript is not None and transcript.events:
            from autodoc.sessioncli import _batches

            for batch in _batches(transcript.events):
                no_internal(
                    call(sock, "session.append", {"workspace": name, "session_id": f"t{n}", "events": batch}),
                    "session.append of the transcript",
                )
        # and the daemon still takes a write elsewhere
        event = {"id": f"e{n}", "kind": "message", "text": f"world {n} done", "time": "2026-01-01T00:00:00Z"}
        need(
            call(sock, "session.append", {"workspace": control, "session_id": "ctl", "events": [event]}),
            "a write to another workspace",
        )
    finally:
        placed.undo()
        no_internal(call(sock, "workspace.remove", [name]), "workspace.remove")
        shutil.rmtree(root.parent, ignore_errors=True)
    return problems


# ==== (c) file operations against index runs ======================================================

NAMES = ("a", "b", "c", "d")
DIRS = ("", "x/", "x/y/", "z/")


@dataclass(frozen=True)
class Op:
    """One step: a file operation, or an index run ("index": whole, "live": the touched paths)."""

    kind: str
    path: str = ""
    to: str = ""
    text: str = ""

    def __str__(self) -> str:
        return " ".join(
            x for x in (self.kind, self.path, self.to and f"-> {self.to}", self.text and repr(self.text[:40])) if x
        )


def note_texts() -> st.SearchStrategy[str]:
    """Small notes that link to each other (the links' targets change as files come and go)."""
    link = st.builds(
        lambda n, d, wiki: f"[[{n}]]" if wiki else f"[{n}]({d}{n}.md)",
        st.sampled_from(NAMES),
        st.sampled_from(DIRS),
        st.booleans(),
    )
    words = st.lists(
        st.sampled_from(["lease", "wal", "ranking", "index", "tide", "heron", "dune", "kelp"]), min_size=1, max_size=6
    )
    return st.builds(
        lambda title, ws, ls, fm: (
            (f"---\ntags: [{ws[0]}]\n---\n" if fm else "") + f"# {title}\n\n{' '.join(ws)} {' '.join(ls)}\n"
        ),
        st.sampled_from(["One", "Two", "Three"]),
        words,
        st.lists(link, max_size=3),
        st.booleans(),
    )


def ops() -> st.SearchStrategy[Op]:
    file = st.builds(lambda d, n: f"{d}{n}.md", st.sampled_from(DIRS), st.sampled_from(NAMES))
    folder = st.sampled_from([d.rstrip("/") for d in DIRS if d])
    return st.one_of(
        st.builds(lambda p, t: Op("create", p, text=t), file, note_texts()),
        st.builds(lambda p, t: Op("edit", p, text=t), file, note_texts()),
        st.builds(lambda p: Op("same_size", p), file),
        st.builds(lambda p, q: Op("rename", p, q), file, file),
        st.builds(lambda p, q: Op("rename_dir", p, q), folder, folder),
        st.builds(lambda p: Op("delete", p), file),
        st.builds(lambda p: Op("mkdir", p), folder),
        st.builds(lambda p: Op("rmdir", p), folder),
        st.builds(lambda p: Op("move_out", p), st.one_of(file, folder)),
        st.builds(lambda p: Op("move_in", p), st.one_of(file, folder)),
        st.sampled_from([Op("index"), Op("live"), Op("live")]),
    )


def op_lists(max_size: int = 25) -> st.SearchStrategy[list[Op]]:
    return st.lists(ops(), min_size=1, max_size=max_size)


def _files_under(p: Path, root: Path) -> list[str]:
    if p.is_file():
        return [str(p.relative_to(root))]
    if p.is_dir():
        return [str(f.relative_to(root)) for f in p.rglob("*.md")]
    return []


def _same_size_rewrite(p: Path) -> None:
    """New bytes of the same length under the old mtime (`cp -p`, `rsync -t`, `touch -r`)."""
    st_ = p.stat()
    data = p.read_bytes()
    if not data:
        return
    i = data.find(b" ") if b" " in data else len(data) - 1
    new = data[:i] + (b"#" if data[i : i + 1] != b"#" else b"!") + data[i + 1 :]
    p.write_bytes(new)
    os.utime(p, ns=(st_.st_atime_ns, st_.st_mtime_ns))


def apply(op: Op, root: Path, outside: Path) -> list[str]:
    """Do a file operation; the root-relative paths it touched (what a watcher would report)."""
    src = root / op.path
    if op.kind in ("create", "edit"):
        if op.kind == "edit" and not src.is_file():
            return []
        src.parent.mkdir(parents=True, exist_ok=True)
        src.write_text(op.text)
        return [op.path]
    if op.kind == "same_size":
        if not src.is_file():
            return []
        _same_size_rewrite(src)
        return [op.path]
    if op.kind == "delete":
        if not src.is_file():
            return []
        src.unlink()
        return [op.path]
    if op.kind in ("rename", "rename_dir"):
        dst = root / op.to
        ok = src.is_file() if op.kind == "rename" else src.is_dir()
        if not ok or src == dst or dst.exists() or dst.is_relative_to(src):
            return []
        touched = _files_under(src, root)
        dst.parent.mkdir(parents=True, exist_ok=True)
        src.rename(dst)
        return touched + _files_under(dst, root)
    if op.kind == "mkdir":
        src.mkdir(parents=True, exist_ok=True)
        return []
    if op.kind == "rmdir":
        if not src.is_dir():
            return []
        touched = _files_under(src, root)
        shutil.rmtree(src)
        return touched
    if op.kind == "move_out":
        dst = outside / op.path
        if not src.exists() or dst.exists():
            return []
        touched = _files_under(src, root)
        dst.parent.mkdir(parents=True, exist_ok=True)
        src.rename(dst)
        return touched
    if op.kind == "move_in":
        there = outside / op.path
        if not there.exists() or src.exists():
            return []
        src.parent.mkdir(parents=True, exist_ok=True)
        there.rename(src)
        return _files_under(src, root)
    raise ValueError(op.kind)


def disk_differences(store: Path, workspace: str, root: Path) -> list[str]:
    """The store's documents against the Markdown files under root, read here without the scanner."""
    import apsw

    on_disk: dict[str, tuple[str, int]] = {}
    for f in root.rglob("*.md"):
        if f.is_file() and not f.is_symlink():
            data = f.read_bytes()
            on_disk[str(f.relative_to(root))] = (hashlib.sha256(data).hexdigest(), len(data))
    db = apsw.Connection(str(store), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows: list[Any] = db.execute(
            "SELECT d.path, d.content_hash, d.size FROM documents d JOIN workspaces w ON w.id=d.workspace_id WHERE w.name=?",
            (workspace,),
        ).fetchall()
    finally:
        db.close()
    stored: dict[str, tuple[str, int]] = {p: (h, n) for p, h, n in rows}
    out = []
    for p in sorted(set(on_disk) - set(stored)):
        out.append(f"on disk, not in the store: {p}")
    for p in sorted(set(stored) - set(on_disk)):
        out.append(f"in the store, not on disk: {p}")
    for p in sorted(set(on_disk) & set(stored)):
        if on_disk[p] != stored[p]:
            out.append(
                f"{p}: disk (sha256, size) {on_disk[p][0][:12]}…, {on_disk[p][1]} != store {stored[p][0][:12]}…, {stored[p][1]}"
            )
    return out


def clean_dump(root: Path, scratch: Path) -> dict[str, Any]:
    """What a fresh store holds after one index of root."""
    from autodoc.config import Settings
    from autodoc.service import Service

    from .reliability import dump

    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    svc = Service(Settings.from_env(store=scratch / "clean.db"))
    try:
        svc.workspace_add("kb", str(root), NO_MODEL)
        svc.index("kb")
    finally:
        svc.close()
    return dump(scratch / "clean.db", "kb")


def check_ops_world(base: Path, steps: list[Op], seed_files: bool = True) -> list[str]:
    """Run the steps on a fresh folder and store; the ways the store then differs from the disk."""
    from autodoc.config import Settings
    from autodoc.service import Service

    from .reliability import differences, dump

    if base.exists():
        shutil.rmtree(base)
    root, outside, store = base / "kb", base / "out", base / "store" / "autodoc.db"
    root.mkdir(parents=True)
    outside.mkdir()
    store.parent.mkdir()
    if seed_files:
        (root / "a.md").write_text("# A\n\nlease [[b]]\n")
        (root / "x").mkdir()
        (root / "x" / "b.md").write_text("# B\n\nwal [a](../a.md)\n")
    svc = Service(Settings.from_env(store=store))
    problems: list[str] = []
    try:
        svc.workspace_add("kb", str(root), NO_MODEL)
        svc.index("kb")
        touched: set[str] = set()
        for op in [*steps, Op("live")]:
            if op.kind == "index":
                svc.index("kb")
                touched.clear()
            elif op.kind == "live":
                if touched:
                    svc.index_paths("kb", sorted(touched))
                touched.clear()
            else:
                touched.update(apply(op, root, outside))
        clean = clean_dump(root, base / "clean")
        for when in ("after the live index", "after a whole index"):
            if when == "after a whole index":
                svc.index("kb")
            found = disk_differences(store, "kb", root) + differences(dump(store, "kb"), clean)
            problems += [f"{when}: {d}" for d in found]
    finally:
        svc.close()
    return problems


def shrink_report(steps: list[Op]) -> str:
    return "; ".join(map(str, steps))
