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


def check_ops_world_live(sock: Path, base: Path, n: int, steps: list[Op], settle: float = LIVE_DEADLINE) -> list[str]:
    """The same steps against a real daemon: its watcher is the live index ("live" lets it run a
    moment), "index" is workspace.index. Afterwards the store must reach the disk within `settle`
    seconds by the watcher alone, and hold it after one more workspace.index."""
    from .reliability import differences, dump

    name = f"o{n}"
    work = base / name
    if work.exists():
        shutil.rmtree(work)
    root, outside = work / "kb", work / "out"
    root.mkdir(parents=True)
    outside.mkdir()
    (root / "a.md").write_text("# A\n\nlease [[b]]\n")
    (root / "x").mkdir()
    (root / "x" / "b.md").write_text("# B\n\nwal [a](../a.md)\n")
    problems: list[str] = []
    store = Path(str(call(sock, "server.info", {}).result["store"]))

    def need(a: Answer, what: str) -> bool:
        if not a.ok:
            problems.append(f"{what}: {a.error or a.failure}")
        return a.ok

    try:
        if not need(
            call(sock, "workspace.add", {"name": name, "root": str(root), "config": NO_MODEL}), "workspace.add"
        ):
            return problems
        need(call(sock, "workspace.index", [name]), "workspace.index")
        for op in steps:
            if op.kind == "index":
                need(call(sock, "workspace.index", [name]), "workspace.index")
            elif op.kind == "live":
                time.sleep(0.2)
            else:
                apply(op, root, outside)
        clean = clean_dump(root, work / "clean")

        def found() -> list[str]:
            return disk_differences(store, name, root) + differences(dump(store, name), clean)

        deadline = time.monotonic() + settle
        while (left := found()) and time.monotonic() < deadline:
            time.sleep(0.25)
        problems += [f"after the watcher settled ({settle:.0f} s): {d}" for d in left]
        if need(call(sock, "workspace.index", [name]), "workspace.index"):
            problems += [f"after a whole index: {d}" for d in found()]
    finally:
        call(sock, "workspace.remove", [name])
        shutil.rmtree(work, ignore_errors=True)
    return problems


# ==== the long run: python -m bench.reliability generative =========================================

DOC_GENERATIVE = """Generative file tests (issue 36) run long: hostile files of every kind against a real
daemon, and file operations against whole and live index runs, on a real store and under a real
daemon's watcher.

    python -m bench.reliability generative --worlds 300 --sequences 300 --live 100

`--worlds` hostile workspaces (bench/generative.py `files_worlds`, checked by
`check_files_world` on one daemon), `--sequences` operation sequences checked in-process
(`check_ops_world`: Service.index and Service.index_paths), `--live` sequences under the daemon's
watcher (`check_ops_world_live`). Every problem is counted and the first ones are shown; the
report goes to docs/benchmarks/reliability.md. tests/integration/test_files_property.py and
test_ops_property.py run the same checks at a CI budget.
"""


@dataclass
class Tally:
    worlds: int = 0
    worlds_failed: int = 0
    kinds: dict[str, int] = field(default_factory=dict)
    sequences: int = 0
    ops: int = 0
    sequences_failed: int = 0
    live: int = 0
    live_ops: int = 0
    live_failed: int = 0
    daemon_deaths: int = 0
    examples: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    def problem(self, what: str, problems: list[str]) -> None:
        print(f"problem: {what}: " + " | ".join(p[:500] for p in problems[:3]), flush=True)
        if len(self.examples) < 12:
            self.examples.append(f"{what}: " + " | ".join(p[:300] for p in problems[:3]))


