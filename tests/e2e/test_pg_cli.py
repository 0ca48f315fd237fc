"""Every entry point on a PostgreSQL store (issue 34), as real processes against the `pg_uri` server:
the CLI in-process and through a real daemon, `doctor` on a reachable and an unreachable database,
credentials never shown, a read-only role that searches and reads but never indexes, and reading a
document whose workspace root is not on the reader's machine.

One database per module (its owner a role with a password, so that a leak has something to show);
the corpus is a copy of tests/corpora/kb that is deleted once indexed: the roots are the indexer's."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from helpers.daemon import Daemon, isolated_env
from helpers.pg import missing_reason

pytestmark = pytest.mark.skipif(missing_reason() is not None, reason=missing_reason() or "")

CORPUS = Path(__file__).resolve().parents[1] / "corpora" / "kb"
NO_MODEL = json.dumps({"embedding": {"provider": "none"}})
TRACEBACK = "Traceback (most recent call last)"
SECRET_NOT_SHOWN = "pw-never-shown"


def as_role(uri: str, user: str, password: str, dbname: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    host = conninfo_to_dict(uri)["host"]
    return f"postgresql://{user}:{password}@/{dbname}?host={host}"


class Team:
    """One database, an indexer (its owner) and a reader role, each with a password, and a folder per
    simulated machine (its own XDG dirs: its own runtime dir, so its own daemon)."""

    def __init__(self, pg_uri: str, base: Path):
        import psycopg

        tag = uuid.uuid4().hex[:8]
        self.base = base
        self.db = f"team_{tag}"
        self.password = f"Pw-{uuid.uuid4().hex}"  # what no output may ever show
        self.reader_password = f"Rd-{uuid.uuid4().hex}"
        self.owner, self.reader = f"indexer_{tag}", f"reader_{tag}"
        # README, "For a team": the roles, the database, pgvector, the schema and the reader's grants,
        # statement for statement (names made unique to this run)
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {self.owner} LOGIN PASSWORD '{self.password}'")
            conn.execute(f"CREATE ROLE {self.reader} LOGIN PASSWORD '{self.reader_password}'")
            conn.execute(f"CREATE DATABASE {self.db} OWNER {self.owner}")
        with psycopg.connect(as_role(pg_uri, "postgres", "", self.db), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
            conn.execute(f"CREATE SCHEMA autodoc AUTHORIZATION {self.owner}")
            conn.execute(f"GRANT USAGE ON SCHEMA autodoc TO {self.reader}")
            conn.execute(
                f"ALTER DEFAULT PRIVILEGES FOR ROLE {self.owner} IN SCHEMA autodoc GRANT SELECT ON TABLES TO {self.reader}"
            )
        self.uri = as_role(pg_uri, self.owner, self.password, self.db)
        self.reader_uri = as_role(pg_uri, self.reader, self.reader_password, self.db)
        self.outputs: list[str] = []  # every stdout and stderr a process gave, checked for the passwords

    def env(self, machine: str, store: str | None = None, **extra: str) -> dict[str, str]:
        env = isolated_env(self.base / machine, extra={"AUTODOC_READERS": "0", **extra})
        env.pop("AUTODOC_SOCKET", None)
        env["AUTODOC_STORE"] = store or self.uri
        for name in ("XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
            Path(env[name]).mkdir(parents=True, exist_ok=True, mode=0o700)
        return env

    def run(
        self, env: dict[str, str], *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess:
        proc = subprocess.run(
            [sys.executable, "-m", "autodoc.cli", *args], env=env, capture_output=True, text=True, timeout=timeout
        )
        self.outputs += [proc.stdout, proc.stderr]
        if check:
            assert proc.returncode == 0, f"autodoc {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
        assert TRACEBACK not in proc.stderr, proc.stderr
        return proc

    def daemon(self, machine: str, store: str | None = None, *, typed: bool = False) -> Daemon:
        """`autodoc serve --socket` with the store in AUTODOC_STORE, or (`typed`) after --store."""
        base = self.base / machine
        sock = base / "run" / "autodoc.sock"
        env = self.env(machine, store)
        flag = ["--store", env["AUTODOC_STORE"]] if typed else []
        argv = [sys.executable, "-m", "autodoc.cli", *flag, "serve", "--socket", str(sock)]
        d = Daemon(base, sock=sock, argv=argv, env=env)
        d.env["AUTODOC_STORE"] = env["AUTODOC_STORE"]  # Daemon's own default store is a file
        if typed:
            del d.env["AUTODOC_STORE"]
        return d.start()


@pytest.fixture(scope="module")
def team(pg_uri):
    base = Path(tempfile.mkdtemp(prefix="ad-pgc-", dir="/tmp"))
    try:
        t = Team(pg_uri, base)
        # the indexer's folder: a copy, indexed, then gone, as CI's checkout is gone from a laptop
        root = base / "ci-checkout" / "kb"
        shutil.copytree(CORPUS, root, symlinks=True)
        ci = t.env("ci")
        t.run(ci, "workspace", "add", "kb", str(root), "--config", NO_MODEL)
        t.run(ci, "index", "kb")
        t.root = root
        shutil.rmtree(root.parent)
        yield t
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def laptop(team):
    """A daemon on another 'machine' (its own XDG dirs), as the indexer role, the connection string
    (with its password) typed after --store."""
    d = team.daemon("laptop", typed=True)
    try:
        yield d
    finally:
        code = d.stop()
        team.outputs.append(d.log_text())
        assert code == 0, d.log_text()


@pytest.fixture(scope="module")
def reader(team):
    """A daemon connected as the read-only role, on a third 'machine'."""
    d = team.daemon("reader", team.reader_uri)
    try:
        yield d
    finally:
        d.stop()
        team.outputs.append(d.log_text())


def test_commands_go_to_the_daemon_serving_the_database(team, laptop):
    env = team.env("laptop")
    info = json.loads(team.run(env, "--call", "server.info", "{}").stdout)
    assert info["pid"] == laptop.pid  # found through the lease in this machine's runtime dir
    # typed on its command line, the password left it at once (the same process, started again)
    assert team.password not in Path(f"/proc/{laptop.pid}/cmdline").read_text()
    assert info["store"] == f"postgresql://{team.owner}:***@/{team.db}?host={team.uri.split('host=')[1]}"
    assert info["writable"] is True
    out = team.run(env, "search", "-w", "kb", "lease").stdout
    assert "kb:runbooks/lease-recovery.md" in out
    listed = team.run(env, "workspace", "list").stdout
    assert listed.startswith(f"kb\t{team.root}\t16 documents")
    status = json.loads(team.run(env, "workspace", "status", "kb", "--json").stdout)
    assert status["files"]["indexed"] == 16 and status["root_exists"] is False
    told = team.run(env, "workspace", "status", "kb").stdout.splitlines()
    assert told[0] == f"kb: {team.root} (the indexer's folder: not on this machine)"
    assert told[1].startswith("  files: 16 indexed, ")  # not "of 0 on disk": this disk is not the indexer's


def test_read_returns_the_stored_text_with_the_root_gone(team, laptop):
    env = team.env("laptop")
    assert not team.root.exists()
    text = team.run(env, "read", "kb", "runbooks/lease-recovery.md").stdout
    assert text == (CORPUS / "runbooks" / "lease-recovery.md").read_text()
    lines = team.run(env, "read", "kb:runbooks/lease-recovery.md#L1-2").stdout
    assert lines == "".join((CORPUS / "runbooks" / "lease-recovery.md").read_text().splitlines(True)[:2])
    gone = team.run(env, "read", "kb", "../../etc/passwd", check=False)
    assert gone.returncode == 2 and "leaves the workspace" in gone.stderr


def test_in_process_commands_work_without_a_daemon(team):
    env = team.env("desk")  # no daemon on this machine
    out = json.loads(team.run(env, "search", "-w", "kb", "--json", "frontmatter").stdout)
    assert out["hits"] and all(h["path"].endswith(".md") for h in out["hits"])
    assert team.run(env, "read", "kb", "index.md").stdout == (CORPUS / "index.md").read_text()


def test_doctor_on_the_database(team):
    proc = team.run(team.env("desk"), "doctor", "--json", check=False)
    checks = {c["name"]: c for c in json.loads(proc.stdout)}
    assert checks["store"]["ok"] and "PostgreSQL 16" in checks["store"]["detail"]
    assert f"as role {team.owner}" in checks["store"]["detail"] and "***" in checks["store"]["detail"]
    assert checks["pgvector"]["ok"] and checks["pgvector"]["detail"].startswith("0.")
    from autodoc.store.pg.schema import MIGRATIONS

    assert checks["schema"]["detail"].startswith(f"autodoc, version {len(MIGRATIONS)}")
    assert "may index" in checks["role"]["detail"]
    assert "not on this machine" in checks["workspace kb"]["detail"] and checks["workspace kb"]["ok"]
    as_reader = json.loads(team.run(team.env("desk", team.reader_uri), "doctor", "--json", check=False).stdout)
    assert "reads only" in next(c for c in as_reader if c["name"] == "role")["detail"]


def test_doctor_before_the_first_index_tells_a_missing_schema_from_an_empty_one(team, pg_uri):
    import psycopg

    # README's SQL creates the schema: doctor then said "autodoc not created yet", as if that step had failed
    tag = uuid.uuid4().hex[:8]
    uri = f"{team.uri}&options=-csearch_path%3Dfresh_{tag}"
    detail = lambda: next(  # noqa: E731
        c["detail"]
        for c in json.loads(team.run(team.env("ci", uri), "doctor", "--json").stdout)
        if c["name"] == "schema"
    )
    assert detail() == f"fresh_{tag} does not exist yet: the first autodoc index by an indexer role creates it", (
        detail()
    )
    with psycopg.connect(as_role(pg_uri, "postgres", "", team.db), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA fresh_{tag} AUTHORIZATION {team.owner}")
    assert detail() == f"fresh_{tag} exists, no tables yet: the first autodoc index by an indexer role makes them"


def test_an_unreachable_database_says_so_and_what_to_fix(team, tmp_path):
    nowhere = f"postgresql://{team.owner}:{team.password}@/{team.db}?host={tmp_path}"  # a socket dir, no server
    env = team.env("desk", nowhere)
    doctor = team.run(env, "doctor", check=False)
    assert doctor.returncode == 1
    line = next(l for l in doctor.stdout.splitlines() if l.startswith("FAIL  store:"))
    assert f"cannot connect to postgresql://{team.owner}:***@/{team.db}?host={tmp_path}" in line
    assert "No such file or directory" in line and "fix: start PostgreSQL" in line
    for args in (("search", "-w", "kb", "lease"), ("workspace", "list"), ("index", "kb"), ("read", "kb", "index.md")):
        proc = team.run(env, *args, check=False)
        assert proc.returncode == 1, (args, proc.stderr)
        assert f"postgresql://{team.owner}:***@/{team.db}" in proc.stderr and "(-32012)" in proc.stderr
        assert "No such file or directory; fix: start PostgreSQL there" in proc.stderr
        assert "autodoc doctor" in proc.stderr
    serve = subprocess.run(
        [sys.executable, "-m", "autodoc.cli", "serve", "--socket", str(tmp_path / "s.sock")],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    team.outputs += [serve.stdout, serve.stderr]
    assert serve.returncode == 1 and TRACEBACK not in serve.stderr
    assert "cannot connect to the PostgreSQL store" in serve.stderr or "cannot reach" in serve.stderr
    assert f"postgresql://{team.owner}:***@/{team.db}" in serve.stderr


def test_a_reader_role_on_a_database_without_the_store_says_so(team, pg_uri, tmp_path):
    """A reader's daemon started before any indexer ran: it may not create the schema, and says what to do
    (it was an internal error, exit 70: the migration's permission denied)."""
    import psycopg

    empty = f"{team.db}_empty"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {empty}")
    env = team.env("early", as_role(pg_uri, team.reader, team.reader_password, empty))
    serve = team.run(env, "serve", "--socket", str(tmp_path / "s.sock"), check=False)
    assert serve.returncode == 1, serve.stderr
    assert f"no AutoDoc store in postgresql://{team.reader}:***@/{empty}" in serve.stderr
    assert "index a workspace into it first" in serve.stderr


def test_a_reader_role_searches_and_reads_and_never_indexes(team, reader):
    env = team.env("reader", team.reader_uri)
    info = json.loads(team.run(env, "--call", "server.info", "{}").stdout)
    assert info["pid"] == reader.pid and info["writable"] is False
    assert "kb:runbooks/lease-recovery.md" in team.run(env, "search", "-w", "kb", "lease").stdout
    assert team.run(env, "read", "kb", "index.md").stdout == (CORPUS / "index.md").read_text()
    for args in (("index", "kb"), ("workspace", "add", "other", str(team.base))):
        proc = team.run(env, *args, check=False)
        assert proc.returncode == 1, (args, proc.stdout, proc.stderr)
        assert "(-32013)" in proc.stderr and f"the role {team.reader} may only read" in proc.stderr, proc.stderr
    answer = json.loads(
        team.run(
            env,
            "--call",
            "session.append",
            json.dumps(
                {"workspace": "kb", "session_id": "s1", "events": [{"id": "e1", "kind": "message", "text": "hello"}]}
            ),
            check=False,
        ).stdout
    )
    assert answer["error"]["code"] == -32013 and answer["error"]["data"]["name"] == "store.read_only"
    assert answer["error"]["data"]["role"] == team.reader
    from autodoc.rpc import schemas

    assert schemas.error_errors(answer["error"]) == []
    # and what server.info answers is its schema's
    assert schemas.result_errors("server.info", info) == []


def _lsp_frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def test_an_agent_and_an_editor_on_the_database(team, laptop):
    """`autodoc mcp` and `autodoc lsp` with AUTODOC_STORE=postgresql://…: both use this machine's daemon."""
    env = team.env("laptop")
    line = lambda o: (json.dumps(o) + "\n").encode()  # noqa: E731
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    frames = [
        line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}),
        line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "status", "arguments": {}}}),
        line(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "lease recovery", "workspace": "kb"}},
            }
        ),
    ]
    mcp = subprocess.run(
        [sys.executable, "-m", "autodoc.cli", "mcp"], input=b"".join(frames), env=env, capture_output=True, timeout=120
    )
    team.outputs += [mcp.stdout.decode(), mcp.stderr.decode()]
    assert mcp.returncode == 0, mcp.stderr.decode()[-2000:]
    got = {m.get("id"): m for m in map(json.loads, mcp.stdout.splitlines())}
    status = got[1]["result"]["structuredContent"]["server"]
    assert status["mode"] == "daemon" and status["store"].startswith(f"postgresql://{team.owner}:***@")
    hits = got[2]["result"]["structuredContent"]["hits"]
    assert hits and "lease-recovery" in json.dumps(hits[0])

    lsp_in = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {"processId": None, "rootUri": None, "capabilities": {}},
        },
        {"jsonrpc": "2.0", "method": "initialized", "params": {}},
        {  # a file of the laptop's own: in no workspace (a shared store's roots are on the indexer's machine)
            "jsonrpc": "2.0",
            "method": "textDocument/didOpen",
            "params": {
                "textDocument": {
                    "uri": (team.base / "laptop-note.md").as_uri(),
                    "languageId": "markdown",
                    "version": 1,
                    "text": "# A note\n",
                }
            },
        },
        {"jsonrpc": "2.0", "id": 2, "method": "workspace/symbol", "params": {"query": "lease"}},
    ]
    p = subprocess.Popen(
        [sys.executable, "-m", "autodoc.cli", "lsp"],
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(b"".join(map(_lsp_frame, lsp_in)))
    p.stdin.flush()
    got_b = b""
    deadline = time.monotonic() + 60
    while b'"id": 2' not in got_b and b'"id":2' not in got_b:
        assert select.select([p.stdout], [], [], max(0.0, deadline - time.monotonic()))[0], "no symbols"
        got_b += os.read(p.stdout.fileno(), 1 << 16)
    p.stdin.write(_lsp_frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"}))
    p.stdin.write(_lsp_frame({"jsonrpc": "2.0", "method": "exit"}))
    p.stdin.flush()
    rest, err = p.communicate(timeout=60)
    team.outputs += [(got_b + rest).decode(errors="replace"), err.decode(errors="replace")]
    assert p.returncode == 0, err.decode()[-2000:]
    assert b"runbooks/lease-recovery.md" in got_b
    # a reader cannot add a workspace: the message said "add one: autodoc workspace add NAME PATH"
    said = (got_b + rest).decode(errors="replace")
    assert "is in no workspace of the store" in said and "workspace add" not in said, said[-3000:]
    assert "folders on the indexer's machine" in said, said[-3000:]


async def test_the_terminal_app_on_the_database(team, laptop, tmp_path, monkeypatch):
    """`autodoc tui` with a PostgreSQL store: found this machine's daemon, searched, previewed."""
    import asyncio

    from autodoc.config import Settings
    from autodoc.tui.app import AutodocApp

    monkeypatch.setenv("XDG_RUNTIME_DIR", team.env("laptop")["XDG_RUNTIME_DIR"])  # where its lease is
    app = AutodocApp(
        Settings.from_env(store=team.uri), start_daemon=False, state_file=tmp_path / "tui.json", workspace="kb"
    )
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 60
        s = app.pickers["search"]
        while not (app.shown_workspace is not None and s.is_mounted):
            assert time.monotonic() < deadline, "the workspace never showed"
            await pilot.pause(0.02)
        assert app.link.mode == "daemon"
        s.query_one("#query").value = "lease"
        while not (s.answer is not None and s.pending is None and s.answer["query"] == "lease"):
            assert time.monotonic() < deadline, "no answer"
            await pilot.pause(0.02)
        assert any(h["path"] == "runbooks/lease-recovery.md" for h in s.answer["hits"])
        while (s.preview_shown or {}).get("path") != s.answer["hits"][0]["path"]:
            assert time.monotonic() < deadline, "no preview"
            await asyncio.sleep(0.02)


def test_an_agent_as_the_reader_role_is_told_it_may_not_write(team):
    """`autodoc mcp --in-process` as the reader role: it searches; save_session says the role may only
    read (it said another process held the store without a socket to share it)."""
    env = team.env("agent-host", team.reader_uri)
    line = lambda o: (json.dumps(o) + "\n").encode()  # noqa: E731
    init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
    turns = [{"id": "1", "role": "user", "text": "how do I recover the lease?"}]
    frames = [
        line({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init}),
        line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        line({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "status", "arguments": {}}}),
        line(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "tools/call",
                "params": {"name": "search", "arguments": {"query": "lease recovery", "workspace": "kb"}},
            }
        ),
        line(
            {
                "jsonrpc": "2.0",
                "id": 3,
                "method": "tools/call",
                "params": {
                    "name": "save_session",
                    "arguments": {"session_id": "s1", "turns": turns, "workspace": "kb"},
                },
            }
        ),
        line(
            {
                "jsonrpc": "2.0",
                "id": 4,
                "method": "tools/call",
                "params": {"name": "sessions", "arguments": {"workspace": "kb"}},
            }
        ),
    ]
    mcp = subprocess.run(
        [sys.executable, "-m", "autodoc.cli", "mcp", "--in-process"],
        input=b"".join(frames),
        env=env,
        capture_output=True,
        timeout=120,
    )
    team.outputs += [mcp.stdout.decode(), mcp.stderr.decode()]
    assert mcp.returncode == 0, mcp.stderr.decode()[-2000:]
    got = {m.get("id"): m for m in map(json.loads, mcp.stdout.splitlines())}
    server = got[1]["result"]["structuredContent"]["server"]
    assert server["mode"] == "in-process (read-only: this database role may only read)" and not server["writable"]
    assert got[2]["result"]["structuredContent"]["hits"]
    refused = got[3]["result"]
    assert refused["isError"], refused
    assert f"the role {team.reader} may only read" in json.dumps(refused)
    # no saved conversation: the note said "`save_session` keeps one", which this role may not do
    notes = got[4]["result"]["structuredContent"]["notes"]
    assert notes and "save_session` keeps one" not in notes[0] and "read-only" in notes[0], notes


