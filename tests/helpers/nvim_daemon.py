"""A real AutoDoc daemon for the Neovim plugin's tests: its own process on a
temp store and socket, stopped with SIGTERM (or server.shutdown)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from autodoc.rpc.transport import socket_answers
from autodoc_client import call_socket

DEADLINE = 20.0
NO_MODEL = {"embedding": {"provider": "none"}}


def daemon_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUTODOC_")}
    env.update({"AUTODOC_LOG": "INFO", "PYTHONUNBUFFERED": "1", "AUTODOC_SHUTDOWN_DEADLINE": "2"})
    return env


def serve_argv(store: Path, sock: Path, *, watch: bool = True) -> list[str]:
    if watch:
        return [sys.executable, "-m", "autodoc.cli", "--store", str(store), "serve", "--socket", str(sock)]
    return [sys.executable, "-m", "autodoc.daemon", "--store", str(store), "--socket", str(sock), "--no-watch"]


def wait_listening(
    sock: Path, proc: subprocess.Popen | None = None, log: Path | None = None, timeout: float = DEADLINE
) -> None:
    deadline = time.monotonic() + timeout
    while not (sock.exists() and socket_answers(sock)):
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the daemon died:\n{log.read_text(errors='replace') if log else ''}")
        if time.monotonic() > deadline:
            raise AssertionError(f"the daemon never listened on {sock}")
        time.sleep(0.02)


def wait_gone(pid: int, timeout: float = DEADLINE) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        try:  # reap it when it is our child
            if os.waitpid(pid, os.WNOHANG) != (0, 0):
                return
        except ChildProcessError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} is still running")
        time.sleep(0.02)


class Daemon:
    def __init__(self, store: Path, sock: Path, log: Path, *, watch: bool = True):
        self.store, self.sock, self.log_path, self.watch = store, sock, log, watch
        self.proc: subprocess.Popen | None = None

    def start(self) -> Daemon:
        self.sock.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.store.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            serve_argv(self.store, self.sock, watch=self.watch),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._log,
            env=daemon_env(),
        )
        wait_listening(self.sock, self.proc, self.log_path)
        return self

    def call(self, method: str, params: Any = None) -> Any:
        return call_socket(self.sock, method, params, timeout=DEADLINE)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=DEADLINE)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "_log", None):
            self._log.close()

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