class _Daemon:
    """`autodoc serve --socket` on a temp store, restarted if a world kills it (counted)."""

    def __init__(self, base: Path):
        self.base = base
        self.sock = base / "run" / "autodoc.sock"
        self.store = base / "store" / "autodoc.db"
        self.proc: Any = None

    def start(self) -> None:
        import subprocess
        import sys

        from autodoc.rpc.transport import socket_answers

        self.sock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.store.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "AUTODOC_CHECK_RESULTS": "1", "AUTODOC_LOG": "WARNING", "PYTHONUNBUFFERED": "1"}
        env.setdefault("AUTODOC_INSTANT_DIR", "off")
        env.setdefault("AUTODOC_READERS", "0")
        self.log = open(self.base / "daemon.log", "ab")
        argv = [sys.executable, "-m", "autodoc.cli", "--store", str(self.store), "serve", "--socket", str(self.sock)]
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self.log, env=env
        )
        deadline = time.monotonic() + 120
        while not (self.sock.exists() and socket_answers(self.sock)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the daemon did not start: " + (self.base / "daemon.log").read_text()[-2000:])
            time.sleep(0.05)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        self.proc.terminate()
        try:
            code = self.proc.wait(30)
        except Exception:
            self.proc.kill()
            code = self.proc.wait()
        self.log.close()
        return code


def long_run(worlds: int, sequences: int, live: int, seed: int) -> Tally:
    import tempfile

    from hypothesis import HealthCheck, Phase, given, settings
    from hypothesis import seed as fixed_seed

    t = Tally()
    base = Path(tempfile.mkdtemp(prefix="ad-gen-", dir="/tmp"))
    d = _Daemon(base)
    d.start()
    (base / "ctl").mkdir()
    call(d.sock, "workspace.add", {"name": "ctl", "root": str(base / "ctl"), "config": NO_MODEL})

    def budget(n: int) -> settings:
        return settings(
            max_examples=n,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )

    def alive() -> None:
        if not d.running():
            t.daemon_deaths += 1
            d.start()

    try:

        @budget(worlds)
        @given(world=files_worlds())
        def one_world(world: FilesWorld) -> None:
            t.worlds += 1
            for s in world.slots:
                t.kinds[s.kind] = t.kinds.get(s.kind, 0) + 1
            problems = check_files_world(d.sock, base, t.worlds, world, "ctl")
            if not d.running():
                problems.append("the daemon died")
            if problems:
                t.worlds_failed += 1
                t.problem(world.describe(), problems)
            alive()
            if t.worlds % 50 == 0:
                print(f"{t.worlds} worlds, {t.worlds_failed} failed", flush=True)

        @budget(sequences)
        @given(steps=op_lists())
        def one_sequence(steps: list[Op]) -> None:
            t.sequences += 1
            t.ops += len(steps)
            problems = check_ops_world(base / "ops", steps)
            if problems:
                t.sequences_failed += 1
                t.problem(shrink_report(steps), problems)
            if t.sequences % 50 == 0:
                print(f"{t.sequences} sequences, {t.sequences_failed} failed", flush=True)

        @budget(live)
        @given(steps=op_lists(12))
        def one_live(steps: list[Op]) -> None:
            t.live += 1
            t.live_ops += len(steps)
            problems = check_ops_world_live(d.sock, base, t.live, steps)
            if problems:
                t.live_failed += 1
                t.problem("live: " + shrink_report(steps), problems)
            alive()
            if t.live % 25 == 0:
                print(f"{t.live} live sequences, {t.live_failed} failed", flush=True)

        for what, fn, n in (
            ("worlds", one_world, worlds),
            ("sequences", one_sequence, sequences),
            ("live", one_live, live),
        ):
            if n:
                started = time.monotonic()
                fixed_seed(seed)(fn)()
                t.seconds[what] = time.monotonic() - started
    finally:
        code = d.stop()
        if code != 0:
            t.examples.append(f"the daemon's exit code after SIGTERM: {code}")
        shutil.rmtree(base, ignore_errors=True)
    return t


def report(t: Tally, args: Any) -> str:
    from .common import git_commit, machine_note

    m = machine_note()
    kinds = ", ".join(f"{k} {n:,}" for k, n in sorted(t.kinds.items(), key=lambda kv: -kv[1]))
    secs = {k: f"{v:.0f} s" for k, v in t.seconds.items()}
    lines = [
        "## Generative file tests",
        "",
        f"`python -m bench.reliability generative --worlds {args.worlds} --sequences {args.sequences} --live {args.live} "
        f"--seed {args.seed}` (bench/generative.py): (b) hypothesis-built workspaces of three ordinary notes beside "
        "hostile files of every kind the product reads — notes with generated frontmatter values (unicode digits, "
        "numbers past int()'s 4,300 digits and a float's range, lone surrogates, deep nesting, odd YAML tags, dates, "
        "long strings), `.gitignore` files, `_schema/frontmatter.yaml`, a session transcript — each a generated kind "
        "(regular, invalid UTF-8, growing while read, FIFO, socket, symlink to /dev/zero or /dev/urandom, symlink "
        "loop, dangling link, folder, unreadable, sparse 2 GiB), added to one real daemon and indexed; the ordinary "
        "notes must be indexed, read and found, a note saved next to the hostile ones must reach the live index, the "
        "transcript must be read or refused, another workspace must take a write, and nothing may answer -32603. "
        "(c) sequences of create, edit, same-size rewrite keeping the mtime, rename of files and folders, delete, "
        "mkdir, rmdir and moves in and out of the root, interleaved with whole (`Service.index`) and live "
        "(`Service.index_paths` of the touched paths) index runs; then store == disk (paths, sha256, size) and the "
        "store's dump (documents with hashes and line counts, chunks, facets, links and their targets) == a clean "
        "index's, after the last live run and after one more whole run; and the same under a real daemon whose "
        "watcher is the live index (it must reach the disk within 30 s by itself). tests/integration/"
        "test_files_property.py and test_ops_property.py run them at a CI budget.",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| hostile workspaces (b) | {t.worlds:,} ({secs.get('worlds', '-')}) |",
        f"| hostile files by kind | {kinds} |",
        f"| workspaces with a problem | {t.worlds_failed:,} |",
        f"| operation sequences, in-process whole and live runs (c) | {t.sequences:,} with {t.ops:,} steps ({secs.get('sequences', '-')}) |",
        f"| sequences whose store differs from the disk or a clean index | {t.sequences_failed:,} |",
        f"| operation sequences under the daemon's watcher (c) | {t.live:,} with {t.live_ops:,} steps ({secs.get('live', '-')}) |",
        f"| of which the store did not reach the disk | {t.live_failed:,} |",
        f"| daemon deaths | {t.daemon_deaths} |",
        "",
        f"Run on {time.strftime('%Y-%m-%d')} at {git_commit()} with Python {m.get('python', '')}, "
        f"{m.get('nproc')} cores (load {m.get('load', [0])[0]}), shared with other jobs.",
    ]
    if t.examples:
        lines += ["", "Problems found:", ""] + [f"- {e}" for e in t.examples]
    return "\n".join(lines)


def main_generative(argv: list[str] | None = None) -> int:
    import argparse

    from .common import replace_section
    from .reliability import REPORT

    ap = argparse.ArgumentParser(
        prog="python -m bench.reliability generative", description=DOC_GENERATIVE.split("\n\n")[0]
    )
    ap.add_argument("--worlds", type=int, default=300)
    ap.add_argument("--sequences", type=int, default=300)
    ap.add_argument("--live", type=int, default=100)
    ap.add_argument("--seed", type=int, default=36)
    ap.add_argument("--report", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    t = long_run(args.worlds, args.sequences, args.live, args.seed)
    replace_section(args.report, "bench.generative", report(t, args))
    print(
        f"{t.worlds} worlds ({t.worlds_failed} failed), {t.sequences} sequences ({t.sequences_failed} failed), "
        f"{t.live} live ({t.live_failed} failed), {t.daemon_deaths} daemon deaths; report: {args.report}"
    )
    return 0 if not (t.worlds_failed or t.sequences_failed or t.live_failed or t.daemon_deaths) else 1
