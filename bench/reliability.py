"""The reliability harness (issue 16; docs/benchmarks/reliability.md): protocol
fuzzing, crashes and load against the real daemon and CLI, and the store
comparisons they check with.

    python -m bench.reliability fuzz --cases 100000
    python -m bench.reliability crash --kills 100
    python -m bench.reliability load --clients 32 --requests 1000
    python -m bench.reliability generative --worlds 300 --sequences 300 --live 100
    python -m bench.reliability --help

Each section below was a script of its own; its docstring is kept as
DOC_<CASE>. The store-state helpers (dump, differences, problems; formerly
bench/store_state.py) are shared with tests/e2e/test_prepare.py and tests/integration/test_rechunk.py.

Runs on: the benchmark's main thread, its client threads, and the processes it starts and kills."""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import functools
import hashlib
import json
import os
import random
import selectors
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw
from hypothesis import strategies as st

from autodoc.rpc import schemas
from autodoc.rpc.framing import CONTENT_LENGTH, NEWLINE, Frame, FrameDecoder, FrameError
from autodoc.rpc.transport import socket_answers

from .common import REPO, git_commit, harness, machine_note, percentile, replace_section, start_daemon, stop_daemon
from .common import Case as BenchCase
from .generative import DOC_GENERATIVE, main_generative

# ==== fuzz (formerly bench/fuzz_protocol.py) ======================================================

DOC_FUZZ = """Protocol fuzzing against a real daemon: frames, envelopes and every method's
params, generated with hypothesis, sent over a real Unix socket.

    python -m bench.reliability fuzz --cases 100000     # writes docs/benchmarks/reliability.md

Each case is a fresh connection: the case's bytes (one to three frames in one
framing, mutated), then a sentinel ``server.info`` request in the same
framing, then a half-close; the daemon answers everything it read and closes.
A case passes when the daemon is still running, every answer is a valid
JSON-RPC 2.0 response (or a server notification), no answer is -32603, and
the sentinel is answered with a result — unless the case lied about a
Content-Length in a way that legitimately swallows what follows.

The same generators drive tests/e2e/test_protocol_fuzz.py at a CI budget.
"""

CORPUS = REPO / "tests" / "corpora" / "kb"
REPORT = REPO / "docs" / "benchmarks" / "reliability.md"
NO_MODEL = {"embedding": {"provider": "none"}}
# Small, so oversized frames are cheap to make; the limit logic is the same at 16 MiB.
MAX_FRAME = 64 * 1024
DEADLINE = 30.0
INTERNAL_ERROR = -32603

# The fixture workspaces: KB is searched and read (never changed but by an
# index run, which finds nothing new); SCRATCH takes every write.
KB = "kb"
SCRATCH = "fz"
WRITE_METHODS = frozenset({"workspace.add", "workspace.remove", "workspace.configure", "workspace.section_size"})
# Would stop the daemon under test; shutdown has its own tests.
UNFUZZED = frozenset({"server.shutdown"})
# Where the running FuzzDaemon keeps SCRATCH's folder and runs (make_safe needs them
# while hypothesis generates, which is after the daemon started).
PLACES = {"scratch": "/nonexistent/scratch", "cwd": "/nonexistent"}


# -- the daemon under test ------------------------------------------------------------------


