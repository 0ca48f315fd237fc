"""Shared fixtures and the suite's layout. Keep this small: helpers for one area
live in tests/helpers/ or beside its tests.

tests/unit: pure code, no store, model or process. tests/integration: a real
store (and the real model) in this process. tests/e2e: real daemons, CLIs,
editors and clients as processes over real sockets and pipes. Everything in
e2e, and the few integration files that take tens of seconds, is marked
`slow`: `make test-fast` leaves them out, `make test` runs everything.

One way to build each real part: `service_factory` (a Service on a real store,
a workspace added and indexed; `kb_service` is one on tests/corpora/kb) and
`daemon_factory` (tests/helpers/daemon.py's `Daemon`: `autodoc serve --socket`
on its own store, socket, XDG dirs and log, ready once it answers server.info).
A test keeps a local fixture only where it really differs (module scope, a
store closed before another process opens it, a stdio daemon)."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
CORPORA = TESTS / "corpora"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.relative_to(TESTS).parts[0] == "e2e":
            item.add_marker(pytest.mark.slow)


# The instant tier distils a 30,522-token table on first use (minutes here): off for every
# test and the daemons they start, unless a test names its own table folder (test_instant_tier.py).
os.environ.setdefault("AUTODOC_INSTANT_DIR", "off")
# Reader processes (readers/pool.py), the lexical helper and the index job's parsing workers only where
# a test asks for them (test_reader_pool.py, test_legproc.py, test_prepare.py, test_corpora_cli.py):
# two more processes per daemon or index job on this 2-core machine would slow most tests.
os.environ.setdefault("AUTODOC_READERS", "0")


@pytest.fixture
def short_tmp():
    """A temp folder with a short path: a Unix socket path must fit in 104 bytes,
    which pytest's tmp_path does not promise."""
    path = Path(tempfile.mkdtemp(prefix="ad-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def kb_copy(short_tmp) -> Path:
    """A private, writable copy of tests/corpora/kb (symlinks kept as links);
    a tiny stand-in corpus when that one is absent."""
    dest = short_tmp / "kb"
    src = CORPORA / "kb"
    if src.is_dir():
        shutil.copytree(src, dest, symlinks=True)
    else:
        (dest / "adrs").mkdir(parents=True)
        (dest / "index.md").write_text("# Index\n\nSee [[0001-sqlite-storage]].\n")
        (dest / "adrs" / "0001-sqlite-storage.md").write_text(
            "---\ntitle: ADR 0001 SQLite storage\ntags: [sqlite]\n---\n# ADR 0001\n\n"
            "## Lease\n\nThe store takes an exclusive lease beside autodoc.db.\n"
        )
    return dest


NO_MODEL = {"embedding": {"provider": "none"}}


@pytest.fixture
def service_factory(short_tmp):
    """Services on real stores, each closed at the end of the test. `service_factory(root)` adds
    `root` as workspace `name` ("kb") with `config` (default: no model) and indexes it (`index=False`:
    added only); no root: a Service on an empty store. `store` names the store file (default
    short_tmp/store.db, then store-1.db, … for a second Service in the same test)."""
    from autodoc.config import Settings
    from autodoc.service import Service

    made: list[Service] = []

    def make(
        root: Path | None = None,
        config: dict | None = NO_MODEL,
        *,
        name: str = "kb",
        store: Path | None = None,
        index: bool = True,
    ) -> Service:
        path = store or short_tmp / (f"store-{len(made)}.db" if made else "store.db")
        svc = Service(Settings.from_env(store=path))
        made.append(svc)
        if root is not None:
            svc.workspace_add(name, str(root), config)
            if index:
                svc.index(name)
        return svc

    try:
        yield make
    finally:
        for svc in reversed(made):
            svc.close()


@pytest.fixture
def kb_service(service_factory, kb_copy):
    """A Service on a fresh store in short_tmp with kb_copy indexed as workspace "kb", no model."""
    return service_factory(kb_copy)


@pytest.fixture
def daemon_factory(short_tmp):
    """Builds real daemons (tests/helpers/daemon.py `Daemon`, in short_tmp unless told a base) and
    kills, at the end of the test, any that the test left running. `start=False` returns one unstarted."""
    from helpers.daemon import Daemon

    made: list[Daemon] = []

    def make(base: Path | None = None, *, start: bool = True, **kw) -> Daemon:
        d = Daemon(base or short_tmp, **kw)
        made.append(d)
        return d.start() if start else d

    try:
        yield make
    finally:
        for d in made:
            d.close()


@pytest.fixture(scope="module")
def fuzz_daemon():
    """One daemon of the fuzz harness (bench/reliability.py FuzzDaemon) for a module, which
    the framing and edge tests share; it must stop cleanly."""
    from bench.reliability import FuzzDaemon  # the tests that use it put the repository root on sys.path

    d = FuzzDaemon()
    try:
        d.prepare()
        d.start()
        yield d
    finally:
        code = d.stop()
        log = d.log_text()
        d.cleanup()
        assert code == 0, f"the daemon did not stop cleanly ({code}):\n{log[-3000:]}"


@pytest.fixture(scope="session")
def pg_uri():
    """The URI of a private PostgreSQL 16 + pgvector server (tests/helpers/pg.py) for the whole run
    (one per xdist worker), stopped cleanly at the end; skipped with the reason where pgserver has no
    wheel (CPython 3.13). Each test makes its own database or schema on it."""
    from helpers.pg import PgServer, missing_reason

    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    base = Path(tempfile.mkdtemp(prefix="ad-pg-", dir="/tmp"))
    server = PgServer(base / "pgdata")
    try:
        yield server.start()
    finally:
        server.stop()
        shutil.rmtree(base, ignore_errors=True)
