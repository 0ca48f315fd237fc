"""`autodoc --version` and `--help` load none of the heavy packages (issue 33: `import autodoc.cli`
stays fast), and a command a running daemon answers loads none of what the daemon does for it
(issue 37: `autodoc search` through a daemon). Structural tests, not timed ones: each lists what a
fresh interpreter has loaded."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from conftest import CORPORA, NO_MODEL
from helpers.daemon import Daemon

HEAVY = {"numpy", "onnxruntime", "tokenizers", "textual", "mcp", "apsw", "jsonschema", "pygls", "yaml"}
HEAVY_MODULES = {"autodoc.store.store", "autodoc.service", "autodoc.ingest"}
# what only the process that serves the store needs, or an event loop a one-shot call does not
SERVED = HEAVY | {"anyio", "asyncio", "sqlite3", "fastjsonschema", "watchfiles", "pathspec"}
SERVED_MODULES = HEAVY_MODULES | {"autodoc.rpc.schemas", "autodoc.search", "autodoc.embed", "autodoc_client"}

PROBE = """
import contextlib, io, json, sys
import autodoc.cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    autodoc.cli.main(ARGV)
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(argv: list[str], env: dict[str, str] | None = None) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.replace("ARGV", repr(argv))], capture_output=True, text=True, timeout=60, env=env
    )
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def _heavy(loaded: set[str], roots: set[str], modules: set[str]) -> list[str]:
    return sorted(
        m for m in loaded if m.split(".")[0] in roots or any(m == h or m.startswith(h + ".") for h in modules)
    )


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["search", "--help"], ["mcp", "--help"]])
def test_version_and_help_load_nothing_heavy(argv):
    loaded = _loaded(argv)
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []
    assert sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY_MODULES)) == []


def test_import_cli_loads_nothing_heavy():
    loaded = _loaded([])  # no command: the help, printed to the redirected stdout
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []


@pytest.fixture(scope="module")
def daemon_env():
    """A daemon serving a copy of tests/corpora/kb (no model), and the env that points a CLI at it."""
    base = Path(tempfile.mkdtemp(prefix="ad-", dir="/tmp"))
    shutil.copytree(CORPORA / "kb", base / "kb", symlinks=True)
    d = Daemon(base).start()
    try:
        d.call("workspace.add", {"name": "kb", "root": str(base / "kb"), "config": NO_MODEL})
        d.call("workspace.index", {"workspace": "kb"})
        yield {**d.env, "AUTODOC_LOG": "WARNING"}
    finally:
        d.close()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.parametrize(
    "argv",
    [
        ["search", "-w", "kb", "lease"],
        ["search", "-w", "kb", "how does the store keep a second writer out"],
        ["search", "--json", "lease"],  # every workspace: workspace.list first
        ["search", "-w", "kb", "--compact", "lease"],
        ["read", "kb", "index.md", "--lines", "1-3"],
        ["workspace", "list"],
    ],
)
def test_a_call_through_the_daemon_loads_nothing_the_daemon_does(daemon_env, argv):
    """An agent that shells out to the CLI pays the start of every call: through a running daemon
    the command sends its call and prints the answer, with no store, model, schema check or event loop."""
    loaded = _loaded(argv, daemon_env)
    assert _heavy(loaded, SERVED, SERVED_MODULES) == []
    assert os.path.exists(daemon_env["AUTODOC_SOCKET"])


def test_the_mcp_servers_first_answers_need_no_sdk():
    """`autodoc mcp` answers initialize and tools/list from mcp/fast.py while the SDK loads."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, autodoc.cli, autodoc.mcp.fast; print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout))
    assert _heavy(loaded, SERVED | {"pydantic", "mcp_types"}, SERVED_MODULES | {"autodoc.mcp.server"}) == []


def test_the_language_servers_first_answer_needs_no_pygls():
    """`autodoc lsp` answers initialize from lsp/fast.py while pygls and lsprotocol load."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, sys, autodoc.cli, autodoc.lsp.fast; print(json.dumps(sorted(sys.modules)))",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout))
    assert _heavy(loaded, SERVED | {"lsprotocol", "cattrs", "attrs"}, SERVED_MODULES | {"autodoc.lsp.server"}) == []
