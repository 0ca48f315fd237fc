"""RPC stage, the quick lane: a lone request for a quick read, answered by the
connection's reader as soon as the frame is parsed.

A request otherwise gets a task of its own, jsonrpcserver's dispatch, a cancel
scope and the method's routing: about eight turns of the event loop and a few
hundred Python calls around a read that may itself take 1–2 ms
(docs/benchmarks/daemon_overhead.md). When rpc/inline.py's rule would run the
read on the event loop anyway (the daemon idle, the read's kind known to be
quick), none of that buys anything: nothing else can run while it does, and a
read on the loop cannot be cancelled mid-run either. So the reader binds the
params, runs the read and hands the answer straight back.

What stays the same as on the usual path: the params' binding and schema check
(the same -32602 naming the field), the errors and their codes, the result
check under AUTODOC_CHECK_RESULTS, and the inline rule's bookkeeping (each run
is recorded, so a read that turns slow leaves the lane). What goes: the task,
jsonrpcserver, and the cancel scope (nothing could cancel a run on the loop).

Input: one parsed message. Output: its answer, or None when it is not for the
lane (a batch, a notification, a write, a method with its own handler, a busy
daemon, a kind not known to be quick, bytes waiting on any connection; all known
before the params are bound): the usual path then answers it.

Why the last: the lane answers a request before the loop reads the next one, so a
burst of clients, each request answered alone, would always find the daemon
idle and be served one by one on the loop's one core; with bytes waiting, the
requests go to tasks, are admitted together, and reach the reader processes
and threads as before.

Runs on: the event loop.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from ..errors import AutodocError, InternalError
from . import schemas
from .dispatch import check_result, error_response, request_problem
from .inline import InlineReads, read_kind

log = logging.getLogger("autodoc.rpc")


class QuickLane:
    def __init__(self, reads: dict[str, Callable[[dict], Any]], inline: InlineReads, *, check_results: bool = False,
                 input_waiting: Callable[[], bool] = lambda: False):
        self.reads = reads  # method name → its call on bound params (plain reads only)
        self.inline = inline
        self.check_results = check_results
        self.input_waiting = input_waiting  # another request is on its way (the server polls its connections)

    def answer(self, message: Any) -> dict | None:
        inline = self.inline
        if inline.running or inline.admitted or not isinstance(message, dict):
            return None
        if "id" not in message or request_problem(message) is not None:
            return None  # the usual path says what is wrong (a method that is not a string…)
        read = self.reads.get(message["method"])
        if read is None:
            return None
        name, rid = message["method"], message["id"]
        # as jsonrpcserver hands params to the usual path: absent, [] and {} alike
        raw = message.get("params") or {}
        try:
            kind = read_kind(name, raw)  # the kind of the bound params too: decided before binding
            if not inline.may_run(kind) or self.input_waiting():
                return None
            params = schemas.bind_params(name, raw)
        except AutodocError as exc:
            return error_response(exc, rid)
        except Exception:
            log.exception("%s: the quick lane failed before the call", name)
            return error_response(InternalError("internal error"), rid)
        inline.running += 1
        inline.admitted += 1
        try:
            result = inline.measured(kind, read, params)
        except AutodocError as exc:
            return error_response(exc, rid)
        except Exception:
            log.exception("%s failed", name)
            return error_response(InternalError("internal error"), rid)
        finally:
            inline.running -= 1
            inline.admitted -= 1
        if self.check_results:
            try:
                check_result(name, result)
            except AutodocError as exc:
                return error_response(exc, rid)
        return {"jsonrpc": "2.0", "result": result, "id": rid}
