"""The daemon never dies and never answers -32603 for bad input: every failure
protocol fuzzing found (issue 16) as a fixed case, then hypothesis properties
over frames, envelopes and every method's params, all sent to a real daemon
(``autodoc serve --socket``, its own process, a real store with tests/corpora/kb
indexed) over its real Unix socket. The generators are bench/reliability.py's;
``python -m bench.reliability fuzz`` runs them for 100,000 cases."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from hypothesis import HealthCheck, given, settings

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from autodoc.rpc.connection import MAX_INFLIGHT_REQUESTS
from autodoc.rpc.dispatch import MAX_BATCH_REQUESTS, MAX_JSON_DEPTH, Dispatcher
from autodoc.rpc.framing import CONTENT_LENGTH, NEWLINE
from autodoc.rpc.server import RpcServer
from autodoc_client import Client, RemoteError
from bench.reliability import (
    KB,
    MAX_FRAME,
    SENTINEL_ID,
    Case,
    FuzzDaemon,
    envelope_cases,
    flatten,
    frame_bytes,
    frame_cases,
    params_cases,
    run_case,
)

FUZZ = settings(
    max_examples=200,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)


@pytest.fixture(scope="module")
def daemon(fuzz_daemon):
    return fuzz_daemon


def send(daemon: FuzzDaemon, data: bytes, framing: str = NEWLINE, expect_sentinel: bool = True):
    """Run one case; return the answers other than the sentinel's, after
    checking the invariants every case must keep."""
    out = run_case(daemon, Case(data=data, framing=framing, frames=1, expect_sentinel=expect_sentinel))
    assert not out.problems, f"{out.problems}\n{daemon.log_text()[-2000:]}"
    return [a for a in out.answers if not (isinstance(a, dict) and a.get("id") == SENTINEL_ID)]


def line(message) -> bytes:
    return json.dumps(message).encode() + b"\n"


def codes(answers) -> list:
    return [m["error"]["code"] if "error" in m else "ok" for m in flatten(answers)]


# -- each failure the fuzzing found, as a case ---------------------------------------------------------------


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH + 1, 1000, 30_000])
def test_deep_nesting_is_an_invalid_request_not_an_exit(daemon, depth):
    (answer,) = send(daemon, b"[" * depth + b"]" * depth + b"\n")
    assert answer["error"]["code"] == -32600 and answer["id"] is None
    assert "nested deeper than" in answer["error"]["message"]


def test_deep_params_answer_to_their_request_id(daemon):
    deep = "[" * 100 + "]" * 100
    text = '{"jsonrpc":"2.0","id":7,"method":"search.query","params":["kb",' + deep + "]}\n"
    (answer,) = send(daemon, text.encode())
    assert answer["id"] == 7 and answer["error"]["code"] == -32600


def test_params_deeper_than_their_limit_are_invalid_params_naming_the_field(daemon):
    facets = {"a": [1]}
    for _ in range(40):
        facets = {"a": facets}
    (answer,) = send(
        daemon, line({"jsonrpc": "2.0", "id": 1, "method": "search.query", "params": ["kb", "x", {"facets": facets}]})
    )
    assert answer["error"]["code"] == -32602, answer
    assert answer["error"]["data"]["field"].startswith("opts.facets.a")


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e999999"])
def test_an_id_no_answer_could_carry_is_a_parse_error(daemon, raw):
    (answer,) = send(daemon, b'{"jsonrpc":"2.0","id":%s,"method":"server.info"}\n' % raw.encode())
    assert answer["error"]["code"] == -32700 and answer["id"] is None


def test_a_lone_surrogate_id_is_echoed_exactly(daemon):
    (answer,) = send(daemon, b'{"jsonrpc":"2.0","id":"\\ud800x","method":"server.info"}\n')
    assert answer["id"] == "\ud800x" and answer["result"]["name"] == "autodoc"


def test_a_lone_surrogate_as_raw_bytes_is_not_utf8(daemon):
    (answer,) = send(daemon, b'{"jsonrpc":"2.0","id":1,"method":"server.info","params":{"x":"\xed\xa0\x80"}}\n')
    assert answer["error"]["code"] == -32700


def test_a_nested_batch_is_an_invalid_element(daemon):
    inner = [{"jsonrpc": "2.0", "id": 1, "method": "server.info"}]
    (answer,) = send(daemon, line([inner, {"jsonrpc": "2.0", "id": 2, "method": "workspace.list"}]))
    assert [(m["id"], c) for m, c in zip(answer, codes([answer]))] == [(None, -32600), (2, "ok")]
    assert "must be an object, not an array" in answer[0]["error"]["message"]


def test_a_batch_repeating_an_id_runs_it_once(daemon):
    (answer,) = send(
        daemon,
        line(
            [
                {"jsonrpc": "2.0", "id": 1, "method": "server.info"},
                {"jsonrpc": "2.0", "id": 1, "method": "workspace.status", "params": [KB]},
                {"jsonrpc": "2.0", "id": 1, "method": "no.such"},
            ]
        ),
    )
    assert [m["id"] for m in answer] == [1, 1, 1]
    assert codes([answer]) == ["ok", -32600, -32600]
    assert answer[0]["result"]["name"] == "autodoc"


def test_a_batch_over_the_limit_is_refused_whole(daemon):
    batch = [{"jsonrpc": "2.0", "id": i, "method": "server.info"} for i in range(MAX_BATCH_REQUESTS + 1)]
    (answer,) = send(daemon, line(batch))
    assert answer["error"]["code"] == -32600 and answer["id"] is None
    (full,) = send(daemon, line(batch[:-1]))
    assert len(full) == MAX_BATCH_REQUESTS and set(codes([full])) == {"ok"}


@pytest.mark.parametrize(
    "method, params, field",
    [
        ("document.read", [KB, "adrs/\x00.md"], "path"),
        ("document.read", [KB, "index.md\ud800"], "path"),
        ("search.query", [KB, "lease\x00"], "query"),
        ("search.query", [KB, "\udfff"], "query"),
        ("search.query", [KB, "x", {"tags": ["ok", "a\x00"]}], "opts.tags[1]"),
        ("search.query", [KB, "x", {"paths": "\ud800"}], "opts.paths"),
        ("search.query", [KB, "x", {"facets": {"ty\x00pe": "adr"}}], "opts.facets"),
        ("workspace.tags", [KB, "\x00"], "prefix"),
        ("workspace.add", ["fz2", "/tmp/\x00"], "root"),
        ("workspace.add", ["fz2", "/" + "a" * 5000], "root"),
        ("changes.since", [KB, 2**64], "cursor"),
        ("changes.since", [KB, 2**63], "cursor"),
        ("document.read", [KB, "index.md", {"line_start": 1, "line_end": 2**64}], "opts.line_end"),
        ("document.read", [KB, "index.md", {"byte_start": 2**70}], "opts.byte_start"),
        ("workspace.configure", ["fz", {"max_file_bytes": 10**29}], "options.max_file_bytes"),
        ("document.links", [KB, "x" * 5000], "path"),
        # Found by the long run: a part longer than a file name may be (ENAMETOOLONG in the service).
        ("workspace.add", ["fz2", "a" * 300], "root"),
        ("document.read", [KB, "adrs/" + "b" * 256 + ".md"], "path"),
        ("search.query", [KB, "x", {"facets": {f"f{i}": "a" for i in range(65)}}], "opts.facets"),
        ("search.query", [KB, "x", {"tags": ["t"] * 1001}], "opts.tags"),
    ],
)
def test_hostile_params_are_invalid_params_naming_the_field(daemon, method, params, field):
    (answer,) = send(daemon, line({"jsonrpc": "2.0", "id": 3, "method": method, "params": params}))
    assert answer["error"]["code"] == -32602, answer
    assert answer["error"]["data"]["field"] == field
    assert answer["error"]["message"].startswith(field + ": ")


@pytest.mark.parametrize("params", [{}, {"idx": 1}, {"id": [1]}, []])
def test_a_cancel_naming_no_id_is_ignored(daemon, params):
    # Found by the long run: params without an id ended the daemon (KeyError in the reader).
    assert send(daemon, line({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": params})) == []


def test_the_largest_cursor_is_an_answer(daemon):
    (answer,) = send(daemon, line({"jsonrpc": "2.0", "id": 1, "method": "changes.since", "params": [KB, 2**63 - 1]}))
    assert answer["result"]["changes"] == [] and answer["result"]["has_more"] is False


# -- lying Content-Length headers ---------------------------------------------------------------------------


BODY = json.dumps({"jsonrpc": "2.0", "id": 5, "method": "workspace.list"}).encode()


@pytest.mark.parametrize(
    "header, expected",
    [
        # The cut body is not JSON; its tail, glued to the next header, is a bad header; then the next frame.
        (b"Content-Length: %d" % (len(BODY) - 3), [-32700, -32700]),
        (b"Content-Length: -%d" % len(BODY), [-32700]),
        (b"Content-Length: twelve", [-32700]),
        (b"Content-Length: " + b"9" * 5000, [-32700]),
        (b"Content-Length: " + b"9" * 19, [-32700]),
        (b"Content-Length: %d\r\nContent-Length: %d" % (len(BODY), len(BODY) + 1), [-32700]),
        (b"Content-Type: text/plain", [-32700]),
        (b"Content-Length: %d\r\nContent-Type: x" % len(BODY), ["ok"]),
        (b"content-length:%d" % len(BODY), ["ok"]),
    ],
)
def test_lying_content_length_headers_cost_only_their_own_frame(daemon, header, expected):
    answers = send(daemon, header + b"\r\n\r\n" + BODY, CONTENT_LENGTH)
    assert codes(answers) == expected


def test_a_short_body_glued_to_a_lying_header_costs_both_frames_only(daemon):
    # Found by the long run: the glued tail was read as an unknown header and the
    # second Content-Length taken, eating a byte of the frame after.
    short = b"Content-Length: %d\r\n\r\n" % (len(BODY) - 10) + BODY
    two = b"Content-Length: %d\r\nContent-Length: %d\r\n\r\n" % (len(BODY), len(BODY) + 1) + BODY
    assert codes(send(daemon, short + two, CONTENT_LENGTH)) == [-32700, -32700, -32700]
    # A tail of letters only reads as a header name; still the glued header is found.
    letters = b"Content-Length: 1\r\n\r\nfalse"
    two = b"Content-Length: 5\r\nContent-Length: 6\r\n\r\nfalse"
    assert codes(send(daemon, letters + two, CONTENT_LENGTH)) == [-32700, -32700, -32700]


def test_a_content_length_larger_than_the_body_waits_for_it_then_says_so(daemon):
    answers = send(
        daemon, b"Content-Length: %d\r\n\r\n" % (len(BODY) + 500) + BODY, CONTENT_LENGTH, expect_sentinel=False
    )
    assert codes(answers) == [-32700]  # cut off at end of input


def test_a_content_length_over_the_limit_is_skipped_exactly(daemon):
    body = BODY + b" " * MAX_FRAME
    answers = send(
        daemon, b"Content-Length: %d\r\n\r\n" % len(body) + body + frame_bytes(BODY, CONTENT_LENGTH), CONTENT_LENGTH
    )
    assert codes(answers) == [-32600, "ok"]


# -- per-connection limits (in process: a real socket, handlers whose timing the test holds) ----------------


class _Held(RpcServer):
    """An RpcServer whose server.info waits until released, and workspace.list answers at once."""

    class _NoService:  # these tests hold the handlers' timing; no store is needed behind them
        def add_change_listener(self, fn):
            pass

        def remove_change_listener(self, fn):
            pass

    def __init__(self, **kw):
        super().__init__(service=self._NoService(), **kw)
        self.release = anyio.Event()

        async def held(ctx, params):
            await self.release.wait()
            return {"held": True}

        async def quick(ctx, params):
            return {"workspaces": []}

        self.dispatcher = Dispatcher({"server.info": held, "workspace.list": quick})
        self.quick = None  # the lanes run the real method table on the Service, which this one lacks


async def _serve(short_tmp, **kw):
    server = _Held(**kw)
    sock = short_tmp / "run" / "autodoc.sock"
    return server, sock


async def test_requests_past_the_in_flight_limit_answer_32021_and_the_connection_recovers(short_tmp):
    server, sock = await _serve(short_tmp, max_inflight=3)
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: server.run(socket_path=sock, task_status=task_status))
        async with await Client.connect_socket(sock) as c:
            held = []
            for _ in range(3):
                rid = c.next_id()
                await c.send_bytes(line({"jsonrpc": "2.0", "id": rid, "method": "server.info"}))
                held.append(rid)
            with pytest.raises(RemoteError) as info:
                await c.call("workspace.list", timeout=10)
            assert info.value.code == -32021 and info.value.name == "server.overloaded"
            batch = await c.call_raw([{"jsonrpc": "2.0", "id": "b", "method": "workspace.list"}], timeout=10)
            assert batch[0]["error"]["code"] == -32021
            server.release.set()
            answers = [await c.next_unmatched(timeout=10) for _ in held]
            assert sorted(a["id"] for a in answers) == held and all(a["result"] == {"held": True} for a in answers)
            assert await c.call("workspace.list", timeout=10) == {"workspaces": []}
        server.request_shutdown("test over")


async def test_bytes_in_flight_are_limited_too(short_tmp):
    server, sock = await _serve(short_tmp, max_inflight_bytes=1000)
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: server.run(socket_path=sock, task_status=task_status))
        async with await Client.connect_socket(sock) as c:
            # A frame bigger than the budget is still taken when nothing else runs.
            await c.send_bytes(
                line({"jsonrpc": "2.0", "id": "big", "method": "server.info", "params": {}}).rstrip()
                + b" " * 1200
                + b"\n"
            )
            with pytest.raises(RemoteError) as info:
                await c.call("workspace.list", timeout=10)
            assert info.value.code == -32021
            server.release.set()
            assert (await c.next_unmatched(timeout=10))["id"] == "big"
            assert await c.call("workspace.list", timeout=10) == {"workspaces": []}
        server.request_shutdown("test over")


async def test_an_id_reused_while_in_flight_is_refused_and_the_first_still_answers(short_tmp):
    server, sock = await _serve(short_tmp)
    async with anyio.create_task_group() as tg:
        await tg.start(lambda task_status: server.run(socket_path=sock, task_status=task_status))
        async with await Client.connect_socket(sock) as c:
            await c.send_bytes(line({"jsonrpc": "2.0", "id": 9, "method": "server.info"}))
            await c.send_bytes(line({"jsonrpc": "2.0", "id": 9, "method": "workspace.list"}))
            refused = await c.next_unmatched(timeout=10)
            assert refused["id"] == 9 and refused["error"]["code"] == -32600
            server.release.set()
            first = await c.next_unmatched(timeout=10)
            assert first["id"] == 9 and first["result"] == {"held": True}
            # Once answered, the id is free again.
            await c.send_bytes(line({"jsonrpc": "2.0", "id": 9, "method": "workspace.list"}))
            assert (await c.next_unmatched(timeout=10))["result"] == {"workspaces": []}
        server.request_shutdown("test over")


def test_the_limits_are_the_documented_ones():
    text = (Path(__file__).resolve().parents[2] / "protocol" / "PROTOCOL.md").read_text()
    for name, value in [
        ("MAX_JSON_DEPTH", MAX_JSON_DEPTH),
        ("MAX_BATCH_REQUESTS", MAX_BATCH_REQUESTS),
        ("MAX_INFLIGHT_REQUESTS", MAX_INFLIGHT_REQUESTS),
    ]:
        row = next(r for r in text.splitlines() if f"`{name}`" in r)
        assert f"| {value} |" in row, (name, row)


# -- properties -----------------------------------------------------------------------------------------------


@FUZZ
@given(case=frame_cases())
def test_any_framing_of_any_frames(daemon, case):
    out = run_case(daemon, case)
    assert not out.problems, (out.problems, case.data[:500])


@FUZZ
@given(case=envelope_cases())
def test_any_envelope(daemon, case):
    out = run_case(daemon, case)
    assert not out.problems, (out.problems, case.data[:500])


@FUZZ
@given(case=params_cases())
def test_every_method_with_any_params(daemon, case):
    out = run_case(daemon, case)
    assert not out.problems, (out.problems, case.data[:500])


# -- the same checks without a daemon ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "params, field",
    [
        (["kb", "a\x00b"], "query"),
        (["kb", "x", {"paths": ["adrs", "\ud800"]}], "opts.paths[1]"),
        (["kb", "x", {"tags": "\x00"}], "opts.tags"),
        (["kb", "x", {"facets": {"\ud800": "adr"}}], "opts.facets"),
    ],
)
def test_the_in_process_binding_refuses_the_same_params(params, field):
    from autodoc.connect import bind
    from autodoc.errors import InvalidParams

    with pytest.raises(InvalidParams) as info:
        bind("search.query", params)
    assert info.value.field == field


def test_jsonrpcserver_is_driven_through_its_public_api_only():
    import ast

    import jsonrpcserver

    import autodoc.rpc as rpc

    for path in Path(rpc.__file__).parent.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("jsonrpcserver"):
                assert node.module == "jsonrpcserver", f"{path.name} imports from {node.module}"
                assert {a.name for a in node.names} <= set(jsonrpcserver.__all__), path.name
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("jsonrpcserver.") for a in node.names), path.name


def test_a_second_daemon_on_the_same_socket_says_so_in_one_line(daemon, short_tmp):
    import subprocess

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "autodoc.cli",
            "--store",
            str(short_tmp / "other.db"),
            "serve",
            "--socket",
            str(daemon.sock),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        env={**os.environ, "AUTODOC_LOG": "WARNING"},
    )
    err = proc.stderr.decode()
    assert proc.returncode == 1 and "already listening" in err
    assert "Traceback" not in err, err
    assert daemon.serving()


def test_a_peer_that_never_reads_is_slowed_down_not_buffered_for(daemon):
    import socket
    import time

    frame = b"{}\n"  # one -32600 answer each, about 50 times its own size
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # small, so the test is quick
    s.connect(str(daemon.sock))
    s.setblocking(False)
    sent, blocked_since, data = 0, None, frame * 4096
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sent < 64 * 1024 * 1024:
        try:
            sent += s.send(data)
            blocked_since = None
        except BlockingIOError:
            blocked_since = blocked_since or time.monotonic()
            if time.monotonic() - blocked_since > 1.0:
                break  # the daemon stopped reading us
            time.sleep(0.01)
    assert blocked_since is not None, f"the daemon read {sent} bytes without our reading a single answer"
    s.shutdown(socket.SHUT_WR)
    s.setblocking(True)
    s.settimeout(60)
    raw = bytearray()
    while chunk := s.recv(1 << 20):
        raw += chunk
    s.close()
    answers = [json.loads(x) for x in raw.splitlines()]
    assert len(answers) == -(-sent // len(frame))  # every frame answered, a cut last one too
    assert {a["error"]["code"] for a in answers} <= {-32600, -32700}
    assert sent < 1024 * 1024, sent  # what the kernel and the outbox hold, not what we tried to send
    assert daemon.serving()


def test_the_long_run_writes_its_figures_into_its_own_section(tmp_path):
    from bench.reliability import Tally, long_run, write_report

    report = tmp_path / "reliability.md"
    report.write_text("# Reliability\n\nSomeone else's section.\n")
    tally = long_run(20, seed=1, report=report, section="smoke")
    text = report.read_text()
    assert tally.cases == 20 and tally.exits == 0 and tally.internal == 0
    assert "Someone else's section." in text and "| cases | 20 (" in text and "| daemon exits | 0 |" in text
    write_report(Tally(cases=7), 1.0, 2, 0, report, 1, "smoke")  # rewritten in place, not appended
    text = report.read_text()
    assert text.count("## Protocol fuzzing: smoke") == 1 and "| cases | 7 (" in text
