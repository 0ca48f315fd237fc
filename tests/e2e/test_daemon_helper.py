"""tests/helpers/daemon.py, the suite's one way to start a daemon: ready only once
server.info answers, a dead or silent daemon fails with its log, a SIGTERM it
ignores ends in a kill and an AssertionError, and its env is its own."""

from __future__ import annotations

import os
import sys

import pytest
from helpers.daemon import Daemon


def script(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def test_a_real_daemon_is_ready_when_it_answers_and_stops_cleanly(daemon_factory, short_tmp):
    d = daemon_factory(env={"AUTODOC_CHECK_RESULTS": "1"})
    assert d.info["pid"] == d.pid and d.info["socket"] == str(d.sock)
    assert d.call("server.info")["pid"] == d.pid
    for name in ("XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME"):
        assert d.env[name].startswith(str(short_tmp)), name
    assert d.env["AUTODOC_STORE"] == str(d.store) and d.env["AUTODOC_SOCKET"] == str(d.sock)
    assert d.stop() == 0 and not d.running()
    assert "serving" in d.log_text()  # its INFO lines went to its log, not to ours
    assert not d.sock.exists()


def test_a_daemon_that_dies_fails_the_start_with_its_log(short_tmp):
    d = Daemon(short_tmp, argv=script("import sys; print('bad flag --nope', file=sys.stderr); sys.exit(2)"))
    with pytest.raises(AssertionError, match=r"(?s)exit 2.*bad flag --nope"):
        d.start()
    assert not d.running()


def test_a_socket_that_never_answers_server_info_times_out(short_tmp):
    # binds and accepts, then hangs up on every connection: a listener, never a daemon
    code = (
        "import socket, sys; s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()\n"
        "while True: s.accept()[0].close()"
    )
    d = Daemon(short_tmp, sock=short_tmp / "x.sock", argv=[*script(code), str(short_tmp / "x.sock")], timeout=1)
    with pytest.raises(AssertionError, match="never listened"):
        d.start()
    assert not d.running()  # killed, not left behind


def test_a_sigterm_ignored_ends_in_a_kill_and_an_error(short_tmp):
    code = (
        "import signal, socket, sys, json; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen()\n"
        "while True:\n"
        "    c = s.accept()[0]\n"
        "    try:\n"
        "        c.recv(65536) and c.sendall(json.dumps({'jsonrpc': '2.0', 'id': 1, 'result': {'pid': 0}}).encode() + b'\\n')\n"
        "    except OSError:\n"
        "        pass  # a bare connect (socket_answers) hangs up at once\n"
        "    c.close()"
    )
    sock = short_tmp / "t.sock"
    d = Daemon(short_tmp, sock=sock, argv=[*script(code), str(sock)], timeout=1).start()
    assert d.info == {"pid": 0}
    with pytest.raises(AssertionError, match="ignored signal"):
        d.stop()
    assert not d.running()


def test_a_clean_env_drops_the_shells_autodoc_settings(short_tmp, monkeypatch):
    monkeypatch.setenv("AUTODOC_SOMETHING", "1")
    kept = Daemon(short_tmp).env
    clean = Daemon(short_tmp, clean_env=True, env={"AUTODOC_SHUTDOWN_DEADLINE": "2"}).env
    assert kept["AUTODOC_SOMETHING"] == "1" and kept["AUTODOC_READERS"] == os.environ["AUTODOC_READERS"]
    assert "AUTODOC_SOMETHING" not in clean and "AUTODOC_READERS" not in clean
    assert clean["AUTODOC_SHUTDOWN_DEADLINE"] == "2" and clean["AUTODOC_STORE"] == str(
        short_tmp / "store" / "autodoc.db"
    )