def test_a_reader_is_told_the_indexer_embeds_what_waits_for_vectors(team, laptop, pg_uri, tmp_path):
    """A reader neither indexes nor embeds: its status said "3 chunks wait for vectors" and nothing
    more, which never changes from its side (a CI job ended before its vectors were made)."""
    import psycopg

    # no indexer runs: the laptop's daemon (the indexer role) would embed the chunks again at
    # once (seen under CI load: the reader then read 0 waiting)
    assert laptop.stop() == 0
    folder = tmp_path / "pend"
    folder.mkdir()
    for i in range(3):
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nA few words about topic {i}.\n")
    ci = team.env("ci-pend")
    team.run(ci, "workspace", "add", "pend", str(folder))
    try:
        team.run(ci, "index", "--wait", "pend")
        with psycopg.connect(as_role(pg_uri, "postgres", "", team.db), autocommit=True) as conn:
            conn.execute(
                "DELETE FROM autodoc.vectors WHERE workspace_id = (SELECT id FROM autodoc.workspaces WHERE name = 'pend')"
            )
        desk = team.env("desk-pend", team.reader_uri)
        emb = json.loads(team.run(desk, "workspace", "status", "pend", "--json").stdout)["embedding"]
        assert emb["pending"] == 3, emb
        assert "3 chunks wait for vectors" in emb["reason"], emb
        assert "only the indexer embeds" in emb["reason"] and "autodoc index --wait" in emb["reason"], emb
        # and a daemon of the indexer's, which embeds them, says nothing of the kind
        with team.daemon("ci-pend"):
            own = json.loads(team.run(ci, "workspace", "status", "pend", "--json").stdout)["embedding"]
        assert "only the indexer embeds" not in (own["reason"] or ""), own
    finally:
        team.run(ci, "workspace", "remove", "pend")
        laptop.start()


