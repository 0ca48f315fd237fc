"""The one way the tests start a real AutoDoc daemon: `autodoc serve --socket`
in its own process on a store, socket and XDG dirs of its own (under a short
temp folder: a Unix socket path must fit in 104 bytes), its stderr in a log
file, started once its socket answers `server.info` (an event, never a fixed
sleep), stopped with SIGTERM and a deadline, killed when it overstays.

`Daemon(base)` gives the defaults (base/store/autodoc.db, base/run/autodoc.sock,
base/daemon.log); a test keeps its own paths, extra arguments (`args`), extra
environment (`env`) or a whole argv (`argv`: the installed wheel's `autodoc`,
`python -m autodoc.daemon`). conftest's `daemon_factory` fixture builds them
and stops whatever a test left running."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from autodoc.rpc.framing import NEWLINE, Frame, FrameDecoder, encode_message
from autodoc.rpc.transport import socket_answers
from autodoc_client import call_socket

DEADLINE = 20.0
NO_MODEL = {"embedding": {"provider": "none"}}
# A daemon's own XDG dirs (base/xdg/runtime, …): nothing it writes lands in the user's home.
_XDG = ("XDG_RUNTIME_DIR", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME")


def serve_argv(store: Path, sock: Path, *args: str) -> list[str]:
    """`python -m autodoc.cli --store STORE serve --socket SOCK ARGS…` from this venv."""
    return [sys.executable, "-m", "autodoc.cli", "--store", str(store), "serve", "--socket", str(sock), *args]


def daemon_argv(store: Path, sock: Path, *args: str) -> list[str]:
    """`python -m autodoc.daemon` (no CLI in front), for `--no-watch` and the like."""
    return [sys.executable, "-m", "autodoc.daemon", "--store", str(store), "--socket", str(sock), *args]


def isolated_env(
    base: Path | None = None,
    store: Path | None = None,
    sock: Path | None = None,
    extra: Mapping[str, str] | None = None,
    *,
    clean: bool = False,
) -> dict[str, str]:
    """This process's environment for a daemon or CLI: AUTODOC_STORE, AUTODOC_SOCKET and the XDG
    dirs under `base` when given; `clean` drops every inherited AUTODOC_* first (the suite's
    defaults from conftest included), then `extra` on top."""
    env = {k: v for k, v in os.environ.items() if not (clean and k.startswith("AUTODOC_"))}
    env.update({"AUTODOC_LOG": "INFO", "PYTHONUNBUFFERED": "1"})
    if base is not None:
        for name in _XDG:
            env[name] = str(base / "xdg" / name.split("_")[1].lower())
    if store is not None:
        env["AUTODOC_STORE"] = str(store)
    if sock is not None:
        env["AUTODOC_SOCKET"] = str(sock)
    env.update(extra or {})
    return env


def server_info(sock: Path, timeout: float = DEADLINE) -> Any:
    """server.info over a plain blocking socket: callable from a test's running event loop,
    where autodoc_client's call_socket (its own anyio.run) is not."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(str(sock))
        s.sendall(encode_message({"jsonrpc": "2.0", "id": 1, "method": "server.info", "params": {}}, NEWLINE))
        decoder = FrameDecoder(framing=NEWLINE)
        while True:
            data = s.recv(65536)
            if not data:
                raise ConnectionResetError(f"{sock} closed before it answered server.info")
            for item in decoder.feed(data):
                if isinstance(item, Frame):
                    message = json.loads(item.payload)
                    if message.get("id") == 1:
                        if "error" in message:
                            raise AssertionError(f"server.info failed: {message['error']}")
                        return message["result"]