class FuzzDaemon:
    """``autodoc serve --socket`` in its own process on a temp store, with KB
    (a copy of tests/corpora/kb) indexed and SCRATCH (one small file) added."""

    def __init__(self, base: Path | None = None):
        self.base = Path(base or tempfile.mkdtemp(prefix="ad-fz-", dir="/tmp"))
        self.kb = self.base / "kb"
        self.scratch = self.base / "scratch"
        self.cwd = self.base / "cwd"  # empty: a relative root resolves into nothing worth indexing
        self.store = self.base / "store" / "autodoc.db"
        self.sock = self.base / "run" / "autodoc.sock"
        self.log_path = self.base / "daemon.log"
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def prepare(self) -> None:
        if CORPUS.is_dir():
            shutil.copytree(CORPUS, self.kb, symlinks=True)
        else:
            (self.kb / "adrs").mkdir(parents=True)
            (self.kb / "adrs" / "0012-lease-recovery.md").write_text("# ADR 0012\n\n## Lease\n\nlease recovery\n")
        self.scratch.mkdir()
        (self.scratch / "one.md").write_text("# One\n\nscratch words about leases\n")
        self.cwd.mkdir()
        PLACES.update(scratch=str(self.scratch), cwd=str(self.cwd))

    def start(self) -> None:
        env = {
            **os.environ,
            "AUTODOC_CHECK_RESULTS": "1",
            "AUTODOC_MAX_FRAME_BYTES": str(MAX_FRAME),
            "AUTODOC_LOG": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "autodoc.cli", "--store", str(self.store), "serve", "--socket", str(self.sock)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
            env=env,
            cwd=self.cwd,
        )
        self.starts += 1
        deadline = time.monotonic() + DEADLINE
        while not (self.sock.exists() and socket_answers(self.sock)):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the daemon died while starting:\n{self.log_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the daemon never listened:\n{self.log_text()[-3000:]}")
            time.sleep(0.02)
        self.ensure_workspaces()

    def ensure_workspaces(self) -> None:
        """Put the fixture workspaces back as they were (a fuzzed write may have
        removed or reconfigured SCRATCH; KB is never written)."""
        have = {w["name"] for w in self.call("workspace.list")["workspaces"]}
        if KB not in have:
            self.call("workspace.add", [KB, str(self.kb), NO_MODEL])
            self.call("workspace.reindex", [KB])
        if SCRATCH not in have:
            self.call("workspace.add", [SCRATCH, str(self.scratch), NO_MODEL])
            self.call("workspace.reindex", [SCRATCH])

    def call(self, method: str, params: Any = None) -> Any:
        message = {"jsonrpc": "2.0", "id": 1, "method": method}
        if params is not None:
            message["params"] = params
        answers = parse_answers(exchange(self.sock, json.dumps(message).encode() + b"\n"))
        (answer,) = [a for a in answers if isinstance(a, dict) and "id" in a]  # not $/progress
        if "error" in answer:
            raise RuntimeError(f"{method} failed: {answer['error']}")
        return answer["result"]

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def serving(self, timeout: float = 5.0) -> bool:
        """Whether the daemon still answers server.info on a fresh connection."""
        if not self.alive:
            return False
        try:
            message = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server.info"}).encode() + b"\n"
            answers = parse_answers(exchange(self.sock, message, timeout))
            return any(isinstance(a, dict) and isinstance(a.get("result"), dict) for a in answers)
        except (OSError, TimeoutError, ValueError):
            return False

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> int | None:
        code = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                code = self.proc.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                code = self.proc.wait()
        elif self.proc is not None:
            code = self.proc.returncode
        if hasattr(self, "log"):
            self.log.close()
        return code

    def cleanup(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)


# -- one exchange on a fresh connection ---------------------------------------------------------


def exchange(path: Path, data: bytes, timeout: float = DEADLINE) -> bytes:
    """Send ``data``, half-close, and read until the daemon closes. Sending and
    reading interleave: the daemon stops reading a peer whose answers pile up."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(str(path))
    sock.setblocking(False)
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ | selectors.EVENT_WRITE)
    view, out, write_open = memoryview(data), bytearray(), True
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no end of answers within {timeout} s ({len(out)} bytes read)")
            for _, mask in sel.select(left):
                if mask & selectors.EVENT_WRITE and write_open:
                    try:
                        n = sock.send(view[:65536])
                    except BlockingIOError:
                        n = 0
                    except (BrokenPipeError, ConnectionResetError):
                        view = view[len(view) :]
                        n = 0
                    view = view[n:]
                    if not view:
                        try:
                            sock.shutdown(socket.SHUT_WR)
                        except OSError:
                            pass
                        write_open = False
                        sel.modify(sock, selectors.EVENT_READ)
                if mask & selectors.EVENT_READ:
                    try:
                        chunk = sock.recv(262144)
                    except BlockingIOError:
                        continue
                    except ConnectionResetError:
                        chunk = b""
                    if not chunk:
                        return bytes(out)
                    out += chunk
    finally:
        sel.close()
        sock.close()


def parse_answers(raw: bytes) -> list[Any]:
    """Every message the daemon sent, parsed strictly (no NaN, no Infinity)."""
    dec = FrameDecoder(max_frame_bytes=1 << 30)
    out = []
    for item in dec.feed(raw) + dec.feed_eof():
        if isinstance(item, FrameError):
            raise ValueError(f"the daemon sent a broken frame: {item.message}")
        assert isinstance(item, Frame)
        out.append(json.loads(item.payload.decode("utf-8"), parse_constant=_no_constant))
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"the daemon sent {name}")


def response_problems(message: Any) -> list[str]:
    """How ``message`` breaks JSON-RPC 2.0 (as a response or a server notification)."""
    if isinstance(message, list):
        if not message:
            return ["an empty batch answer"]
        return [p for m in message for p in response_problems(m) if not isinstance(m, list)] + [
            "a nested batch answer" for m in message if isinstance(m, list)
        ]
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return [f"not a JSON-RPC 2.0 object: {str(message)[:200]}"]
    if "method" in message and "id" not in message:
        return []  # a notification ($/progress, changes.changed …)
    problems = []
    if "id" not in message:
        problems.append("an answer without an id")
    elif not (
        message["id"] is None or (isinstance(message["id"], (str, int, float)) and not isinstance(message["id"], bool))
    ):
        problems.append(f"an answer with id {message['id']!r}")
    if ("result" in message) == ("error" in message):
        problems.append("an answer with neither or both of result and error")
    if "error" in message:
        err = message["error"]
        if not isinstance(err, dict) or not isinstance(err.get("code"), int) or not isinstance(err.get("message"), str):
            problems.append(f"a malformed error {str(err)[:200]}")
        elif not isinstance(err.get("data"), dict) or not isinstance(err["data"].get("name"), str):
            problems.append(f"an error without data.name {str(err)[:200]}")
    extra = set(message) - {"jsonrpc", "id", "result", "error"}
    if extra:
        problems.append(f"unknown members {sorted(extra)}")
    return problems


def flatten(messages: list[Any]) -> list[dict]:
    out = []
    for m in messages:
        out.extend(m if isinstance(m, list) else [m])
    return [m for m in out if isinstance(m, dict)]


# -- what a case is ---------------------------------------------------------------------------


@dataclass
class Case:
    data: bytes  # what the case sends before the sentinel
    framing: str
    frames: int  # frames the case sends (the sentinel not counted)
    expect_sentinel: bool = True  # False when a lying Content-Length may swallow it
    kind: str = ""


@dataclass
class Outcome:
    answers: list[Any] = field(default_factory=list)
    codes: Counter = field(default_factory=Counter)
    problems: list[str] = field(default_factory=list)
    internal_errors: list[dict] = field(default_factory=list)
    daemon_died: bool = False


SENTINEL_ID = "fuzz-sentinel"
SENTINEL = json.dumps({"jsonrpc": "2.0", "id": SENTINEL_ID, "method": "server.info"}).encode()


def run_case(daemon: FuzzDaemon, case: Case, timeout: float = DEADLINE) -> Outcome:
    out = Outcome()
    data = case.data + frame_bytes(SENTINEL, case.framing)
    try:
        raw = exchange(daemon.sock, data, timeout)
    except (TimeoutError, OSError) as exc:
        out.problems.append(f"exchange failed: {exc!r}")
        raw = b""
    try:
        out.answers = parse_answers(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        out.problems.append(f"unreadable answers: {exc}")
    for message in out.answers:
        out.problems.extend(response_problems(message))
    sentinel_ok = False
    for m in flatten(out.answers):
        if "error" in m and isinstance(m["error"], dict):
            code = m["error"].get("code")
            out.codes[code] += 1
            if code == INTERNAL_ERROR:
                out.internal_errors.append(m)
        if m.get("id") == SENTINEL_ID and isinstance(m.get("result"), dict):
            sentinel_ok = True
    if case.expect_sentinel and not sentinel_ok:
        out.problems.append("the connection did not answer server.info after the case")
    if out.internal_errors:
        out.problems.append(f"{len(out.internal_errors)} answer(s) of -32603: {str(out.internal_errors[0])[:300]}")
    # A daemon whose task group broke stops serving before (long before) it exits:
    # after any problem, a fresh connection must still be answered.
    if out.problems and not daemon.serving():
        out.daemon_died = True
        code = daemon.proc.poll() if daemon.proc else None
        out.problems.insert(0, f"the daemon stopped serving (exit code {code})")
    return out


def frame_bytes(payload: bytes, framing: str) -> bytes:
    if framing == CONTENT_LENGTH:
        return b"Content-Length: %d\r\n\r\n" % len(payload) + payload
    return payload + b"\n"


# -- generators -----------------------------------------------------------------------------------

RAW = "@@RAW@@"  # a string value replaced, in the JSON text, by one raw token
RAW_TOKENS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e999999",
    "-1e999999",
    "9" * 5000,
    "1" * 4000,
    "[" * 1200 + "]" * 1200,
    '{"a":' * 1100 + "1" + "}" * 1100,
    "[" * 70 + "]" * 70,
    "1.5e308",
    "-0",
    "0.0000000000000000000000001",
    '"\\ud800"',
    '"\\udfff\\ud800"',
    '"\\u0000"',
]

HOSTILE_STRINGS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "\ud83d",
    "../../etc/passwd",
    "/",
    "/etc",
    "..",
    ".",
    "%2e%2e/x",
    "a/../../b",
    "\\..\\x",
    "\u202e",
    "🙂",
    "\n",
    "\r\n",
    "\t",
    "Content-Length: 5",
    "*",
    '"',
    "tag:",
    "-",
    "type:adr",
    "x" * 5000,
    "日本語",
    "\ufeff",
    "\x07",
    "NOT",
    "AND OR",
    '"unclosed',
    "a*",
    "**",
    RAW,
    KB,
    SCRATCH,
    "kb/../kb",
    "adrs/0012-lease-recovery.md",
    "index.md",
]
HOSTILE_INTS = [0, -1, 1, 2**31 - 1, 2**31, 2**53 + 1, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**29, 10**300]

# Valid strings (no NUL, no lone surrogate) that mean something to the methods:
# query syntax, FTS5 operators, paths in and out of the corpus, facets.
TRICKY_STRINGS = [
    "lease",
    "lease recovery",
    '"lease recovery"',
    "lease*",
    "*",
    '"',
    "NEAR(a b)",
    "a OR b",
    "AND",
    "NOT x",
    "^x",
    "-x",
    "tag:sqlite",
    "type:adr",
    "-status:superseded",
    "status:",
    ":",
    'title:"x',
    "x:y:z",
    "(",
    ")",
    "{a b}",
    "col:",
    "date:>=2024-01-01",
    "adr:10..20",
    "a\u2028b",
    "🙂 lease",
    "Ünïcode",
    "a" * 300,
    "adrs",
    "adrs/",
    "adrs/0012-lease-recovery.md",
    "index.md",
    "../index.md",
    "/etc/passwd",
    "notes/../adrs",
    "./index.md",
    "adrs//x.md",
    "missing.md",
    "sqlite",
    "storage/sqlite",
    "",
]
hostile_strings = st.sampled_from(HOSTILE_STRINGS)
any_text = st.text(max_size=12)
strings = st.one_of(any_text, hostile_strings)
ints = st.one_of(st.integers(), st.sampled_from(HOSTILE_INTS))
floats = st.floats(allow_nan=False, allow_infinity=False)
leaves = st.one_of(st.none(), st.booleans(), ints, floats, strings)
json_values = st.recursive(
    leaves,
    lambda children: st.one_of(st.lists(children, max_size=4), st.dictionaries(strings, children, max_size=4)),
    max_leaves=12,
)


def _resolve(schema: dict, base: str) -> tuple[dict, str]:
    ref = schema.get("$ref")
    if not ref:
        return schema, base
    doc_name, _, pointer = ref.partition("#")
    doc_name = (doc_name or base).removeprefix(schemas.BASE_URI)  # absolute and relative refs alike
    _, docs = schemas._registry()
    target: Any = docs[doc_name]
    for part in [p for p in pointer.split("/") if p]:
        target = target[part]
    return _resolve(target, doc_name)


def from_schema(schema: dict, base: str, depth: int = 0, hostile: bool = True) -> st.SearchStrategy:
    """Values a schema accepts (roughly: if/then/not are ignored), each node
    sometimes (if ``hostile``) swapped for a hostile value."""
    schema, base = _resolve(schema, base)
    good = _valid(schema, base, depth, hostile)
    if not hostile:
        return good
    bad = st.one_of(hostile_strings, st.sampled_from(HOSTILE_INTS), json_values)
    # Mostly valid, so the generated params reach the methods' own code.
    return st.one_of(good, good, good, good, good, good, good, bad)


def _valid(schema: dict, base: str, depth: int, hostile: bool) -> st.SearchStrategy:
    if schema.get("pattern") and schema.get("x-message", "").startswith("must be 1 to 64"):
        known = st.sampled_from([KB, KB, SCRATCH, "nope"])
        return st.one_of(known, known, known, st.from_regex(schema["pattern"], fullmatch=True))
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "const" in schema:
        return st.just(schema["const"])
    for key in ("anyOf", "oneOf"):
        if key in schema:
            return st.one_of([from_schema(s, base, depth + 1, hostile) for s in schema[key]])
    kind = schema.get("type")
    if isinstance(kind, list):
        return st.one_of([_valid({**schema, "type": k}, base, depth, hostile) for k in kind])
    if kind == "object" or "properties" in schema:
        props = schema.get("properties", {})
        required = set(schema.get("required", []))
        if depth > 6:
            return st.just({})
        need = {k: from_schema(v, base, depth + 1, hostile) for k, v in props.items() if k in required}
        maybe = {k: from_schema(v, base, depth + 1, hostile) for k, v in props.items() if k not in required}
        fixed = st.fixed_dictionaries(need, optional=maybe)
        if schema.get("additionalProperties") is False or not isinstance(schema.get("additionalProperties"), dict):
            return fixed
        extra = st.dictionaries(
            any_text, from_schema(schema["additionalProperties"], base, depth + 1, hostile), max_size=3
        )
        return st.tuples(fixed, extra).map(lambda t: {**t[1], **t[0]})
    if kind == "array":
        items = schema.get("items")
        item = from_schema(items, base, depth + 1, hostile) if isinstance(items, dict) else json_values
        return st.lists(item, min_size=schema.get("minItems", 0), max_size=4)
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        low = schema.get("minLength", 0)
        text = st.text(min_size=low, max_size=max(low, min(schema.get("maxLength", 24), 24)))
        return st.one_of(text, st.sampled_from([t for t in TRICKY_STRINGS if len(t) >= low]))
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    return json_values


def fuzzed_methods() -> list[str]:
    return sorted(m for m in schemas.methods_with_schemas() if m not in schemas.NOTIFICATIONS and m not in UNFUZZED)


@functools.cache
def params_for(method: str) -> st.SearchStrategy:
    """Named params from the method's schema, made safe for the fixture (see
    ``make_safe``), sent named or positional, or something else entirely."""
    schema = schemas.load_schema(method, "params")
    stem = schemas.schema_stem(method) + ".params.json"
    names = schemas.param_names(method)

    def both_forms(strategy: st.SearchStrategy) -> st.SearchStrategy:
        named = strategy.filter(lambda v: isinstance(v, dict)).map(lambda p: make_safe(method, p))
        positional = named.map(lambda p: [p[k] for k in names[: _last_given(p, names)]] if _in_order(p, names) else p)
        return st.one_of(named, positional)

    hostile, clean = both_forms(from_schema(schema, stem)), both_forms(from_schema(schema, stem, hostile=False))
    # Clean params reach the methods' deepest code with the tricky-but-valid strings.
    return st.one_of(hostile, clean, hostile, clean, json_values.map(lambda v: make_safe(method, v)))


def _in_order(p: dict, names: list[str]) -> bool:
    return set(p) <= set(names) and all(n in p for n in names[: _last_given(p, names)])


def _last_given(p: dict, names: list[str]) -> int:
    return max((i + 1 for i, n in enumerate(names) if n in p), default=0)


def make_safe(method: str, params: Any) -> Any:
    """Keep fuzzed writes away from the fixture and the machine: writes go to
    SCRATCH, roots that are real folders become SCRATCH's folder (the daemon
    runs in an empty folder, so a relative root finds nothing), and no
    embedding model or ranker is switched on (loading one is slow, an http one
    would call out)."""
    if not isinstance(params, dict):
        return params
    p = dict(params)
    if method in WRITE_METHODS:
        for key in ("name", "workspace"):
            if p.get(key) == KB:
                p[key] = SCRATCH
    if method == "workspace.add" and isinstance(p.get("root"), str):
        root = p["root"]
        try:
            real = os.path.isdir(os.path.join(PLACES["cwd"], root))
        except (ValueError, UnicodeEncodeError):
            real = False  # NUL or a lone surrogate: no such folder
        if real:
            p["root"] = PLACES["scratch"]
    for key in ("config", "options"):
        cfg = p.get(key)
        if isinstance(cfg, dict):
            cfg = dict(cfg)
            for part in ("embedding", "ranker"):
                if isinstance(cfg.get(part), dict) and cfg[part].get("provider") != "none":
                    cfg[part] = {**cfg[part], "provider": "none"}
            p[key] = cfg
    return p


ids = st.one_of(
    st.integers(),
    st.sampled_from(HOSTILE_INTS),
    any_text,
    st.sampled_from(["\ud800", "\x00", "", RAW, "1"]),
    floats,
    st.none(),
    st.booleans(),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(any_text, st.integers(), max_size=1),
)

# Strategies are built once, here: building them inside draws made hypothesis
# validate fresh objects on every case, which was most of the run's time.
_FUZZED = st.sampled_from(fuzzed_methods())
_SOME_ID = st.one_of(st.integers(0, 3), ids)
_BAD_JSONRPC = st.one_of(st.sampled_from(["1.0", "2", 2.0, None]), json_values)
_BAD_METHOD = st.one_of(strings, json_values, st.sampled_from(["no.such", "$/x", "rpc.", "server.shutdownx"]))
_DICE6 = st.integers(0, 5)
_DICE13 = st.integers(0, 12)


def _request(draw: Any, broken: bool) -> Any:
    """One request object: well-formed most of the time, then (if ``broken``) broken one way."""
    method = draw(_FUZZED)
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if draw(_DICE6):
        message["id"] = draw(_SOME_ID)
    if draw(_DICE6):
        message["params"] = draw(params_for(method))
    breakage = draw(_DICE13) if broken else 0
    if breakage == 1:
        message["jsonrpc"] = draw(_BAD_JSONRPC)
    elif breakage == 2:
        message["method"] = draw(_BAD_METHOD)
    elif breakage == 3:
        del message["method"]
    elif breakage == 4:
        message[draw(strings)] = draw(json_values)
    elif breakage == 5:
        message["params"] = draw(json_values)
    elif breakage == 6:
        message = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": draw(ids)}}
    return message


REQUESTS = st.composite(lambda draw: _request(draw, True))()
CLEAN_REQUESTS = st.composite(lambda draw: _request(draw, False))()
_BATCH = st.lists(st.one_of(REQUESTS, REQUESTS, json_values), min_size=1, max_size=6)
_NESTED = st.lists(st.lists(REQUESTS, max_size=2), max_size=3)
_ODD = st.sampled_from([[], [[]], [{}], {}, 0, "x", None, True])
_DICE10 = st.integers(0, 9)
_SMALL_ID = st.integers(0, 2)


@st.composite
def _envelope(draw) -> Any:
    """A whole message: a request, a batch (ids often repeated, sometimes
    nested or empty), or any JSON value at all."""
    shape = draw(_DICE10)
    if shape <= 4:
        return draw(REQUESTS)
    if shape <= 6:
        items = draw(_BATCH)
        if draw(st.booleans()):
            rid = draw(_SMALL_ID)
            for it in items:
                if isinstance(it, dict) and "method" in it:
                    it["id"] = rid  # a batch repeating one id
        return items
    if shape == 7:
        return draw(_NESTED)  # nested batches
    if shape == 8:
        return draw(_ODD)
    return draw(json_values)


ENVELOPES = _envelope()
_STYLE = st.sampled_from(["escaped", "utf8", "utf8", "surrogatepass"])
_RAW_TOKEN = st.sampled_from(RAW_TOKENS)


def _text(draw: Any, message: Any) -> bytes:
    """The JSON text of a message: escaped or raw UTF-8, sometimes with one
    raw token (NaN, 1e999999, 5,000 digits, deep nesting …) spliced in, or
    with a lone surrogate written as bytes (not UTF-8)."""
    style = draw(_STYLE)
    text = json.dumps(message, ensure_ascii=(style == "escaped"))
    quoted = json.dumps(RAW)
    if quoted in text:
        text = text.replace(quoted, draw(_RAW_TOKEN), 1)
    errors = "surrogatepass" if style == "surrogatepass" else "strict"
    try:
        return text.encode("utf-8", errors)
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


HEADER_LIES = [
    "exact",
    "exact",
    "exact",
    "smaller",
    "larger",
    "negative",
    "words",
    "digits30",
    "two",
    "missing",
    "lowercase",
    "lf-only",
    "type-first",
    "over-limit",
]
_LIE = st.sampled_from(HEADER_LIES)
_WORDS = st.sampled_from([b"ten", b"1e3", b"0x10", b" ", b"+5", b"5 5", b"\xff"])
_DIGITS = st.sampled_from([19, 30, 5000])
_EXTRA = st.integers(1, 4096)
_FRACTION = st.floats(0, 1, exclude_max=True)


def _content_length_frame(draw: Any, payload: bytes) -> tuple[bytes, bool]:
    """One Content-Length frame, its header true or lying; and whether what
    follows is still read as frames (False: a larger-than-sent length ate it)."""
    lie = draw(_LIE)
    n = len(payload)
    if lie == "smaller" and n > 1:
        return b"Content-Length: %d\r\n\r\n" % int(draw(_FRACTION) * n) + payload, True
    if lie == "larger":
        return b"Content-Length: %d\r\n\r\n" % (n + draw(_EXTRA)) + payload, False
    if lie == "negative":
        return b"Content-Length: -%d\r\n\r\n" % n + payload, True
    if lie == "words":
        return b"Content-Length: " + draw(_WORDS) + b"\r\n\r\n" + payload, True
    if lie == "digits30":
        return b"Content-Length: " + b"9" * draw(_DIGITS) + b"\r\n\r\n" + payload, True
    if lie == "two":
        return b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (n, n + 1) + payload, True
    if lie == "missing":
        return b"Content-Type: application/json\r\n\r\n" + payload, True
    if lie == "lowercase":
        return b"content-length: %d\r\ncontent-type: x\r\n\r\n" % n + payload, True
    if lie == "lf-only":
        return b"Content-Length: %d\n\n" % n + payload, True
    if lie == "type-first":
        return (
            b"Content-Type: application/vscode-jsonrpc; charset=utf-8\r\nContent-Length: %d\r\n\r\n" % n + payload,
            True,
        )
    if lie == "over-limit":
        body = payload + b" " * (MAX_FRAME + 1 - n) if n <= MAX_FRAME else payload
        return b"Content-Length: %d\r\n\r\n" % len(body) + body, True
    return b"Content-Length: %d\r\n\r\n" % n + payload, True


_MUTATION = st.sampled_from(["plain", "plain", "plain", "crlf", "blank-lines", "junk", "over-limit", "no-newline"])
_JUNK = st.binary(max_size=40)


def _newline_frame(draw: Any, payload: bytes) -> bytes:
    mutation = draw(_MUTATION)
    if mutation == "crlf":
        return payload + b"\r\n"
    if mutation == "blank-lines":
        return b"\n \r\n" + payload + b"\n\n"
    if mutation == "junk":
        return draw(_JUNK).replace(b"\n", b" ") + b"\n" + payload + b"\n"
    if mutation == "over-limit":
        return payload + b" " * (MAX_FRAME + 1) + b"\n"
    if mutation == "no-newline":
        # Glued to the next frame on one line: a parse error, then the stream goes on.
        return payload
    return payload + b"\n"


_FRAMING = st.sampled_from([NEWLINE, CONTENT_LENGTH])


def cases(messages: st.SearchStrategy, kind: str) -> st.SearchStrategy[Case]:
    """One to three messages, as text, framed one way (mutated), as one case."""
    several = st.lists(messages, min_size=1, max_size=3)

    @st.composite
    def case(draw) -> Case:
        framing = draw(_FRAMING)
        payloads = [_text(draw, m) for m in draw(several)]
        data, expect = b"", True
        for payload in payloads:
            if framing == CONTENT_LENGTH:
                frame, goes_on = _content_length_frame(draw, payload)
                expect = expect and goes_on
            else:
                frame = _newline_frame(draw, payload)
            data += frame
        if framing == NEWLINE:
            if data.lstrip(b" \t\r\n")[:8].lower() == b"content-":
                framing = CONTENT_LENGTH  # the junk said so: the daemon detects Content-Length framing
                expect = False
            elif not data.endswith(b"\n"):
                data += b"\n"
        return Case(data=data, framing=framing, frames=len(payloads), expect_sentinel=expect, kind=kind)

    return case()


_SIMPLE = st.sampled_from(
    [
        {"jsonrpc": "2.0", "id": 1, "method": "server.info"},
        {"jsonrpc": "2.0", "id": "a", "method": "workspace.status", "params": [KB]},
        {"jsonrpc": "2.0", "method": "workspace.list"},
    ]
)
FRAME_CASES = cases(st.one_of(_SIMPLE, _SIMPLE, ENVELOPES), "frames")  # framing first, every way wrong
ENVELOPE_CASES = cases(ENVELOPES, "envelopes")
PARAMS_CASES = cases(CLEAN_REQUESTS, "params")  # every method, params from its schema and hostile values


def frame_cases() -> st.SearchStrategy[Case]:
    return FRAME_CASES


def envelope_cases() -> st.SearchStrategy[Case]:
    return ENVELOPE_CASES


def params_cases() -> st.SearchStrategy[Case]:
    return PARAMS_CASES


# -- the long run ------------------------------------------------------------------------------------


@dataclass
class Tally:
    cases: int = 0
    frames: int = 0
    answers: int = 0
    results: int = 0
    exits: int = 0
    internal: int = 0
    failed_cases: int = 0
    codes: Counter = field(default_factory=Counter)
    by_kind: Counter = field(default_factory=Counter)
    examples: list[str] = field(default_factory=list)

    def add(self, case: Case, out: Outcome) -> None:
        self.cases += 1
        self.by_kind[case.kind] += 1
        self.frames += case.frames + 1
        answered = flatten(out.answers)
        self.answers += len(answered)
        self.results += sum(1 for m in answered if "result" in m and m.get("id") != SENTINEL_ID)
        self.codes.update(out.codes)
        self.internal += len(out.internal_errors)
        if out.daemon_died:
            self.exits += 1
        if out.problems:
            self.failed_cases += 1
            if len(self.examples) < 20:
                self.examples.append(f"{case.kind}: {out.problems[0][:300]} — sent {case.data[:300]!r}")


def long_run(n_cases: int, seed: int, report: Path, section: str = "") -> Tally:
    from hypothesis import HealthCheck, Phase, given, settings

    tally = Tally()
    daemon = FuzzDaemon()
    try:
        daemon.prepare()
        daemon.start()
    except BaseException:
        daemon.stop()
        daemon.cleanup()
        raise
    started = time.monotonic()
    kinds = st.one_of(frame_cases(), envelope_cases(), params_cases(), params_cases())

    @settings(
        max_examples=n_cases,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=kinds)
    def one(case: Case) -> None:
        if tally.exits and not daemon.serving():
            print(f"the daemon stopped serving: restarting ({tally.exits} exits so far)", file=sys.stderr)
            daemon.stop()
            daemon.start()
        out = run_case(daemon, case)
        tally.add(case, out)
        if out.problems:
            print(
                f"case {tally.cases} ({case.kind}): {out.problems[0][:300]} — sent {case.data[:300]!r}",
                file=sys.stderr,
                flush=True,
            )
        if tally.cases % 100 == 0 and not out.daemon_died:
            try:
                daemon.ensure_workspaces()
            except Exception as exc:
                tally.examples.append(f"restoring the fixture workspaces failed: {exc}")
        if tally.cases % 5000 == 0:
            rate = tally.cases / (time.monotonic() - started)
            print(
                f"{tally.cases} cases, {tally.exits} exits, {tally.internal} -32603, "
                f"{tally.failed_cases} failed, {rate:.0f}/s",
                file=sys.stderr,
                flush=True,
            )

    from hypothesis import seed as fixed_seed

    try:
        fixed_seed(seed)(one)()
    finally:
        duration = time.monotonic() - started
        code = daemon.stop()
        write_report(tally, duration, seed, code, report, daemon.starts, section)
        daemon.cleanup()
    return tally


def write_report(
    t: Tally, seconds: float, seed: int, exit_code: int | None, path: Path, starts: int, section: str = ""
) -> None:
    others = (
        ", ".join(
            f"`{code}` × {n:,}"
            for code, n in sorted(t.codes.items(), key=lambda kv: (-kv[1], kv[0]))
            if code != INTERNAL_ERROR
        )
        or "none"
    )
    begin, end = _markers(section)
    lines = [
        begin,
        f"## Protocol fuzzing{': ' + section if section else ''}",
        "",
        "`python -m bench.reliability fuzz --cases N` drives a real daemon (`autodoc serve --socket`,",
        "a temp store, `tests/corpora/kb` indexed without an embedding model, answers checked",
        "against their schemas with `AUTODOC_CHECK_RESULTS=1`, 64 KiB frame limit so oversized",
        "frames are cheap) over its Unix socket with hypothesis-generated cases: frames in both",
        "framings with lying `Content-Length` headers, envelopes (batches, nested batches,",
        "repeated ids, ids of every JSON type, raw `NaN`/`1e999999`/deep nesting), and every",
        "method's params generated from its schema with hostile values (NUL, lone surrogates,",
        "huge integers, 5,000-character strings). Each case is one connection, followed by a",
        "`server.info` that must still be answered. tests/e2e/test_protocol_fuzz.py runs the same",
        "generators at a CI budget.",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| cases | {t.cases:,} ({', '.join(f'{k} {v:,}' for k, v in sorted(t.by_kind.items()))}) |",
        f"| frames sent (each case's sentinel included) | {t.frames:,} |",
        f"| answers received (batch elements counted) | {t.answers:,} |",
        f"| of which results (the sentinels' not counted) | {t.results:,} |",
        f"| daemon exits | {t.exits} |",
        f"| `-32603` answers | {t.internal} |",
        f"| cases with any problem (invalid answer, sentinel unanswered, timeout) | {t.failed_cases} |",
        f"| other errors by code | {others} |",
        f"| duration | {seconds:.0f} s ({t.cases / max(seconds, 1e-9):.0f} cases/s) |",
        f"| daemon exit code after SIGTERM at the end | {exit_code} (started {starts} time(s)) |",
        f"| seed | {seed} |",
        "",
        f"Run on {time.strftime('%Y-%m-%d')} with Python {sys.version.split()[0]} on a shared 2-core machine.",
    ]
    if t.examples:
        lines += ["", "Problems found:", ""] + [f"- {e}" for e in t.examples]
    lines.append(end)
    text = "\n".join(lines) + "\n"
    # Only this section is rewritten: other reliability runs report in the same file.
    old = path.read_text() if path.exists() else "# Reliability\n\n"
    if begin in old and end in old:
        head, rest = old.split(begin, 1)
        new = head + text.rstrip("\n") + rest.split(end, 1)[1]
    else:
        new = old.rstrip("\n") + "\n\n" + text
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(new)


def _markers(section: str) -> tuple[str, str]:
    # the report section keeps the name of the script that first wrote it
    name = f"bench.fuzz_protocol{' ' + section if section else ''}"
    return f"<!-- {name}: begin (generated) -->", f"<!-- {name}: end -->"


def main_fuzz(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.reliability fuzz", description=DOC_FUZZ.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--report", type=Path, default=REPORT)
    ap.add_argument("--section", default="", help="name of the report section to (re)write (default: the main one)")
    args = ap.parse_args(argv)
    t = long_run(args.cases, args.seed, args.report, args.section)
    print(
        f"{t.cases} cases, {t.exits} exits, {t.internal} answers of -32603, {t.failed_cases} cases with problems; "
        f"report: {args.report}"
    )
    return 0 if t.exits == 0 and t.internal == 0 and t.failed_cases == 0 else 1


# ==== crash (formerly bench/crash.py) =============================================================

DOC_CRASH = """Crash harness (issue 16): SIGKILL a real `autodoc` process at random points and
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

