"""RPC stage, one connection: bytes in → frames → dispatch → frames out.

Input: a byte stream (a Unix socket, or stdin/stdout). Output: the answers,
in the framing the peer used, plus server-to-client notifications.

Requests on one connection run concurrently, each in its own task under its
own cancel scope; ``$/cancelRequest`` cancels one, and a peer that goes away
cancels all of its own. Outgoing messages go through one bounded outbox read
by one writer task, so frames never interleave; a notification that finds the
outbox full is dropped (changes can always be re-read with changes.since).
"""

from __future__ import annotations

import logging
import select
from dataclasses import dataclass, field
from typing import Any, Callable

import anyio
import anyio.abc

from ..config import MAX_FRAME_BYTES
from .dispatch import (
    Dispatcher,
    InFlight,
    cancel_target,
    error_response,
    id_key,
    parse_message,
    request_ids,
)
from .framing import NEWLINE, FrameDecoder, FrameError, encode_message
from ..errors import InternalError, InvalidRequest, ParseError
from jsonrpcserver.sentinels import NOID

log = logging.getLogger("autodoc.rpc")

OUTBOX_SIZE = 1024
READ_SIZE = 256 * 1024


@dataclass
class Subscription:
    """Which workspaces' changes this connection has asked to be pushed."""

    all: bool = False
    names: set[str] = field(default_factory=set)

    def wants(self, workspace: str) -> bool:
        return self.all or workspace in self.names

    @property
    def active(self) -> bool:
        return self.all or bool(self.names)

    def to_json(self) -> dict:
        return {"all": self.all, "workspaces": sorted(self.names)}


def socket_peer_gone(stream: anyio.abc.ByteStream) -> Callable[[], bool]:
    """For a Unix socket that read EOF: has the peer closed entirely, or only
    shut down its sending side (``printf … | nc -U`` waits for the answer)?
    Linux reports POLLHUP on an AF_UNIX stream only once both directions are
    shut down."""

    def gone() -> bool:
        try:
            sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
            poller = select.poll()
            poller.register(sock.fileno(), select.POLLHUP | getattr(select, "POLLRDHUP", 0))
            for _, mask in poller.poll(0):
                if mask & select.POLLHUP:
                    return True
            return False
        except Exception:
            return True

    return gone


