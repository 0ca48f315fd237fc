"""Entry-point latency (issue 37): how long each way in takes from exec to its first useful
answer, every figure beside a bare `python -c pass` measured in the same rounds.

    python -m bench.entry                  # docs/benchmarks/entry.{md,json}
    python -m bench.entry --runs 20 --corpus foam-docs
    python -m bench.entry --out -          # print only

What is timed, each from `Popen` (so the interpreter's start is in every figure, as a user feels
it) with the same interpreter as the baseline:

- `autodoc --version`, `autodoc --help`: until the process exits;
- `autodoc search -w WS QUERY` through a running daemon, a keyword query and a sentence: until
  the process exits (the daemon holds a store of one real corpus, fully embedded);
- `autodoc mcp`: until the answer to `initialize`, and to `tools/list` sent right after it (the
  `notifications/initialized` between them, as an SDK client sends); with the daemon running
  and with none (the server then serves the store itself);
- `autodoc lsp`: until the answer to `initialize`, with the daemon and with none;
- `autodoc tui` in a pseudo-terminal (120×40): until the screen shows the search field's
  placeholder ("type to search"), the first frame a person sees;
- `autodoc index WS` with no daemon, on a fresh store of the same corpus: until the command
  returns (the lexical index done and the embedding handed to a daemon started for it).

Each round runs every case once, the baseline first and the cases in a rotating order; a round's
processes run one at a time. The report gives the median and p90 of each, the ratio of the
medians to the baseline's, and the machine's load average at the start and the end (other work
on the machine slows every process alike, so the ratio is the figure that carries over).

The store (a workspace of `../shared/data/corpora/CORPUS`, embedded by the daemon) is cached in
`<bench cache>/entry/CORPUS/`; the daemon's socket and the tools' state live in a temp folder.
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .common import (
    DEFAULT_DATA,
    RESULTS,
    Case,
    SocketClient,
    cache_root,
    command_line,
    git_commit,
    harness,
    log,
    machine_note,
    percentile,
    start_daemon,
    stop_daemon,
)

TARGETS_MS = {  # issue 37, on this machine when quiet
    "version": 100,
    "help": 100,
    "search keywords (daemon)": 150,
    "search sentence (daemon)": 150,
    "mcp initialize (daemon)": 500,
    "mcp tools/list (daemon)": 500,
    "mcp initialize (no daemon)": 500,
    "mcp tools/list (no daemon)": 500,
    "lsp initialize (daemon)": 500,
    "lsp initialize (no daemon)": 500,
    "tui first frame (daemon)": 1000,
}
KEYWORDS = "wiki links"
SENTENCE = "how do I create a daily note from a template"
TUI_MARK = b"type to search"
_ANSI = re.compile(rb"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b[=>]|\x1b\][^\x07]*\x07")
PROBE_TIMEOUT_S = 60.0


def autodoc_argv() -> list[str]:
    """The console script beside this interpreter (what a user runs), else `python -m autodoc.cli`."""
    exe = Path(sys.executable).with_name("autodoc")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "autodoc.cli"]


# -- the probes: each returns {event: seconds since Popen} ---------------------------------------


def until_exit(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    t0 = time.perf_counter()
    p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=PROBE_TIMEOUT_S)
    took = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"{argv[1:]} exited {p.returncode}: {p.stderr.decode(errors='replace')[-400:]}")
    return {"exit": took}


def _frame(kind: str, msg: dict[str, Any]) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body if kind == "lsp" else body + b"\n"


class _Reader:
    """Messages off a child's stdout in either framing, with a deadline."""

    def __init__(self, fd: int, kind: str):
        self.fd, self.kind, self.buf = fd, kind, b""

    def next(self, deadline: float) -> dict[str, Any]:
        while True:
            if self.kind == "mcp" and b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                return json.loads(line)
            if self.kind == "lsp" and b"\r\n\r\n" in self.buf:
                head, rest = self.buf.split(b"\r\n\r\n", 1)
                n = next(int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length"))
                if len(rest) >= n:
                    self.buf = rest[n:]
                    return json.loads(rest[:n])
            left = deadline - time.perf_counter()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                raise TimeoutError("no answer")
            data = os.read(self.fd, 1 << 16)
            if not data:
                raise EOFError("the server closed its stdout")
            self.buf += data

    def answer(self, rid: int, deadline: float) -> dict[str, Any]:
        while (msg := self.next(deadline)).get("id") != rid or "method" in msg:
            pass
        if "error" in msg:
            raise RuntimeError(f"error answer: {msg['error']}")
        return msg


MCP_INIT = {
    "protocolVersion": "2025-06-18",
    "capabilities": {},
    "clientInfo": {"name": "bench.entry", "version": "1"},
}
LSP_INIT = {"processId": None, "rootUri": None, "capabilities": {}, "clientInfo": {"name": "bench.entry"}}


def stdio_server(kind: str, argv: list[str], env: dict[str, str], errlog: Path) -> dict[str, float]:
    t0 = time.perf_counter()
    with open(errlog, "ab") as err:
        p = subprocess.Popen(argv, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    assert p.stdin is not None and p.stdout is not None
    out: dict[str, float] = {}
    try:
        deadline = t0 + PROBE_TIMEOUT_S
        rd = _Reader(p.stdout.fileno(), kind)
        init = MCP_INIT if kind == "mcp" else LSP_INIT
        p.stdin.write(_frame(kind, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": init}))
        p.stdin.flush()
        rd.answer(1, deadline)
        out["initialize"] = time.perf_counter() - t0
        if kind == "mcp":
            p.stdin.write(_frame(kind, {"jsonrpc": "2.0", "method": "notifications/initialized"}))
            p.stdin.write(_frame(kind, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
            p.stdin.flush()
            tools = rd.answer(2, deadline)["result"]["tools"]
            out["tools/list"] = time.perf_counter() - t0
            if not tools:
                raise RuntimeError("tools/list answered no tool")
        else:
            p.stdin.write(_frame(kind, {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}))
            p.stdin.write(_frame(kind, {"jsonrpc": "2.0", "method": "exit"}))
            p.stdin.flush()
        p.stdin.close()
        p.wait(PROBE_TIMEOUT_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return out


def tui_first_frame(argv: list[str], env: dict[str, str]) -> dict[str, float]:
    t0 = time.perf_counter()
    pid, fd = pty.fork()
    if pid == 0:  # the child: the app in a 120×40 terminal
        os.execvpe(argv[0], argv, {**env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"})
    import fcntl
    import struct
    import termios

    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    buf, seen = b"", None
    try:
        deadline = t0 + PROBE_TIMEOUT_S
        while seen is None and time.perf_counter() < deadline:
            if not select.select([fd], [], [], 0.05)[0]:
                continue
            try:
                data = os.read(fd, 1 << 16)
            except OSError:
                break
            if not data:
                break
            buf += data
            if TUI_MARK in _ANSI.sub(b"", buf):
                seen = time.perf_counter() - t0
        if seen is None:
            raise RuntimeError(f"the TUI showed no search field: {_ANSI.sub(b'', buf)[-300:]!r}")
        os.write(fd, b"\x11")  # ctrl+q, then whatever the app still writes is drained until it exits
        end = time.monotonic() + 10
        while time.monotonic() < end and os.waitpid(pid, os.WNOHANG) == (0, 0):
            if select.select([fd], [], [], 0.05)[0]:
                try:
                    os.read(fd, 1 << 16)
                except OSError:
                    pass
    finally:
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
        os.close(fd)
    return {"first frame": seen}


# -- the store -------------------------------------------------------------------------------------


def ensure_store(corpus: Path, store: Path, sock: Path, workspace: str, wait_s: float) -> dict[str, Any]:
    """The daemon on the cached store, the corpus added, indexed and fully embedded."""
    store.parent.mkdir(parents=True, exist_ok=True)
    p, why = start_daemon(store, sock)
    if p is None:
        raise SystemExit(why)
    c = SocketClient(sock)
    try:
        if workspace not in {w["name"] for w in c.call("workspace.list", {})["workspaces"]}:
            c.call("workspace.add", {"name": workspace, "root": str(corpus)})
        c.call("workspace.index", {"workspace": workspace})
        t0 = time.monotonic()
        while True:
            st = c.call("workspace.status", {"workspace": workspace})
            emb = st["embedding"]
            if emb.get("state") == "ready" and not emb.get("pending"):
                break
            if time.monotonic() - t0 > wait_s:
                raise SystemExit(f"the daemon did not embed {workspace} within {wait_s:.0f} s: {emb}")
            log(f"  embedding {emb.get('embedded')}/{emb.get('total')} …")
            time.sleep(5)
        return {"daemon": p, "files": st["files"], "chunks": st["chunks"]}
    except BaseException:
        stop_daemon(p)
        raise
    finally:
        c.close()


# -- rounds ------------------------------------------------------------------------------------------


Probe = Callable[[], dict[str, float]]


def rounds(probes: dict[str, Probe], runs: int) -> dict[str, list[float]]:
    """Each probe once per round, `python -c pass` first and the others in a rotating order."""
    out: dict[str, list[float]] = {}
    names = [n for n in probes if n != "pass"]
    for r in range(runs):
        k = r % max(1, len(names))
        for name in ["pass", *names[k:], *names[:k]]:
            for event, s in probes[name]().items():
                out.setdefault(_label(name, event), []).append(s)
    return out


def _label(name: str, event: str) -> str:
    """'mcp (daemon)' + 'initialize' → 'mcp initialize (daemon)'; a probe of one event keeps its name."""
    if event in ("exit", "first frame"):
        return name
    head, _, where = name.partition(" (")
    return f"{head} {event}" + (f" ({where}" if where else "")


def summary(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    base = percentile(times["pass"], 50)
    res = {}
    for label, xs in times.items():
        p50 = percentile(xs, 50)
        res[label] = {
            "n": len(xs),
            "p50_ms": round(p50 * 1000, 1),
            "p90_ms": round(percentile(xs, 90) * 1000, 1),
            "min_ms": round(min(xs) * 1000, 1),
            "x_pass": round(p50 / base, 2) if base else float("nan"),
        }
    return res


def main_entry(argv: list[str] | None = None) -> int:
    """Entry points against `python -c pass` (issue 37): --version, --help, search through a
    daemon, mcp and lsp to their first answers, the TUI's first frame, index's return."""
    ap = argparse.ArgumentParser(prog="python -m bench.entry", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=15, help="rounds (each case once per round)")
    ap.add_argument("--corpus", default="foam-docs", help="a folder of ../shared/data/corpora, or a folder's path")
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--embed-wait", type=float, default=3600.0, help="seconds to wait for the store's embedding")
    ap.add_argument("--no-index", action="store_true", help="skip the `autodoc index` case (it embeds a fresh store)")
    ap.add_argument(
        "--compare",
        metavar="JSON",
        help="an earlier run's JSON (the code before a change, run with PYTHONPATH and AUTODOC_BENCH_COMMIT as "
        "README.md says): its p50 and × pass beside this run's",
    )
    ap.add_argument("--out", default=str(RESULTS / "entry.md"))
    a = ap.parse_args(argv)
    corpus = Path(a.corpus) if os.sep in a.corpus else Path(a.data) / "corpora" / a.corpus
    if not corpus.is_dir():
        raise SystemExit(f"no corpus at {corpus}")
    ws = re.sub(r"[^a-z0-9]+", "-", corpus.name.lower()).strip("-")[:40] or "kb"
    store = cache_root() / "entry" / corpus.name / "autodoc.db"
    tmp = Path(tempfile.mkdtemp(prefix="adentry-"))  # short: a socket path must fit in 104 bytes
    sock = tmp / "d.sock"
    env = {
        **os.environ,
        "AUTODOC_STORE": str(store),
        "AUTODOC_SOCKET": str(sock),
        "XDG_STATE_HOME": str(tmp / "state"),
        "XDG_RUNTIME_DIR": str(tmp),
    }
    env.pop("AUTODOC_LOG", None)
    res: dict[str, Any] = {
        "command": command_line(),
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%d %H:%M"),
        "machine": machine_note(),
        "runs": a.runs,
        "corpus": corpus.name,
    }
    ad = autodoc_argv()
    py = [sys.executable, "-c", "pass"]
    errlog = tmp / "servers.log"
    try:
        log(f"store {store}: the daemon embeds {a.corpus} …")
        built = ensure_store(corpus, store, sock, ws, a.embed_wait)
        res["store"] = {"files": built["files"], "chunks": built["chunks"]}
        daemon = built["daemon"]
        try:
            with_daemon: dict[str, Probe] = {
                "pass": lambda: until_exit(py, env),
                "version": lambda: until_exit([*ad, "--version"], env),
                "help": lambda: until_exit([*ad, "--help"], env),
                "search keywords (daemon)": lambda: until_exit([*ad, "search", "-w", ws, KEYWORDS], env),
                "search sentence (daemon)": lambda: until_exit([*ad, "search", "-w", ws, SENTENCE], env),
                "mcp (daemon)": lambda: stdio_server("mcp", [*ad, "mcp"], env, errlog),
                "lsp (daemon)": lambda: stdio_server("lsp", [*ad, "lsp"], env, errlog),
                "tui first frame (daemon)": lambda: tui_first_frame([*ad, "tui", "-w", ws], env),
            }
            log(f"{a.runs} rounds with the daemon running …")
            daemon_times = rounds(with_daemon, a.runs)
        finally:
            stop_daemon(daemon)
        without: dict[str, Probe] = {
            "pass": lambda: until_exit(py, env),
            "mcp (no daemon)": lambda: stdio_server("mcp", [*ad, "mcp"], env, errlog),
            "lsp (no daemon)": lambda: stdio_server("lsp", [*ad, "lsp"], env, errlog),
        }
        log(f"{a.runs} rounds with no daemon …")
        alone_times = rounds(without, a.runs)
        res["with_daemon"] = summary(daemon_times)
        res["no_daemon"] = summary(alone_times)
        if not a.no_index:
            res["index"] = index_handoff(corpus, ws, tmp, env, ad)
    finally:
        res["load_end"] = [round(x, 2) for x in os.getloadavg()]
        shutil.rmtree(tmp, ignore_errors=True)
    if a.compare:
        res["compare"] = json.loads(Path(a.compare).read_text())
        res["compare"]["path"] = a.compare
    text = render(res)
    if a.out != "-":
        Path(a.out).write_text(text)
        Path(a.out).with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    print(text)
    return 0


def index_handoff(corpus: Path, ws: str, tmp: Path, env: dict[str, str], ad: list[str]) -> dict[str, Any]:
    """`autodoc index` with no daemon on a fresh store: the time until it returns, what it printed,
    and whether a daemon then holds the store and embeds."""
    store = tmp / "fresh" / "autodoc.db"
    fresh_env = {**env, "AUTODOC_STORE": str(store), "AUTODOC_SOCKET": str(tmp / "f.sock")}
    until_exit([*ad, "workspace", "add", ws, str(corpus)], fresh_env)
    t0 = time.perf_counter()
    p = subprocess.run([*ad, "index", ws], env=fresh_env, capture_output=True, text=True, timeout=3600)
    took = time.perf_counter() - t0
    out = {"seconds": round(took, 2), "rc": p.returncode, "stdout": p.stdout.strip().splitlines()}
    try:
        st = json.loads(
            subprocess.run(
                [*ad, "--call", "workspace.status", json.dumps({"workspace": ws})],
                env=fresh_env,
                capture_output=True,
                text=True,
                timeout=60,
            ).stdout
        )
        out["embedding_after"] = {k: st["embedding"].get(k) for k in ("state", "embedded", "total")}
    except (json.JSONDecodeError, KeyError):
        out["embedding_after"] = None
    subprocess.run(
        [*ad, "--call", "server.shutdown", "{}"], env=fresh_env, capture_output=True, timeout=60
    )  # the daemon `index` started, if it did
    _stop_holder(store)  # and if the call reached none (it was still starting), not left running
    return out


def _stop_holder(store: Path, wait_s: float = 10.0) -> None:
    """The daemon holding `store`'s lease, gone: asked by SIGTERM, then killed at the deadline."""
    from autodoc.store.lease import read_holder

    holder = read_holder(store)
    pid = int(holder["pid"]) if holder and holder.get("pid") else None
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if pid is None:
            return
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)


def render(res: dict[str, Any]) -> str:
    m = res["machine"]
    lines = [
        "# Entry-point latency",
        "",
        f"`{res['command']}` · commit {res['commit']} · {res['date']} · {m['nproc']} cores, {m['cpu']} · "
        f"Python {m['python']} · load average {m['load']} at the start, {res['load_end']} at the end",
        "",
        f"{res['runs']} rounds; each figure is from `Popen` to the event, the interpreter's start included; "
        "`× pass` is the median over the median of a bare `python -c pass` in the same rounds (the figure "
        "that carries over between a loaded and a quiet machine). Targets (issue 37) are for this machine "
        f"when quiet. Store: `{res['corpus']}`, {res.get('store', {}).get('files', {}).get('indexed', '?')} "
        f"files, {res.get('store', {}).get('chunks', '?')} chunks, fully embedded.",
        "",
    ]
    before = res.get("compare")
    if before:
        bm = before["machine"]
        lines += [
            f"Beside it, the run of `{before['path']}`: commit {before['commit']}, {before['date']}, load average "
            f"{bm['load']} at its start and {before['load_end']} at its end, {before['runs']} rounds.",
            "",
        ]
    head = "| entry | p50 ms | p90 ms | min ms | × pass | target ms |"
    rule = "|---|---:|---:|---:|---:|---:|"
    if before:
        head, rule = head + " before: p50 ms | before: × pass |", rule + "---:|---:|"
    lines += [head, rule]
    for part in ("with_daemon", "no_daemon"):
        for label, s in res.get(part, {}).items():
            row = f"| {label if label != 'pass' or part == 'with_daemon' else 'pass (no-daemon rounds)'} | "
            row += f"{s['p50_ms']} | {s['p90_ms']} | {s['min_ms']} | {s['x_pass']} | {TARGETS_MS.get(label) or ''} |"
            if before:
                b = before.get(part, {}).get(label)
                row += f" {b['p50_ms']} | {b['x_pass']} |" if b else " | |"
            lines.append(row)
    if "index" in res:
        ix = res["index"]
        lines += [
            "",
            "## `autodoc index` with no daemon running",
            "",
            f"A fresh store of the same corpus: the command returned after {ix['seconds']} s (exit {ix['rc']}); "
            f"the embedding right after: {ix.get('embedding_after')}. It printed:",
            "",
            "```",
            *ix["stdout"],
            "```",
        ]
        bx = (before or {}).get("index")
        if bx:
            lines += [
                "",
                f"Before ({before['commit']}): it returned after {bx['seconds']} s, the embedding then "
                f"{bx.get('embedding_after')}; it printed:",
                "",
                "```",
                *bx["stdout"],
                "```",
            ]
    return "\n".join(lines) + "\n"


CASES = [Case("entry", main_entry, main_entry.__doc__ or "")]


def main(argv: list[str] | None = None) -> int:
    return harness("python -m bench.entry", __doc__ or "", CASES, argv, default="entry")


if __name__ == "__main__":
    sys.exit(main())