def test_a_spawned_daemon_gets_the_password_through_its_environment(team):
    """connect.start_daemon (what `autodoc mcp` and `autodoc index`'s hand-off run): the connection
    string is not on the daemon's command line, which any user of the machine can read."""
    from autodoc.config import Settings
    from autodoc.connect import start_daemon
    from autodoc.store.lease import read_holder

    env = team.env("spawn")
    saved = dict(os.environ)
    os.environ.update(env)
    try:
        settings = Settings.from_env()
        why = start_daemon(settings, settings.daemon_log, wait_s=60)
        assert why is None, why
        holder = read_holder(settings.store)
        assert holder and holder.get("pid")
        pid = holder["pid"]
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode()
        assert team.password not in cmdline and "postgresql" not in cmdline
        proc = team.run(env, "--call", "server.shutdown", "{}")
        assert proc.returncode == 0
        from helpers.daemon import wait_gone

        wait_gone(pid)
        team.outputs.append(settings.daemon_log.read_text(errors="replace"))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_no_output_ever_showed_a_password(team, laptop, reader):
    """Last in the module: everything the processes above printed, and both daemons' logs so far."""
    seen = "\n".join([*team.outputs, laptop.log_text(), reader.log_text()])
    assert team.password not in seen and team.reader_password not in seen
    assert f"{team.owner}:***@" in seen  # the outputs did name the store, masked


def test_without_the_driver_a_database_says_what_to_install(tmp_path):
    """autodoc installed without the `postgres` extra (psycopg absent): exit 1 and the pip line (it was
    an internal error, exit 70)."""
    code = (
        "import sys; sys.modules['psycopg'] = None\n"
        "from autodoc.cli import main\n"
        f"sys.exit(main(['--store', 'postgresql://kb:{SECRET_NOT_SHOWN}@/kb?host={tmp_path}', 'search', 'lease']))"
    )
    env = isolated_env(tmp_path, extra={"AUTODOC_READERS": "0"})
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1, proc.stderr
    assert "fix: pip install 'autodoc[postgres]' (-32012)" in proc.stderr
    assert SECRET_NOT_SHOWN not in proc.stderr and TRACEBACK not in proc.stderr