class Connection:
    def __init__(
        self,
        stream: anyio.abc.ByteStream,
        dispatcher: Dispatcher,
        *,
        name: str,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        accepting: Callable[[], bool] = lambda: True,
        on_eof: Callable[[], None] | None = None,
        peer_gone: Callable[[], bool] = lambda: True,
    ):
        self.stream = stream
        self.dispatcher = dispatcher
        self.name = name
        self.decoder = FrameDecoder(max_frame_bytes)
        self.subscription = Subscription()
        self.closed = False
        self._accepting = accepting
        self._on_eof = on_eof
        self._peer_gone = peer_gone
        self._inflight: dict[str, InFlight] = {}
        self._outbox_send, self._outbox_recv = anyio.create_memory_object_stream[bytes](OUTBOX_SIZE)
        self._read_scope: anyio.CancelScope | None = None
        self._scope = anyio.CancelScope()
        self._broken = False
        self.done = anyio.Event()

    @property
    def framing(self) -> str:
        return self.decoder.framing or NEWLINE

    @property
    def inflight_count(self) -> int:
        return len(self._inflight)

    # -- the connection's life -------------------------------------------------------

    async def run(self) -> None:
        try:
            with self._scope:
                async with anyio.create_task_group() as tg:
                    tg.start_soon(self._write_loop)
                    async with anyio.create_task_group() as requests:
                        with anyio.CancelScope() as self._read_scope:
                            await self._read_loop(requests)
                        if not self.closed:
                            if self._on_eof is not None:
                                self._on_eof()
                            if self._peer_gone():
                                self.cancel_all("disconnect")
                    # Every request has answered: let the writer flush and stop.
                    self._outbox_send.close()
        finally:
            self.closed = True
            self.cancel_all("disconnect")
            self._outbox_send.close()
            with anyio.CancelScope(shield=True):
                try:
                    await self.stream.aclose()
                except Exception:
                    pass
            self.done.set()

    def stop_reading(self) -> None:
        """Shutdown: read no more; answer what is in flight, then close."""
        self.closed = True
        if self._read_scope is not None:
            self._read_scope.cancel()

    def kill(self) -> None:
        self.closed = True
        self._scope.cancel()

    async def _read_loop(self, requests: anyio.abc.TaskGroup) -> None:
        while True:
            try:
                data = await self.stream.receive(READ_SIZE)
            except anyio.EndOfStream:
                break
            except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                self._broken = True
                self.cancel_all("disconnect")
                break
            for item in self.decoder.feed(data):
                self._take(item, requests)
        for item in self.decoder.feed_eof():
            self._take(item, requests)

    def _take(self, item: Any, requests: anyio.abc.TaskGroup) -> None:
        if isinstance(item, FrameError):
            cls = ParseError if item.code == ParseError.code else InvalidRequest
            self.send_nowait_or_soon(error_response(cls(item.message), None), requests)
            return
        message, problem = parse_message(item.payload)
        if problem is not None:
            self.send_nowait_or_soon(problem, requests)
            return
        target = cancel_target(message)
        if target is not NOID:
            self.cancel_request(target)
            return
        registered = []
        for rid in request_ids(message):
            inflight = self._inflight[id_key(rid)] = InFlight(rid)
            registered.append(inflight)
        requests.start_soon(self._handle, message, self._accepting(), registered)

    async def _handle(self, message: Any, admitted: bool, registered: list[InFlight]) -> None:
        try:
            response = await self.dispatcher.dispatch(message, self, admitted=admitted)
        finally:
            # Requests refused before they ran (invalid ones) never ended themselves.
            for inflight in registered:
                self.end_request(inflight.id, inflight)
        if response is not None:
            await self.send(response)

    async def _write_loop(self) -> None:
        async with self._outbox_recv:
            async for data in self._outbox_recv:
                if self._broken:
                    continue
                try:
                    await self.stream.send(data)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    self._broken = True
                    log.debug("%s: the peer went away while we wrote", self.name)
                    self.cancel_all("disconnect")

    # -- what the dispatcher and the methods call ---------------------------------------------

    def inflight_for(self, request_id: Any) -> InFlight | None:
        return self._inflight.get(id_key(request_id))

    def end_request(self, request_id: Any, inflight: InFlight | None) -> None:
        key = id_key(request_id)
        if self._inflight.get(key) is inflight:
            del self._inflight[key]

    def cancel_request(self, request_id: Any) -> bool:
        inflight = self._inflight.get(id_key(request_id))
        if inflight is None:
            return False
        inflight.cancel("cancelled")
        return True

    def cancel_all(self, reason: str) -> None:
        for inflight in list(self._inflight.values()):
            inflight.cancel(reason)

    def _encode(self, message: Any) -> bytes:
        try:
            return encode_message(message, self.framing)
        except (TypeError, ValueError):
            # A result that is not JSON (NaN, a Path…): the method's bug, not the client's.
            log.exception("%s: an answer could not be encoded as JSON", self.name)
            broken = error_response(InternalError("internal error: the answer was not JSON"), None)
            if isinstance(message, list):
                return encode_message([self._reencoded(m, broken) for m in message], self.framing)
            return encode_message(self._reencoded(message, broken), self.framing)

    def _reencoded(self, message: Any, broken: dict) -> Any:
        try:
            encode_message(message, self.framing)
            return message
        except (TypeError, ValueError):
            rid = message.get("id") if isinstance(message, dict) else None
            return {**broken, "id": rid}

    async def send(self, message: Any) -> None:
        try:
            await self._outbox_send.send(self._encode(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def send_nowait_or_soon(self, message: Any, tg: anyio.abc.TaskGroup) -> None:
        try:
            self._outbox_send.send_nowait(self._encode(message))
        except anyio.WouldBlock:
            tg.start_soon(self.send, message)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass

    def notify_nowait(self, method: str, params: Any) -> bool:
        """Queue a notification; False if it was dropped (outbox full or closed)."""
        if self._broken:
            return False
        try:
            self._outbox_send.send_nowait(encode_message({"jsonrpc": "2.0", "method": method, "params": params}, self.framing))
            return True
        except anyio.WouldBlock:
            log.warning("%s: outbox full, dropped a %s notification", self.name, method)
            return False
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