def wait_listening(
    sock: Path,
    proc: subprocess.Popen | None = None,
    log: Path | None = None,
    timeout: float = DEADLINE,
    *,
    info: bool = False,
) -> Any:
    """Until `sock` accepts a connection (and, with `info`, answers server.info: that answer is
    returned); an AssertionError with the log when `proc` dies or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        if sock.exists() and socket_answers(sock):
            if not info:
                return None
            try:
                return server_info(sock, timeout=max(1.0, deadline - time.monotonic()))
            except OSError:
                pass  # bound but not serving yet, or just gone: look again
        if proc is not None and proc.poll() is not None:
            text = log.read_text(errors="replace") if log and log.exists() else ""
            raise AssertionError(f"the daemon died (exit {proc.returncode}):\n{text}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the daemon never listened on {sock}")
        time.sleep(0.02)


def wait_gone(pid: int, timeout: float = DEADLINE) -> None:
    """Until process `pid` has exited (reaped when it is our child)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                return
        except ChildProcessError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} is still running")
        time.sleep(0.02)


class Daemon:
    """One daemon process; `start()` again after `stop()`/`kill()` restarts it on the same paths."""

    def __init__(
        self,
        base: Path,
        *,
        store: Path | None = None,
        sock: Path | None = None,
        log: Path | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        argv: Sequence[str] | None = None,
        clean_env: bool = False,
        timeout: float = DEADLINE,
    ):
        self.base = base
        self.store = store or base / "store" / "autodoc.db"
        self.sock = sock or base / "run" / "autodoc.sock"
        self.log_path = log or base / "daemon.log"
        self.argv = list(argv) if argv is not None else serve_argv(self.store, self.sock, *args)
        self.env = isolated_env(base, self.store, self.sock, env, clean=clean_env)
        self.timeout = timeout
        self.proc: subprocess.Popen | None = None
        self.info: Any = None
        self._log: Any = None

    @property
    def pid(self) -> int:
        assert self.proc is not None, "the daemon was never started"
        return self.proc.pid

    def start(self, timeout: float | None = None) -> Daemon:
        """Start it and wait until its socket answers server.info (its answer in `self.info`)."""
        self.sock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.store.parent.mkdir(parents=True, exist_ok=True)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        for name in _XDG:
            Path(self.env[name]).mkdir(parents=True, exist_ok=True, mode=0o700)
        if self._log is None:
            self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            self.argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=self._log, env=self.env
        )
        try:
            self.info = wait_listening(self.sock, self.proc, self.log_path, timeout or self.timeout, info=True)
        except BaseException:
            self.kill()
            raise
        return self

    def call(self, method: str, params: Any = None, timeout: float | None = None) -> Any:
        return call_socket(self.sock, method, params, timeout=timeout or self.timeout)

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def wait(self, timeout: float | None = None) -> int:
        """Until it exits by itself (after server.shutdown, say): its exit code."""
        assert self.proc is not None
        return self.proc.wait(timeout=timeout or self.timeout)

    def stop(self, timeout: float | None = None, *, sig: int = signal.SIGTERM) -> int | None:
        """SIGTERM (or `sig`) and wait for the exit; killed, and an AssertionError with its log,
        when it is still running at the deadline. Its exit code (None: never started); the log
        is closed (a `start()` again reopens it)."""
        if self.proc is None:
            return None
        try:
            if self.proc.poll() is None:
                self.proc.send_signal(sig)
                try:
                    self.proc.wait(timeout=timeout or self.timeout)
                except subprocess.TimeoutExpired:
                    self.proc.send_signal(signal.SIGUSR1)  # its threads' stacks into the log (daemon.py)
                    time.sleep(1)
                    self.kill()
                    raise AssertionError(f"the daemon ignored signal {sig}:\n{self.log_text()}") from None
            return self.proc.returncode
        finally:
            self.close()

    def kill(self) -> None:
        """SIGKILL, reaped: no shutdown of its own (a crash, or a test's clean-up)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        """Kill it if it still runs and close the log: a fixture's last word, never raising."""
        self.kill()
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        if self._log is not None:
            self._log.flush()
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def __enter__(self) -> Daemon:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        if exc[0] is None:
            self.stop()
        else:
            self.close()


def machine(base: Path, uri: str, *args: str) -> Daemon:
    """A daemon as another machine runs it on a shared database: its own socket, XDG dirs and log."""
    sock = base / "s.sock"
    return Daemon(
        base, store=base / "unused.db", sock=sock, argv=daemon_argv(uri, sock, *args), env={"AUTODOC_STORE": uri}
    )
