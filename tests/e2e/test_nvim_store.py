"""The Neovim plugin finds, and starts, the daemon of the store the CLI would use in the same
environment: the one named by AUTODOC_STORE (or `--store` among `cmd`'s flags), found through
that store's writer lease, never whatever answers on the default socket. A real headless Neovim
(tests/helpers/nvim.py) and real daemons: one serving the default store on the default socket
(the user's everyday daemon) and one serving another store file on a socket of its own; each
store holds a workspace `kb` whose only note names the store it is in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from helpers.daemon import NO_MODEL, Daemon, wait_gone
from helpers.nvim import Nvim, close_all

from autodoc.config import Settings
from autodoc.connect import call as call_in_process
from autodoc.store.lease import read_holder
from autodoc_client import call_socket

VENV_BIN = Path(sys.prefix) / "bin"
AUTODOC = str(VENV_BIN / "autodoc")
CURRENT = "require('autodoc.picker.search_builtin').current"
QUIET = {"AUTODOC_SHUTDOWN_DEADLINE": "2", "AUTODOC_READERS": "0", "AUTODOC_INSTANT_DIR": "off"}


def notes(folder: Path, name: str) -> Path:
    folder.mkdir(parents=True)
    (folder / f"{name}-only.md").write_text(f"# The {name} store\n\nA quokkaword note kept in the {name} store.\n")
    return folder


@pytest.fixture(scope="module")
def world():
    """base/xdg is every process's XDG dirs (Neovim's and the daemons'): the default store and
    socket are base/xdg/data/autodoc/autodoc.db and base/xdg/runtime/autodoc/autodoc.sock."""
    base = Path(tempfile.mkdtemp(prefix="adns-", dir="/tmp"))  # short: socket paths fit in 104 bytes
    w = type("World", (), {})()
    w.base = base
    w.default_store = base / "xdg" / "data" / "autodoc" / "autodoc.db"
    w.default_sock = base / "xdg" / "runtime" / "autodoc" / "autodoc.sock"
    w.other_store, w.other_sock = base / "other" / "b.db", base / "run" / "b.sock"
    w.third_store = base / "third" / "c.db"
    w.default = Daemon(base, store=w.default_store, sock=w.default_sock, log=base / "d.log", env=QUIET, clean_env=True)
    w.other = Daemon(base, store=w.other_store, sock=w.other_sock, log=base / "b.log", env=QUIET, clean_env=True)
    try:
        for d, name in ((w.default, "default"), (w.other, "other")):
            d.start()
            d.call("workspace.add", ["kb", str(notes(base / f"notes-{name}", name)), NO_MODEL])
            d.call("workspace.index", ["kb"])
        # the third store has no daemon: only what a CLI run wrote into it
        third = Settings(store=w.third_store, socket=base / "unused.sock")
        w.third_notes = notes(base / "notes-third", "third")
        call_in_process(third, "workspace.add", ["kb", str(w.third_notes), NO_MODEL])
        call_in_process(third, "workspace.index", ["kb"])
        yield w
    finally:
        w.other.stop()
        w.default.stop()
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def nvim(world):
    made: list[Nvim] = []

    def make(opts: dict, env: dict[str, str], cwd: Path) -> Nvim:
        nv = Nvim(
            world.base,
            env={**QUIET, **env},
            cwd=cwd,
            init_lua=f"vim.g.autodoc = vim.json.decode([==[{json.dumps(opts)}]==])",
        )
        made.append(nv)
        return nv

    yield make
    close_all(made)


def search(nv: Nvim, query: str) -> dict:
    """The answer the picker shows for `query` (or the error it shows instead)."""
    nv.command(f"AutodocSearch {query}")
    return nv.wait_lua(
        f"""
        local c = {CURRENT}
        local s = c and c.session
        if not s or s.inflight then return nil end
        if s.error then return {{error = s.error}} end
        return s.answer and s.answer.query == ... and s.answer
        """,
        query,
        what=f"the answer to {query!r}",
    )


def paths(answer: dict) -> list[str]:
    assert "error" not in answer, answer
    return [h["path"] for h in answer["hits"]]


def test_the_store_named_by_AUTODOC_STORE_or_cmd_is_searched_not_the_default_sockets(world, nvim):
    env = {"AUTODOC_STORE": str(world.other_store)}
    nv = nvim({"autostart": False, "cmd": [AUTODOC]}, env, world.base / "notes-other")
    assert paths(search(nv, "quokkaword")) == ["other-only.md"]
    assert nv.json("return require('autodoc.client').get().socket") == str(world.other_sock)
    # :checkhealth names the store and how it was chosen, and the daemon found for it
    nv.command("checkhealth autodoc")
    text = "\n".join(nv.wait_lua("local l = vim.api.nvim_buf_get_lines(0, 0, -1, false); return #l > 8 and l"))
    assert f"store {world.other_store} (from AUTODOC_STORE)" in text, text
    assert f"socket {world.other_sock} answers" in text, text

    # the store given among cmd's global flags, no AUTODOC_STORE: the same daemon
    nv2 = nvim({"autostart": False, "cmd": [AUTODOC, "--store", str(world.other_store)]}, {}, world.base)
    assert paths(search(nv2, "quokkaword")) == ["other-only.md"]

    # nothing named: the default store's daemon, on the default socket, as before
    nv3 = nvim({"autostart": False, "cmd": [AUTODOC]}, {}, world.base / "notes-default")
    assert paths(search(nv3, "quokkaword")) == ["default-only.md"]
    assert nv3.json("return require('autodoc.client').get().socket") == str(world.default_sock)


def test_autostart_starts_the_named_stores_daemon_beside_the_default_one(world, nvim):
    env = {"AUTODOC_STORE": str(world.third_store)}
    nv = nvim({"autostart": True, "cmd": [AUTODOC]}, env, world.third_notes)
    try:
        assert paths(search(nv, "quokkaword")) == ["third-only.md"]
        holder = read_holder(world.third_store)
        assert holder and holder.get("socket"), holder
        pid, sock = holder["pid"], Path(holder["socket"])
        # a socket of its own: the default one stays the default daemon's, serving the default store
        assert sock != world.default_sock
        assert nv.json("return require('autodoc.client').get().socket") == str(sock)
        assert nv.json("return require('autodoc.client').get().stats.started") == 1
        assert call_socket(world.default_sock, "server.info", [])["store"] == str(world.default_store)
        assert call_socket(sock, "server.info", [])["store"] == str(world.third_store)
        # and the CLI, in the same environment, talks to the daemon Neovim started
        cli = subprocess.run(
            [AUTODOC, "--call", "server.info", "[]"],
            env={**clean_env(world.base), **QUIET, **env},
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert json.loads(cli.stdout)["pid"] == pid, cli.stderr

        # the daemon stops, and the CLI starts the store's daemon again: the open picker finds it
        # (asking `autodoc socket` again, not the default socket) and searches again
        call_socket(sock, "server.shutdown", [])
        wait_gone(pid)
        code, again, err = autodoc_socket(world.base, env, "--start", "--wait", "30")
        assert code == 0 and again["started"] and again["socket"] == str(sock), (again, err)
        nv.wait_lua(
            f"local s = {CURRENT}.session; return s.last_refresh == 'reconnected' and s.answer and not s.inflight",
            what="the search to run again on the store's new daemon",
        )
        assert paths(nv.json(f"return {CURRENT}.session.answer")) == ["third-only.md"]
        assert nv.json("return require('autodoc.client').get().stats.started") == 1
    finally:
        held = read_holder(world.third_store)
        if held:  # the daemon Neovim started: stopped, and gone before the folder is
            try:
                call_socket(Path(held["socket"]), "server.shutdown", [])
            except Exception:
                os.kill(held["pid"], 15)
            wait_gone(held["pid"])


def clean_env(base: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTODOC_")}
    for name in ("CONFIG", "DATA", "STATE", "CACHE"):
        env[f"XDG_{name}_HOME"] = str(base / "xdg" / name.lower())
    env["XDG_RUNTIME_DIR"] = str(base / "xdg" / "runtime")
    return env


def autodoc_socket(base: Path, env: dict[str, str], *args: str) -> tuple[int, dict, str]:
    proc = subprocess.run(
        [AUTODOC, "socket", "--json", *args],
        env={**clean_env(base), **QUIET, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def test_autodoc_socket_is_the_rule_the_plugin_asks(world):
    """`autodoc socket --json`, which the plugin runs: the lease's socket; the store shown with its
    password masked (never in what it prints, nor in a started daemon's socket or log name)."""
    code, got, _ = autodoc_socket(world.base, {"AUTODOC_STORE": str(world.other_store)})
    assert code == 0 and got["socket"] == str(world.other_sock) and got["pid"] == world.other.pid
    assert (got["store"], got["store_from"], got["started"]) == (str(world.other_store), "AUTODOC_STORE", False)

    nowhere = {"AUTODOC_STORE": str(world.base / "none" / "x.db")}
    code, got, err = autodoc_socket(world.base, nowhere)
    assert code == 1 and got["socket"] is None and "none runs" in got["why"] and "no daemon serves" in err
    # that store's daemon would not listen on the default socket: doctor no longer takes the
    # default store's live daemon's socket for one a killed daemon left (and says to rm it)
    doctor = subprocess.run(
        [AUTODOC, "doctor", "--json"],
        env={**clean_env(world.base), **QUIET, **nowhere},
        capture_output=True,
        timeout=60,
    )
    check = next(c for c in json.loads(doctor.stdout) if c["name"] == "socket")
    assert check["ok"] and str(world.default_sock) not in json.dumps(check), check

    # a database nobody listens for: named without its password, here and by the daemon --start ran
    uri = "postgresql://alice:s3cret@127.0.0.1:1/kb"
    code, got, err = autodoc_socket(world.base, {"AUTODOC_STORE": uri}, "--start", "--wait", "30")
    assert code == 1 and got["socket"] is None and got["started"] is False, (got, err)
    assert got["store"] == "postgresql://alice:***@127.0.0.1:1/kb"
    assert "exited with status" in got["why"], got
    assert "s3cret" not in json.dumps(got) + err
    runtime = world.base / "xdg" / "runtime" / "autodoc"
    assert not any("s3cret" in p.name for p in runtime.iterdir())
    logs = [p for p in runtime.iterdir() if p.name.startswith("pg-") and p.suffix == ".log"]
    assert logs and all("s3cret" not in p.read_text() for p in logs), logs


def test_a_database_named_by_AUTODOC_STORE_gets_its_daemon_started_and_searched(world, nvim, pg_uri):
    """AUTODOC_STORE a PostgreSQL connection string with a password: the plugin starts and finds
    the database's daemon (its socket named after the lease, the password nowhere), beside the
    default store's daemon on the default socket."""
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    db, password = f"nvim_{uuid.uuid4().hex[:12]}", f"Pw-{uuid.uuid4().hex}"
    with psycopg.connect(pg_uri, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {db}")
    # the test server trusts local connections: the password is only there for no output to show it
    uri = f"postgresql://postgres:{password}@/{db}?host={conninfo_to_dict(pg_uri)['host']}"
    env = {"AUTODOC_STORE": uri}
    cli_env = {**clean_env(world.base), **QUIET, **env}
    folder = notes(world.base / f"notes-{db}", "database")
    for method, params in (("workspace.add", ["kb", str(folder), NO_MODEL]), ("workspace.index", ["kb"])):
        done = subprocess.run(
            [AUTODOC, "--call", method, json.dumps(params)], env=cli_env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
    nv = nvim({"autostart": True, "cmd": [AUTODOC]}, env, folder)
    sock = None
    try:
        assert paths(search(nv, "quokkaword")) == ["database-only.md"]
        located = nv.json("return require('autodoc.client').get().store")
        sock = Path(located["socket"])
        assert sock.parent == world.default_sock.parent and sock.name.startswith("pg-") and sock.suffix == ".sock"
        assert located["store"] == uri.replace(password, "***") and located["started"] is True
        info = call_socket(sock, "server.info", [])
        assert password not in json.dumps(info) and password not in json.dumps(located)
        assert password not in Path(f"/proc/{info['pid']}/cmdline").read_text()
        assert call_socket(world.default_sock, "server.info", [])["store"] == str(world.default_store)
    finally:
        if sock is not None:
            pid = call_socket(sock, "server.info", [])["pid"]
            call_socket(sock, "server.shutdown", [])
            wait_gone(pid)
        with psycopg.connect(pg_uri, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {db} WITH (FORCE)")


def test_an_autodoc_that_cannot_run_says_so(world, nvim):
    """No `autodoc` to ask: with nothing naming a store, the default socket is still tried (a
    daemon started by other means may listen there) and the error says both; with AUTODOC_STORE
    set, nothing else is tried."""
    cmd = ["/nonexistent/autodoc"]
    nv = nvim({"autostart": True, "cmd": cmd}, {}, world.base / "notes-default")
    assert paths(search(nv, "quokkaword")) == ["default-only.md"]

    nv2 = nvim({"autostart": True, "cmd": cmd}, {"AUTODOC_STORE": str(world.other_store)}, world.base)
    nv2.command("AutodocSearch quokkaword")
    message = error_note(nv2)
    assert message.startswith("autodoc: search: cannot run /nonexistent/autodoc"), message
    assert "no daemon answers" not in message
    assert nv2.json("return require('autodoc.client').get().socket") is None

    world.default.stop()
    try:
        nv3 = nvim({"autostart": True, "cmd": cmd}, {}, world.base)
        nv3.command("AutodocSearch quokkaword")
        message = error_note(nv3)
        assert "cannot run /nonexistent/autodoc" in message and f"no daemon answers at {world.default_sock}" in message
    finally:
        world.default.start()


def error_note(nv: Nvim) -> str:
    return nv.wait_lua(
        "for _, n in ipairs(_G.__notes) do if n.level == vim.log.levels.ERROR then return n.msg end end",
        what="an error notification",
    )


def test_two_clients_starting_the_stores_daemon_at_once_both_get_it(world):
    """Two editors opening at once each run `autodoc socket --start`: one daemon wins the lease,
    and both are given its socket (the loser's daemon exits; its client waits for the winner's)."""
    store = world.base / "fourth" / f"d-{uuid.uuid4().hex[:6]}.db"
    env = {**clean_env(world.base), **QUIET, "AUTODOC_STORE": str(store)}
    argv = [AUTODOC, "socket", "--json", "--start", "--wait", "30"]
    procs = [subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in "ab"]
    outs = [p.communicate(timeout=60) for p in procs]
    got = [json.loads(out) for out, _ in outs]
    held = read_holder(store)
    try:
        assert [p.returncode for p in procs] == [0, 0], outs
        assert held and got[0]["socket"] == got[1]["socket"] == held["socket"], (got, held)
        assert got[0]["pid"] == got[1]["pid"] == held["pid"]
    finally:
        if held:
            call_socket(Path(held["socket"]), "server.shutdown", [])
            wait_gone(held["pid"])
        # and any other daemon of this store (a CI run left one serving after the test: which, unknown)
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                if f"--store\0{store}\0" in (proc / "cmdline").read_text(errors="replace"):
                    os.kill(int(proc.name), 15)
            except (OSError, ValueError):
                pass
