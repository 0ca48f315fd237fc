"""Issue 36, generative test (b): no file the product reads, of any kind, stops the others.

hypothesis builds workspaces (bench/generative.py `files_worlds`): three ordinary
notes beside generated hostile files — notes whose frontmatter holds unicode
digits, numbers past int()'s 4,300 digits, lone surrogates, deep nesting, odd
YAML tags, impossible dates, long strings; `.gitignore` files;
`_schema/frontmatter.yaml`; a session transcript — each a generated kind: a
regular file, invalid UTF-8, a file growing while read, a FIFO, a socket, a
symlink to /dev/zero or /dev/urandom, a symlink loop, a dangling link, a
folder, an unreadable file, a sparse 2 GiB file. Each world is added to one
real daemon and indexed; the ordinary notes must be indexed, readable and
found, a note saved afterwards must reach the live index in the same batch as
the hostile notes, the transcript must be read or refused (never hang), and
the daemon must still take a write to another workspace; no answer -32603.

AUTODOC_FILES_EXAMPLES sets the number of worlds (default 4, for make test's
budget); `python -m bench.reliability generative` runs thousands.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from bench.generative import NO_MODEL, FilesWorld, call, check_files_world, files_worlds

EXAMPLES = int(os.environ.get("AUTODOC_FILES_EXAMPLES", "4"))

pytestmark = pytest.mark.slow  # a real daemon and a few seconds per world


@pytest.fixture(scope="module")
def daemon():
    from helpers.daemon import Daemon

    base = Path(tempfile.mkdtemp(prefix="ad-files-", dir="/tmp"))
    d = Daemon(base)
    try:
        d.start()
        (base / "ctl").mkdir()
        assert call(d.sock, "workspace.add", {"name": "ctl", "root": str(base / "ctl"), "config": NO_MODEL}).ok
        yield d, base
        assert d.running(), d.log_text()[-3000:]
        assert d.stop() == 0, d.log_text()[-3000:]
    finally:
        d.close()
        shutil.rmtree(base, ignore_errors=True)


def test_an_ordinary_world_passes(daemon):
    """The check itself, on a world of plain files: it must pass, or the property below proves nothing."""
    from bench.generative import Slot

    d, base = daemon
    plain = FilesWorld(
        (
            Slot("hostile/n0.md", "regular", b"# n\n\nplain\n"),
            Slot("hostile/.gitignore", "regular", b"nothing\n"),
            Slot(".gitignore", "regular", b"hostile/ignored.md\n"),
            Slot("_schema/frontmatter.yaml", "regular", b"version: 1\ncommon:\n  adr: integer\n"),
            Slot("../transcript.jsonl", "regular", b'{"role": "user", "content": "hello"}\n'),
        )
    )
    assert check_files_world(d.sock, base, 0, plain, "ctl") == []


def test_the_check_sees_a_note_that_is_not_indexed(daemon):
    """An ordinary note refused (here made a FIFO after the world is written) is reported."""
    from bench import generative
    from bench.generative import Slot

    d, base = daemon
    world = FilesWorld((Slot("good/c.md", "fifo", b""), Slot("../transcript.jsonl", "regular", b"")))
    original = dict(generative.GOOD)
    try:
        del generative.GOOD["good/c.md"]  # write_world leaves it to the slot: a FIFO
        problems = check_files_world(d.sock, base, 1, world, "ctl")
    finally:
        generative.GOOD.clear()
        generative.GOOD.update(original)
    assert any("good/c.md" in p for p in problems), problems


_COUNTER = iter(range(2, 1 << 30))


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(world=files_worlds())
def test_no_file_stops_the_others(daemon, world):
    d, base = daemon
    problems = check_files_world(d.sock, base, next(_COUNTER), world, "ctl")
    assert d.running(), f"the daemon died on {world.describe()}:\n{d.log_text()[-3000:]}"
    assert problems == [], f"{world.describe()}:\n" + "\n".join(problems)