After every round: the lease is free (flock), `problems()` of bench/reliability.py
is empty (integrity_check, generations, no orphan rows), and the next index (a
Service in this process, `index` without embedding) leaves a store whose dump
equals a clean index of the same folder under the same stored config, and
whose lexical answers to a few queries are identical (order, spans, scores),
the order of equal scores included. The folder holds two identical files, and
the harness's store starts with a history a clean index lacks: one twin was
renamed after the first index, so its chunk ids sort the other way round
(search/ties.py orders such ties by path and ordinal, not ids).

    python -m bench.reliability crash --kills 100 --files 120 --seed 16

tests/e2e/test_crash.py runs a few rounds of the same code.
"""

OPS = ("index", "reindex", "embed", "switch", "configure", "schema")
# `live`: a daemon on the store (its catch-up index, its watcher, its embed queue when the model is
# on) killed while the folder changes under it; chosen with --ops (issue 36)
ALL_OPS = (*OPS, "live")
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
    "live": (1.0, 10.0),
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
class CrashTally:
    rounds: int = 0
    kills: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ALL_OPS, 0))
    completed: dict[str, int] = field(default_factory=lambda: dict.fromkeys(ALL_OPS, 0))
    corrupt: int = 0  # problems() right after the kill
    stale_lease: int = 0
    after_index: int = 0  # problems() after the next index
    wrong_state: int = 0  # dump differs from a clean index
    wrong_answers: int = 0  # lexical answers differ from a clean index, beyond the order of equal scores
    tie_order: int = 0  # answers differ only where BM25 scores are equal (ties broken unlike a clean index)
    tie_cut: int = 0  # ... and agree with the lexical leg uncut: a tie straddled the leg's LIMIT
    references: int = 0
    cached_vectors_max: int = 0
    orphans: int = 0  # kills after which a process the killed one started outlived it by ORPHAN_GRACE s
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
            + self.orphans
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
    LIMIT with `ORDER BY s, rowid` (store/lexical/matches.py), so a tie straddling the cut admits
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


ORPHAN_GRACE = 10.0


def _group_members(pgid: int) -> list[str]:
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat_ = (d / "stat").read_text()
        except OSError:
            continue
        fields = stat_.rsplit(")", 1)[1].split()  # after "pid (comm)": state, ppid, pgrp, ...
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(f"{d.name} {stat_.split('(', 1)[1].rsplit(')', 1)[0]}")
    return out


def outlived(pgid: int) -> list[str]:
    """The processes of a killed process's group still running ORPHAN_GRACE seconds on (parse
    workers, multiprocessing's resource_tracker): each must die with its parent (issue 36 Low 9)."""
    deadline = time.monotonic() + ORPHAN_GRACE
    while (left := _group_members(pgid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


class Harness:
    def __init__(self, base: Path, files: int, seed: int, ops: tuple[str, ...] = OPS, verbose: bool = True):
        self.base, self.ops, self.verbose = base, ops, verbose
        self.rng = random.Random(seed)
        self.folder = Folder(base / "kb", files, random.Random(seed + 1))
        self.store = base / "store" / "autodoc.db"
        self.refs: dict[tuple[str, str], tuple[dict, list, list]] = {}
        self.tally = CrashTally()
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
            return base + ["index", "--wait", "kb"]  # embedded here, killed mid-way: no daemon takes it
        if op == "reindex":
            return base + ["index", "--full", "--wait", "kb"]
        if op == "embed":
            if cfg.get("embedding", {}).get("provider") != "onnx":
                subprocess.run(
                    base + ["workspace", "configure", "kb", json.dumps({"embedding": ONNX})],
                    check=True,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
            return base + ["index", "--wait", "kb"]  # embedded here, killed mid-way: no daemon takes it
        if op == "switch":
            to = NONE if cfg.get("embedding", {}).get("provider") == "onnx" else ONNX
            return base + ["workspace", "configure", "kb", json.dumps({"embedding": to})]
        if op == "configure":
            n = self.rng.choice([s for s in SECTIONS if s != cfg.get("section_tokens")])
            return base + ["workspace", "configure", "kb", json.dumps({"section_tokens": n})]
        if op == "schema":
            self.folder.change_schema()
            return base + ["index", "--wait", "kb"]  # embedded here, killed mid-way: no daemon takes it
        if op == "live":  # the daemon, while _edit_burst changes the folder
            (self.base / "run").mkdir(mode=0o700, exist_ok=True)
            return base + ["serve", "--socket", str(self.base / "run" / "autodoc.sock")]
        raise ValueError(op)

    def _edit_burst(self, stop: threading.Event) -> None:
        """Edits, adds, deletes and renames every ~0.2 s until the daemon is killed."""
        while not stop.wait(self.rng.uniform(0.05, 0.4)):
            self.folder.change()

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
            start_new_session=True,  # its process group holds whatever it starts (parse workers, trackers)
        )
        stop = threading.Event()
        burst = threading.Thread(target=self._edit_burst, args=(stop,), daemon=True)
        if op == "live":
            burst.start()
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
        finally:
            stop.set()
            if burst.is_alive():
                burst.join()
        if proc.stderr:
            proc.stderr.close()
        t.rounds += 1
        what = f"round {t.rounds} {op} ({'killed' if killed else 'completed'} at {delay:.2f} s)"
        if left := outlived(proc.pid):
            t.orphans += 1
            t.note(f"{what}: {len(left)} process(es) it started still ran {ORPHAN_GRACE:.0f} s later: {left[:3]}")
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
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


def run_crash(
    kills: int, files: int, seed: int, ops: tuple[str, ...] = OPS, verbose: bool = True, max_rounds: int | None = None
) -> CrashTally:
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


def report_crash(t: CrashTally, args: argparse.Namespace) -> str:
    by_op = ", ".join(f"{op} {t.kills[op]}" for op in ALL_OPS if op in args.ops or t.kills[op])
    done = ", ".join(f"{op} {t.completed[op]}" for op in ALL_OPS if t.completed[op])
    m = machine_note()
    lines = [
        "## Crash harness",
        "",
        f"`python -m bench.reliability crash --kills {args.kills} --files {args.files} --seed {args.seed}"
        f"{'' if args.ops == ','.join(OPS) else ' --ops ' + args.ops}` (bench/reliability.py): "
        "SIGKILL of a real `autodoc` CLI process (in-process service on one store) at a random delay into "
        "index (after edits, adds, deletes, renames), full reindex, embed (bundled MiniLM), model switch "
        "(none ↔ onnx), configure (section size) and a frontmatter-schema change, or (`live`) of a daemon "
        "on the store (its catch-up index, watcher and embed queue) while the folder is edited every "
        "~0.2 s, as chosen by --ops. After each: the lease, "
        "`PRAGMA integrity_check` and the row invariants of bench/reliability.py; then the next index, and "
        "its store compared table by table (documents, chunks with spans and token counts, facets, links, "
        "skips) and by the lexical answers to 5 queries (paths, spans, scores, order, the order of equal "
        "scores included) with a clean index of the same folder under the same config. The folder holds two "
        "identical files, one renamed after the store's first index, so ties in the store and in a clean "
        "index are between chunks whose ids sort the other way round. tests/e2e/test_crash.py runs a short version.",
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
        f"match (a tie straddling the leg's LIMIT: store/lexical/matches.py) | {t.tie_cut} |",
        f"| kills after which a process the killed one started outlived it by {ORPHAN_GRACE:.0f} s (orphans) | {t.orphans} |",
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


def main_crash(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.reliability crash", description=DOC_CRASH.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--files", type=int, default=120)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--ops", default=",".join(OPS), help=f"the operations killed, of {','.join(ALL_OPS)}")
    ap.add_argument("--report", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    ops = tuple(args.ops.split(","))
    if unknown := set(ops) - set(ALL_OPS):
        ap.error(f"unknown --ops: {', '.join(sorted(unknown))}")
    t = run_crash(args.kills, args.files, args.seed, ops)
    # the report section keeps the name of the script that first wrote it
    replace_section(args.report, "bench.crash", report_crash(t, args))
    print(f"{t.rounds} rounds, {t.landed} kills, {t.failures} failures; report: {args.report}")
    return 0 if t.failures == 0 else 1


# ==== load (formerly bench/load.py) ===============================================================

DOC_LOAD = """Load run (issue 16): many clients over the daemon's real socket while a writer
changes the folder under the live index.

A daemon (`autodoc serve --socket`, temp store, a generated workspace indexed
without an embedding model) serves C clients, each on its own connection and
thread, sending R requests one at a time: search.query 50 %, document.read
20 %, workspace.status 15 %, changes.since 15 %. Meanwhile a writer adds,
edits, renames and deletes files (one operation every ~0.1 s), and a
subscriber (changes.subscribe) collects every pushed changes.changed.

Counted as errors: a transport failure, an error answer other than
document.not_found for a file the writer deleted or renamed meanwhile
(counted apart as `gone`), an answer that does not match its schema.
Change events: once the writer stops and the log is quiet, the log read from
the start must hold each writer operation exactly once, in order per file (add →
add, edit → modify, rename → rename with old_path, delete → delete) and
nothing else; the pushed feed must equal the log (no gaps, no duplicates);
each client's changes.since polling must have seen strictly increasing cursors.

    python -m bench.reliability load --clients 32 --requests 1000

tests/e2e/test_load.py runs a short version.
"""

LOAD_WORDS = (
    "lease recovery sqlite write ahead log checkpoint zebra migration rollback plan owner alice bob index "
    "chunk token window vector search ranking fusion daemon socket schema facet link generation cursor"
).split()
MIX = (("search.query", 50), ("document.read", 20), ("workspace.status", 15), ("changes.since", 15))
GONE = -32003  # document.not_found: the writer deleted or renamed the file between the pick and the read
LOAD_NO_MODEL = {"embedding": {"provider": "none"}}
QUIET = 3.0


class Conn:
    """One newline-framed connection; notifications are handed to `on_note`."""

    def __init__(self, path: Path, on_note=None):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(str(path))
        self.f = self.sock.makefile("rb")
        self.id = 0
        self.on_note = on_note

    def call(self, method: str, params: Any) -> dict:
        self.id += 1
        self.sock.sendall(
            json.dumps({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}).encode() + b"\n"
        )
        return self.read(self.id)

    def read(self, want: int | None) -> dict:
        while True:
            line = self.f.readline()
            if not line:
                raise ConnectionError("the daemon closed the connection")
            msg = json.loads(line)
            if "id" not in msg:
                if self.on_note:
                    self.on_note(msg)
                if want is None:
                    return msg
                continue
            if msg["id"] == want:
                return msg

    def close(self) -> None:
        try:
            self.f.close()
            self.sock.close()
        except OSError:
            pass


def save(path: Path, text: str) -> None:
    """As editors save: a hidden temp file renamed over the name. An in-place write
    is seen twice when the watcher catches it between truncate and write (the empty
    file, then the full one): two true changes, which would blur the count here."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _load_text(rng: random.Random, title: str) -> str:
    paras = "\n\n".join(" ".join(rng.choice(LOAD_WORDS) for _ in range(rng.randint(20, 80))) for _ in range(3))
    return f"# {title}\n\n{paras}\n"


@dataclass
class Result:
    clients: int
    requests: int
    latencies: dict[str, list[float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    invalid: int = 0
    gone: int = 0
    writer_ops: Counter = field(default_factory=Counter)
    log_entries: int = 0
    pushed: int = 0
    lost: int = 0
    duplicated: int = 0
    unexpected: int = 0
    polls_out_of_order: int = 0
    seconds: float = 0.0
    examples: list[str] = field(default_factory=list)


def run_load(
    clients: int,
    requests: int,
    files: int = 150,
    seed: int = 16,
    pause: float = 0.1,
    settle: float = 2.0,
    check_schemas: bool = True,
) -> Result:
    from autodoc.rpc import schemas

    base = Path(tempfile.mkdtemp(prefix="ad-load-", dir="/tmp"))
    rng = random.Random(seed)
    kb, store, sock = base / "kb", base / "s" / "autodoc.db", base / "run" / "d.sock"
    kb.mkdir()
    names = [f"n{i:04d}.md" for i in range(files)]
    for n in names:
        (kb / n).write_text(_load_text(rng, n))
    proc, why = start_daemon(store, sock)
    if proc is None:
        raise RuntimeError(why)
    res = Result(clients, requests)
    lock = threading.Lock()
    present = set(names)  # what the writer has on disk (clients read from it)
    try:
        admin = Conn(sock)
        admin.call("workspace.add", {"name": "kb", "root": str(kb), "config": LOAD_NO_MODEL})
        admin.call("workspace.index", {"workspace": "kb"})
        while "kb" not in admin.call("server.info", {})["result"]["watching"]:
            time.sleep(0.05)
        start_cursor = admin.call("workspace.status", {"workspace": "kb"})["result"]["change_cursor"]

        pushed: list[dict] = []
        sub = Conn(
            sock,
            on_note=lambda m: pushed.extend(m["params"]["changes"]) if m.get("method") == "changes.changed" else None,
        )
        sub.call("changes.subscribe", {"workspace": "kb"})

        def listen() -> None:  # until the socket is shut down below
            while True:
                try:
                    sub.read(None)
                except (OSError, ValueError):
                    return

        expected: list[tuple[str, str, str | None]] = []  # (op, path, old_path) in order
        writer_stop = threading.Event()

        def writer() -> None:
            wr = random.Random(seed + 1)
            serial = files
            touched: dict[str, float] = {}  # a file is not touched again within QUIET s: the live
            while not writer_stop.is_set():  # index may rightly fold two quick saves into one change
                now = time.monotonic()
                with lock:
                    have = sorted(n for n in present if now - touched.get(n, -QUIET) >= QUIET)
                op = wr.choice(("add", "edit", "edit", "rename", "delete")) if have else "add"
                if op == "add":
                    name = f"w{serial:05d}.md"
                    serial += 1
                    save(kb / name, _load_text(wr, name))
                    expected.append(("add", name, None))
                    with lock:
                        present.add(name)
                elif op == "edit":
                    name = wr.choice(have)
                    save(kb / name, _load_text(wr, name + " edited"))
                    expected.append(("modify", name, None))
                elif op == "rename":
                    name, new = wr.choice(have), f"r{serial:05d}.md"
                    serial += 1
                    with lock:
                        present.discard(name)
                    (kb / name).rename(kb / new)
                    expected.append(("rename", new, name))
                    with lock:
                        present.add(new)
                else:
                    name = wr.choice(have)
                    with lock:
                        present.discard(name)
                    (kb / name).unlink()
                    expected.append(("delete", name, None))
                touched[name] = touched[expected[-1][1]] = time.monotonic()
                res.writer_ops[op] += 1
                time.sleep(pause)

        def client(k: int) -> None:
            cr = random.Random(seed * 1000 + k)
            lat: dict[str, list[float]] = {m: [] for m, _ in MIX}
            cursor, last_seen = start_cursor, start_cursor
            try:
                c = Conn(sock)
            except OSError as e:
                with lock:
                    res.errors.append(f"client {k}: connect: {e}")
                return
            try:
                for _ in range(requests):
                    method = cr.choices([m for m, _ in MIX], [w for _, w in MIX])[0]
                    if method == "search.query":
                        params: Any = {
                            "workspace": "kb",
                            "query": " ".join(cr.sample(LOAD_WORDS, 2)),
                            "opts": {"limit": 10},
                        }
                    elif method == "document.read":
                        with lock:
                            path = cr.choice(sorted(present)) if present else names[0]
                        params = {"workspace": "kb", "path": path, "opts": {"line_start": 1, "line_end": 3}}
                    elif method == "workspace.status":
                        params = {"workspace": "kb"}
                    else:
                        params = {"workspace": "kb", "cursor": cursor, "limit": 100}
                    t0 = time.perf_counter()
                    msg = c.call(method, params)
                    lat[method].append(time.perf_counter() - t0)
                    if "error" in msg:
                        if method == "document.read" and msg["error"]["code"] == GONE:
                            with lock:
                                res.gone += 1
                            continue
                        with lock:
                            res.errors.append(f"{method} {json.dumps(params)[:120]}: {msg['error']}")
                        continue
                    if check_schemas and schemas.result_errors(method, msg["result"]):
                        with lock:
                            res.invalid += 1
                            res.errors.append(f"{method}: answer does not match its schema")
                    if method == "changes.since":
                        got = [ch["cursor"] for ch in msg["result"]["changes"]]
                        if got and (got[0] <= last_seen or got != sorted(set(got))):
                            with lock:
                                res.polls_out_of_order += 1
                        if got:
                            last_seen = got[-1]
                        cursor = msg["result"]["next_cursor"]
            except Exception as e:  # reported, never hidden
                with lock:
                    res.errors.append(f"client {k}: {type(e).__name__}: {e}"[:300])
            finally:
                c.close()
                with lock:
                    for m, xs in lat.items():
                        res.latencies.setdefault(m, []).extend(xs)

        listener = threading.Thread(target=listen)
        listener.start()
        w = threading.Thread(target=writer)
        t0 = time.perf_counter()
        w.start()
        threads = [threading.Thread(target=client, args=(k,)) for k in range(clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        res.seconds = time.perf_counter() - t0
        writer_stop.set()
        w.join()

        # quiet: the log stops growing (debounce and index done)
        log: list[dict] = []
        stable_since, last_len = time.monotonic(), -1
        while time.monotonic() - stable_since < settle:
            log, cur = [], start_cursor
            while True:
                r = admin.call("changes.since", {"workspace": "kb", "cursor": cur, "limit": 10000})["result"]
                log += r["changes"]
                cur = r["next_cursor"]
                if not r["has_more"]:
                    break
            if len(log) != last_len:
                stable_since, last_len = time.monotonic(), len(log)
            time.sleep(0.2)
        time.sleep(0.5)
        sub.sock.shutdown(socket.SHUT_RDWR)
        listener.join()
        sub.close()
        admin.close()

        res.log_entries, res.pushed = len(log), len(pushed)
        got = [(ch["op"], ch["path"], ch["old_path"]) for ch in log]
        missing = list((Counter(expected) - Counter(got)).elements())
        extra = list((Counter(got) - Counter(expected)).elements())
        res.lost, res.unexpected = len(missing), len(extra)
        if missing:
            res.examples.append(f"writer operations not in the log: {missing[:5]}")
        if extra:
            res.examples.append(f"log entries no writer operation explains: {extra[:5]}")

        # one debounced batch is logged in path order: the order that must hold is per file
        def per_file(entries: list[tuple[str, str, str | None]]) -> dict[str, list]:
            out: dict[str, list] = {}
            for e in entries:
                for p in {e[1], e[2]} - {None}:
                    out.setdefault(p, []).append(e)
            return out

        if not missing and not extra and per_file(got) != per_file(expected):
            res.examples.append("the log holds every operation but not in the writer's order for some file")
            res.unexpected += 1
        cursors = [ch["cursor"] for ch in pushed]
        res.duplicated = len(cursors) - len(set(cursors))
        log_cursors = [ch["cursor"] for ch in log]
        if sorted(set(cursors)) != log_cursors:
            gaps = sorted(set(log_cursors) - set(cursors))
            res.lost += len(gaps)
            res.examples.append(f"pushed feed lacks {len(gaps)} logged cursors, e.g. {gaps[:5]}")
    finally:
        stop_daemon(proc)
        shutil.rmtree(base, ignore_errors=True)
    return res


def ms(xs: list[float], p: float) -> str:
    return f"{percentile(xs, p) * 1000:.1f}" if xs else "-"


def report_load(r: Result, args: argparse.Namespace) -> str:
    m = machine_note()
    total = sum(len(v) for v in r.latencies.values())
    everything = [x for v in r.latencies.values() for x in v]
    lines = [
        "## Load: clients and a writer",
        "",
        f"`python -m bench.reliability load --clients {args.clients} --requests {args.requests} --files {args.files}` "
        "(bench/reliability.py): a real daemon on its Unix socket, a generated workspace indexed without an embedding "
        f"model; {args.clients} clients, each its own connection and thread, send {args.requests} requests one at "
        "a time (search.query 50 %, document.read 20 %, workspace.status 15 %, changes.since 15 %) while a "
        "writer adds, edits, renames and deletes files under the live index (one operation every ~0.1 s) and a "
        "subscriber collects the pushed changes. Every answer is checked against its schema. tests/e2e/test_load.py "
        "runs a short version.",
        "",
        "| figure | value |",
        "| --- | --- |",
        f"| requests answered | {total:,} in {r.seconds:.0f} s ({total / max(r.seconds, 1e-9):.0f}/s) |",
        f"| errors (transport, error answers, schema mismatches) | {len(r.errors)} |",
        f"| document.read of a file the writer had just removed (document.not_found, correct) | {r.gone} |",
        f"| writer operations | {sum(r.writer_ops.values())} ({', '.join(f'{k} {v}' for k, v in sorted(r.writer_ops.items()))}) |",
        f"| change-log entries after them | {r.log_entries} |",
        f"| pushed to the subscriber | {r.pushed} |",
        f"| lost change events (not logged, or logged and not pushed) | {r.lost} |",
        f"| duplicated change events | {r.duplicated} |",
        f"| log entries no operation explains, or out of order | {r.unexpected} |",
        f"| changes.since polls with a cursor going back | {r.polls_out_of_order} |",
        "",
        "| method | requests | p50 ms | p99 ms |",
        "| --- | --- | --- | --- |",
    ]
    for meth, _ in MIX:
        xs = r.latencies.get(meth, [])
        lines.append(f"| {meth} | {len(xs):,} | {ms(xs, 50)} | {ms(xs, 99)} |")
    lines.append(f"| all | {len(everything):,} | {ms(everything, 50)} | {ms(everything, 99)} |")
    lines += [
        "",
        f"Run on {time.strftime('%Y-%m-%d')} at {git_commit()} with Python {m['python']}, {m['nproc']} "
        f"cores (load {m['load'][0]}), shared with other jobs.",
    ]
    if r.errors or r.examples:
        lines += ["", "Problems found:", ""] + [f"- {e}" for e in (r.examples + r.errors)[:20]]
    return "\n".join(lines)


def main_load(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.reliability load", description=DOC_LOAD.split("\n\n")[0])
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--files", type=int, default=150)
    ap.add_argument("--seed", type=int, default=16)
    ap.add_argument("--report", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    r = run_load(args.clients, args.requests, args.files, args.seed)
    # the report section keeps the name of the script that first wrote it
    replace_section(args.report, "bench.load", report_load(r, args))
    bad = len(r.errors) + r.lost + r.duplicated + r.unexpected + r.polls_out_of_order
    print(
        f"{sum(len(v) for v in r.latencies.values())} requests, {len(r.errors)} errors, {r.lost} lost, "
        f"{r.duplicated} duplicated, {r.unexpected} unexpected; report: {args.report}"
    )
    return 0 if bad == 0 else 1


# ==== store_state (formerly bench/store_state.py) =================================================

# What a store holds, read straight from its SQLite file: invariants and a comparable dump.
#
# Used by bench/reliability.py (after every SIGKILL) and by the tests that compare a
# store with a fresh index of the same folder. Read-only: the file is opened
# read-only with apsw (a WAL store is still recovered by SQLite on open, as any reader would).
#
# `problems(path)` lists broken promises: integrity_check, rows from a generation
# after their document's or the store's, rows without a document (chunks, facets,
# links, FTS entries), chunks without an FTS entry, vectors without a workspace.
# `dump(path, workspace)` is everything an index derives from a folder, without
# ids, times or generations: two stores with equal dumps answer alike.


def _open(path: Path) -> apsw.Connection:
    db = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    db.setbusytimeout(30_000)
    return db


def problems(path: Path) -> list[str]:
    out: list[str] = []
    db = _open(path)
    try:
        check = [r[0] for r in db.execute("PRAGMA integrity_check")]
        if check != ["ok"]:
            out.append(f"integrity_check: {check[:5]}")
        queries = {
            # a chunk keeps the generation it was first written in while its text stays
            "chunks from a generation after their document's": "SELECT count(*) FROM chunks c JOIN documents d ON d.id=c.document_id WHERE c.generation > d.generation",
            "documents from a generation after the store's": "SELECT count(*) FROM documents WHERE generation > (SELECT CAST(value AS INTEGER) FROM meta "
            "WHERE key='generation')",
            "chunks without a document": "SELECT count(*) FROM chunks WHERE document_id NOT IN (SELECT id FROM documents)",
            "facets without a document": "SELECT count(*) FROM facets WHERE document_id NOT IN (SELECT id FROM documents)",
            "links without a document": "SELECT count(*) FROM links WHERE source_id NOT IN (SELECT id FROM documents)",
            "FTS entries without a chunk": "SELECT count(*) FROM chunks_fts_docsize WHERE id NOT IN (SELECT id FROM chunks)",
            "chunks without an FTS entry": "SELECT count(*) FROM chunks WHERE id NOT IN (SELECT id FROM chunks_fts_docsize)",
            "documents without a workspace": "SELECT count(*) FROM documents WHERE workspace_id NOT IN (SELECT id FROM workspaces)",
            "vectors without a workspace": "SELECT count(*) FROM vectors WHERE workspace_id NOT IN (SELECT id FROM workspaces)",
        }
        for what, sql in queries.items():
            n = db.execute(sql).fetchone()[0]
            if n:
                out.append(f"{n} {what}")
    finally:
        db.close()
    return out


def cached_vectors(path: Path) -> int:
    """Vectors whose text no chunk has any more: the content-addressed cache keeps
    them on purpose (a reverted edit or a rename back is not embedded again)."""
    db = _open(path)
    try:
        return db.execute(
            "SELECT count(*) FROM vectors v WHERE NOT EXISTS (SELECT 1 FROM chunks c WHERE "
            "c.workspace_id=v.workspace_id AND c.text_hash=v.text_hash)"
        ).fetchone()[0]
    finally:
        db.close()


def dump(path: Path, workspace: str) -> dict[str, Any]:
    db = _open(path)
    try:
        row = db.execute("SELECT id FROM workspaces WHERE name=?", (workspace,)).fetchone()
        if row is None:
            return {}
        ws = row[0]
        docs = db.execute(
            "SELECT path, content_hash, size, title, status, tags, aliases, frontmatter, supersedes, superseded_by, "
            "problems, schema_problems, line_count FROM documents WHERE workspace_id=? ORDER BY path",
            (ws,),
        ).fetchall()
        chunks = db.execute(
            "SELECT d.path, c.ordinal, c.kind, c.breadcrumb, c.text_hash, c.byte_start, c.byte_end, c.line_start, "
            "c.line_end, c.tokens FROM chunks c JOIN documents d ON d.id=c.document_id WHERE c.workspace_id=? "
            "ORDER BY d.path, c.ordinal",
            (ws,),
        ).fetchall()
        facets = db.execute(
            "SELECT d.path, f.field, f.value, f.num, f.date FROM facets f JOIN documents d ON d.id=f.document_id "
            "WHERE f.workspace_id=? ORDER BY 1, 2, 3, 4, 5",
            (ws,),
        ).fetchall()
        links = db.execute(
            "SELECT d.path, l.target, l.kind, l.line, l.label, l.anchor, l.target_path FROM links l "
            "JOIN documents d ON d.id=l.source_id WHERE l.workspace_id=? ORDER BY 1, 2, 3, 4, 5, 6, 7",
            (ws,),
        ).fetchall()
        skipped = db.execute("SELECT path, reason FROM skipped WHERE workspace_id=? ORDER BY path", (ws,)).fetchall()
        return {"documents": docs, "chunks": chunks, "facets": facets, "links": links, "skipped": skipped}
    finally:
        db.close()


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """What differs between two dumps, one line per table (counts, then the first differing row)."""
    out = []
    for table in sorted(set(a) | set(b)):
        x, y = a.get(table, []), b.get(table, [])
        if x != y:
            first = next((f"{p!r} != {q!r}" for p, q in zip(x, y) if p != q), "one is a prefix of the other")
            out.append(f"{table}: {len(x)} vs {len(y)} rows; first difference {first[:300]}")
    return out


def bm25(path: Path, workspace: str, query: str) -> dict[tuple[str, int], float]:
    """The raw FTS5 BM25 score (the lexical leg's column weights) of every chunk matching any
    word of query, by (document path, ordinal): what the lexical ranking is a function of,
    but for the order among equal scores."""
    words = " OR ".join(f'"{w}"' for w in query.split())
    db = _open(path)
    try:
        rows = db.execute(
            "SELECT d.path, c.ordinal, bm25(chunks_fts, 3.0, 2.0, 2.0, 1.0) FROM chunks_fts "
            "JOIN chunks c ON c.id=chunks_fts.rowid JOIN documents d ON d.id=c.document_id "
            "JOIN workspaces w ON w.id=d.workspace_id WHERE w.name=? AND chunks_fts MATCH ?",
            (workspace, words),
        ).fetchall()
        return {(p, o): s for p, o, s in rows}
    finally:
        db.close()


# ==== the harness ===================================================================================

CASES = [
    BenchCase("fuzz", main_fuzz, DOC_FUZZ),
    BenchCase("crash", main_crash, DOC_CRASH),
    BenchCase("load", main_load, DOC_LOAD),
    BenchCase("generative", main_generative, DOC_GENERATIVE),
]


def main(argv: list[str] | None = None) -> int:
    return harness("python -m bench.reliability", __doc__ or "", CASES, argv)


if __name__ == "__main__":
    sys.exit(main())
