"""Protocol fuzzing against a real daemon: frames, envelopes and every method's
params, generated with hypothesis, sent over a real Unix socket.

    python -m bench.fuzz_protocol --cases 100000     # writes docs/benchmarks/reliability.md

Each case is a fresh connection: the case's bytes (one to three frames in one
framing, mutated), then a sentinel ``server.info`` request in the same
framing, then a half-close; the daemon answers everything it read and closes.
A case passes when the daemon is still running, every answer is a valid
JSON-RPC 2.0 response (or a server notification), no answer is -32603, and
the sentinel is answered with a result — unless the case lied about a
Content-Length in a way that legitimately swallows what follows.

The same generators drive tests/test_protocol_fuzz.py at a CI budget.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from autodoc.rpc import schemas
from autodoc.rpc.framing import CONTENT_LENGTH, NEWLINE, Frame, FrameDecoder, FrameError
from autodoc.rpc.transport import socket_answers

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpora" / "kb"
REPORT = ROOT / "docs" / "benchmarks" / "reliability.md"
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
        "`python -m bench.fuzz_protocol --cases N` drives a real daemon (`autodoc serve --socket`,",
        "a temp store, `tests/corpora/kb` indexed without an embedding model, answers checked",
        "against their schemas with `AUTODOC_CHECK_RESULTS=1`, 64 KiB frame limit so oversized",
        "frames are cheap) over its Unix socket with hypothesis-generated cases: frames in both",
        "framings with lying `Content-Length` headers, envelopes (batches, nested batches,",
        "repeated ids, ids of every JSON type, raw `NaN`/`1e999999`/deep nesting), and every",
        "method's params generated from its schema with hostile values (NUL, lone surrogates,",
        "huge integers, 5,000-character strings). Each case is one connection, followed by a",
        "`server.info` that must still be answered. tests/test_protocol_fuzz.py runs the same",
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
    name = f"bench.fuzz_protocol{' ' + section if section else ''}"
    return f"<!-- {name}: begin (generated) -->", f"<!-- {name}: end -->"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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


if __name__ == "__main__":
    sys.exit(main())
