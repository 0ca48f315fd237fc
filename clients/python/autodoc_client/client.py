"""A small async JSON-RPC client for the AutoDoc daemon (anyio).

    client = await Client.connect_socket(path)          # or Client.spawn_stdio(argv)
    answer = await client.call("search.query", ["kb", "lease", {"limit": 5}])
    await client.notify("$/cancelRequest", {"id": 3})
    note = await client.next_notification("changes.changed", timeout=5)
    await client.close()

No background task: whichever caller is waiting reads the connection for
everyone (responses go to their callers, notifications to a queue and the
handler), so a Client needs no task group and can be used from any task. Many
calls may be in flight at once; a slow one does not hold up the others.

Both framings are spoken: ``newline`` (default) and ``content-length``.
"""

from __future__ import annotations

import collections
import itertools
import json
import subprocess
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from os import PathLike
from typing import Any

import anyio
import anyio.abc
from anyio.streams.stapled import StapledByteStream

from autodoc.rpc.framing import CONTENT_LENGTH, NEWLINE, FrameDecoder, FrameError, encode_message

CLIENT_MAX_FRAME_BYTES = 512 * 1024 * 1024
NOTIFICATION_BUFFER = 10_000


class RemoteError(Exception):
    """The daemon answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None):
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message
        self.data = data

    @property
    def name(self) -> str | None:
        return self.data.get("name") if isinstance(self.data, dict) else None

    @classmethod
    def from_error(cls, error: dict) -> RemoteError:
        return cls(int(error.get("code", -32603)), str(error.get("message", "")), error.get("data"))


class ConnectionClosed(ConnectionError):
    """The daemon closed the connection (or never answered before closing)."""


@dataclass(frozen=True)
class Notification:
    method: str
    params: Any


class _Waiter:
    __slots__ = ("response",)

    def __init__(self) -> None:
        self.response: Any = None


class Client:
    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        *,
        framing: str = NEWLINE,
        process: anyio.abc.Process | None = None,
    ):
        if framing not in (NEWLINE, CONTENT_LENGTH):
            raise ValueError(f"framing must be {NEWLINE!r} or {CONTENT_LENGTH!r}")
        self.framing = framing
        self.process = process
        self._stream = stream
        self._decoder = FrameDecoder(CLIENT_MAX_FRAME_BYTES, framing=framing)
        self._ids = itertools.count(1)
        self._pending: dict[str, _Waiter] = {}
        self._send_lock = anyio.Lock()
        self._reading = False
        self._changed = anyio.Event()
        self._closed: BaseException | None = None
        self._notes: collections.deque[Notification] = collections.deque(maxlen=NOTIFICATION_BUFFER)
        self._handlers: list[Callable[[Notification], Any]] = []
        self._batches: list[tuple[set[str], _Waiter]] = []
        # Answers that matched no call (framing errors answered with id null…).
        self.unmatched: collections.deque[Any] = collections.deque(maxlen=1000)

    # -- opening -------------------------------------------------------------------

    @classmethod
    async def connect_socket(cls, path: str | PathLike[str], *, framing: str = NEWLINE) -> Client:
        stream = await anyio.connect_unix(str(path))
        return cls(stream, framing=framing)

    @classmethod
    async def spawn_stdio(
        cls,
        argv: Sequence[str],
        *,
        framing: str = NEWLINE,
        env: dict[str, str] | None = None,
        cwd: str | PathLike[str] | None = None,
        stderr: Any = None,
    ) -> Client:
        """Start a daemon speaking on its stdin/stdout (``autodoc serve --stdio``).
        Its stderr is inherited unless ``stderr`` says otherwise."""
        process = await anyio.open_process(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env, cwd=cwd
        )
        assert process.stdin is not None and process.stdout is not None
        return cls(StapledByteStream(process.stdin, process.stdout), framing=framing, process=process)

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    # -- calling ---------------------------------------------------------------------

    async def call(self, method: str, params: Any = None, *, timeout: float | None = None) -> Any:
        """Call ``method`` and return its result, or raise RemoteError. If the
        call is cancelled or times out, the daemon is told ($/cancelRequest)."""
        request_id = next(self._ids)
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        response = await self._roundtrip(message, [request_id], timeout)
        return _unwrap(response[0])

    async def call_raw(self, message: Any, *, timeout: float | None = None) -> Any:
        """Send one request object or a batch as given; return the response
        object(s) as received (a batch of notifications returns None at once)."""
        items = message if isinstance(message, list) else [message]
        ids = [m["id"] for m in items if isinstance(m, dict) and "id" in m and "method" in m]
        if not ids:
            await self._send(message)
            return None
        if not isinstance(message, list):
            return (await self._roundtrip(message, ids, timeout))[0]
        # A batch: return its whole answer as sent, with any id-null errors in it.
        batch = _Waiter()
        self._batches.append(({_key(i) for i in ids}, batch))
        try:
            await self._roundtrip(message, ids, timeout)
        finally:
            self._batches = [b for b in self._batches if b[1] is not batch]
        return batch.response

    async def batch(self, calls: Sequence[tuple[str, Any]], *, timeout: float | None = None) -> list[Any]:
        """Send several calls as one batch; results (or RemoteError instances) in order."""
        message = []
        for method, params in calls:
            item: dict[str, Any] = {"jsonrpc": "2.0", "id": next(self._ids), "method": method}
            if params is not None:
                item["params"] = params
            message.append(item)
        responses = await self._roundtrip(message, [m["id"] for m in message], timeout)
        out: list[Any] = []
        for response in responses:
            try:
                out.append(_unwrap(response))
            except RemoteError as exc:
                out.append(exc)
        return out

    async def notify(self, method: str, params: Any = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)

    async def cancel(self, request_id: Any) -> None:
        await self.notify("$/cancelRequest", {"id": request_id})

    def next_id(self) -> int:
        """Reserve an id (to cancel a call_raw request by id, say)."""
        return next(self._ids)

    async def send_bytes(self, data: bytes) -> None:
        """Write raw bytes (tests of the daemon's framing)."""
        async with self._send_lock:
            await self._stream.send(data)

    # -- notifications --------------------------------------------------------------------

    def on_notification(self, handler: Callable[[Notification], Any]) -> None:
        """Call ``handler(notification)`` for each notification, as it is read."""
        self._handlers.append(handler)

    async def next_notification(self, method: str | None = None, *, timeout: float | None = None) -> Notification:
        """The next queued notification (of ``method``, if given), reading as needed."""

        def found() -> bool:
            return any(method is None or n.method == method for n in self._notes)

        with anyio.fail_after(timeout):
            await self._pump_until(found)
        for i, note in enumerate(self._notes):
            if method is None or note.method == method:
                del self._notes[i]
                return note
        raise AssertionError("unreachable")

    async def notifications(self) -> AsyncIterator[Notification]:
        """Every notification, as it arrives, until the connection closes."""
        while True:
            try:
                yield await self.next_notification()
            except ConnectionClosed:
                return

    async def next_unmatched(self, *, timeout: float | None = None) -> Any:
        """The next answer that matched no call: the daemon's reply (id null)
        to a frame it could not read, say."""
        with anyio.fail_after(timeout):
            await self._pump_until(lambda: bool(self.unmatched))
        return self.unmatched.popleft()

    def pending_notifications(self) -> list[Notification]:
        """Drain what has been read already, without reading."""
        out = list(self._notes)
        self._notes.clear()
        return out

    async def listen(self) -> None:
        """Read until the connection closes, delivering notifications to the
        handlers (for a client that only listens)."""
        try:
            await self._pump_until(lambda: False)
        except ConnectionClosed:
            return

    # -- closing -----------------------------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def close(self, *, timeout: float = 10.0) -> int | None:
        """Close the connection. For a spawned daemon: close its stdin (it
        shuts down), wait up to ``timeout`` s, then terminate it; return its
        exit status."""
        if self._closed is None:
            self._closed = ConnectionClosed("the client closed the connection")
        with anyio.CancelScope(shield=True):
            if self.process is None:
                try:
                    await self._stream.aclose()
                except Exception:
                    pass
                return None
            process = self.process
            try:
                if process.stdin is not None:
                    await process.stdin.aclose()
            except Exception:
                pass
            with anyio.move_on_after(timeout):
                # Keep reading its stdout so it never blocks writing a last answer.
                with anyio.CancelScope() as drain:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._drain_stdout, drain)
                        await process.wait()
                        drain.cancel()
            if process.returncode is None:
                process.terminate()
                with anyio.move_on_after(3):
                    await process.wait()
            if process.returncode is None:
                process.kill()
                await process.wait()
            try:
                await self._stream.aclose()
            except Exception:
                pass
            return process.returncode
        return None  # not reached: the scope is shielded (mypy cannot tell that it never swallows)

    async def _drain_stdout(self, scope: anyio.CancelScope) -> None:
        try:
            while True:
                await self._stream.receive(65536)
        except Exception:
            pass

    # -- the reading machinery ------------------------------------------------------------------

    async def _send(self, message: Any) -> None:
        if self._closed is not None:
            raise ConnectionClosed(str(self._closed))
        data = encode_message(message, self.framing)
        try:
            async with self._send_lock:
                await self._stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
            self._fail(ConnectionClosed(f"the daemon closed the connection ({exc.__class__.__name__})"))
            raise ConnectionClosed("the daemon closed the connection") from exc

    async def _roundtrip(self, message: Any, ids: list[Any], timeout: float | None) -> list[Any]:
        waiters = {_key(i): _Waiter() for i in ids}
        self._pending.update(waiters)
        try:
            with anyio.fail_after(timeout):
                try:
                    await self._send(message)
                    await self._pump_until(lambda: all(w.response is not None for w in waiters.values()))
                except anyio.get_cancelled_exc_class():
                    with anyio.CancelScope(shield=True), anyio.move_on_after(1):
                        if self._closed is None:
                            for i in ids:
                                if waiters[_key(i)].response is None:
                                    try:
                                        await self.cancel(i)
                                    except ConnectionClosed:
                                        break
                    raise
        finally:
            for key in waiters:
                self._pending.pop(key, None)
        return [waiters[_key(i)].response for i in ids]

    async def _pump_until(self, done: Callable[[], bool]) -> None:
        while not done():
            if self._closed is not None:
                raise ConnectionClosed(str(self._closed))
            if self._reading:
                changed = self._changed
                await changed.wait()
                continue
            self._reading = True
            try:
                while not done():
                    try:
                        data = await self._stream.receive(65536)
                    except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError) as exc:
                        self._fail(ConnectionClosed(f"the daemon closed the connection ({exc.__class__.__name__})"))
                        break
                    for item in self._decoder.feed(data):
                        self._deliver(item)
                    self._wake()
            finally:
                self._reading = False
                self._wake()

    def _wake(self) -> None:
        changed, self._changed = self._changed, anyio.Event()
        changed.set()

    def _fail(self, error: BaseException) -> None:
        if self._closed is None:
            self._closed = error
        self._wake()

    def _deliver(self, item: Any) -> None:
        if isinstance(item, FrameError):
            self.unmatched.append({"framing_error": item.message})
            return
        try:
            message = json.loads(item.payload)
        except ValueError:
            self.unmatched.append({"bad_json": item.payload[:200]})
            return
        if isinstance(message, list):
            keys = {_key(m.get("id")) for m in message if isinstance(m, dict)}
            for wanted, waiter in self._batches:
                if wanted & keys and waiter.response is None:
                    waiter.response = message
                    break
        for one in message if isinstance(message, list) else [message]:
            self._deliver_one(one)

    def _deliver_one(self, message: Any) -> None:
        if not isinstance(message, dict):
            self.unmatched.append(message)
            return
        if "method" in message and "id" not in message:
            note = Notification(message["method"], message.get("params"))
            self._notes.append(note)
            for handler in list(self._handlers):
                try:
                    handler(note)
                except Exception:  # a handler's bug must not break the connection
                    pass
            return
        waiter = self._pending.get(_key(message.get("id")))
        if waiter is None or waiter.response is not None:
            self.unmatched.append(message)
            return
        waiter.response = message


def _key(request_id: Any) -> str:
    return json.dumps(request_id)


def _unwrap(response: Any) -> Any:
    if not isinstance(response, dict):
        raise RemoteError(-32603, f"malformed response {response!r}")
    if "error" in response:
        raise RemoteError.from_error(response["error"] or {})
    return response.get("result")


def call_socket(path: str | PathLike[str], method: str, params: Any = None, timeout: float = 30.0) -> Any:
    """One call over the daemon's socket, synchronously (for the CLI). Raises
    RemoteError, OSError (no daemon there) or TimeoutError."""

    async def main() -> Any:
        with anyio.fail_after(timeout):
            client = await Client.connect_socket(path)
            try:
                return await client.call(method, params)
            finally:
                await client.close()

    return anyio.run(main)
