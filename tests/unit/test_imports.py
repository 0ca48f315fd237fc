"""`autodoc --version` and `--help` load none of the heavy packages (issue 33: `import autodoc.cli`
stays fast). A structural test, not a timed one: it lists what a fresh interpreter has loaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = {"numpy", "onnxruntime", "tokenizers", "textual", "mcp", "apsw", "jsonschema", "pygls", "yaml"}
HEAVY_MODULES = {"autodoc.store.store", "autodoc.service", "autodoc.ingest"}

PROBE = """
import contextlib, io, json, sys
import autodoc.cli
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    autodoc.cli.main(ARGV)
print(json.dumps(sorted(sys.modules)))
"""


def _loaded(argv: list[str]) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.replace("ARGV", repr(argv))], capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["search", "--help"], ["mcp", "--help"]])
def test_version_and_help_load_nothing_heavy(argv):
    loaded = _loaded(argv)
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []
    assert sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HEAVY_MODULES)) == []


def test_import_cli_loads_nothing_heavy():
    loaded = _loaded([])  # no command: the help, printed to the redirected stdout
    assert sorted(m for m in loaded if m.split(".")[0] in HEAVY) == []
