"""Issue 36's RPC edges against a real daemon (``autodoc serve --socket``, its own process,
tests/corpora/kb indexed) over its real Unix socket: Content-Length resync answers the
frame inside a bad header block (Low 8), an integer-valued float is that integer (Medium 4),
and ids 7 and 7.0 are one id in flight (Low 11)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.reliability import KB, exchange, flatten, parse_answers


@pytest.fixture(scope="module")
def daemon(fuzz_daemon):
    return fuzz_daemon


def cl(message) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def answers(daemon, data: bytes) -> list:
    return [a for a in flatten(parse_answers(exchange(daemon.sock, data))) if "id" in a]


INFO2 = {"jsonrpc": "2.0", "id": 2, "method": "server.info"}
BODY2 = json.dumps(INFO2, separators=(",", ":")).encode()


@pytest.mark.parametrize(
    "bad",
    [
        b"garbage\r\nContent-Length: %d\r\n\r\n" % len(BODY2) + BODY2,
        b"Content-Length: 5\r\n\r\n{}   tail\r\nContent-Length: %d\r\n\r\n" % len(BODY2) + BODY2,
    ],
    ids=["garbage-line", "body-longer-than-announced"],
)
def test_the_frame_inside_a_bad_block_is_answered_over_the_socket(daemon, bad):
    got = answers(daemon, cl({"jsonrpc": "2.0", "id": 1, "method": "server.info"}) + bad)
    assert sorted(a["id"] for a in got if "result" in a) == [1, 2], got
    assert any(a["id"] is None and a["error"]["code"] == -32700 for a in got), got


def test_an_integer_valued_float_is_that_integer_over_the_socket(daemon):
    request = {"jsonrpc": "2.0", "id": 3, "method": "search.query", "params": [KB, "lease", {"limit": 2.0}]}
    line = json.dumps(request).encode() + b"\n"
    (got,) = answers(daemon, line)
    assert "result" in got, got
    assert 1 <= len(got["result"]["hits"]) <= 2
    request["params"][2] = {"limit": 2}
    as_int = answers(daemon, json.dumps(request).encode() + b"\n")[0]
    assert [h["path"] for h in as_int["result"]["hits"]] == [h["path"] for h in got["result"]["hits"]]


def test_ids_7_and_7_0_are_one_id_in_flight(daemon):
    slow = {"jsonrpc": "2.0", "method": "workspace.reindex", "params": [KB]}
    batch = [{**slow, "id": 7}, {**slow, "id": 7.0}]
    got = answers(daemon, json.dumps(batch).encode() + b"\n")
    assert len(got) == 2, got
    refused = [a for a in got if a.get("error", {}).get("code") == -32600]
    assert len(refused) == 1 and "already in use" in refused[0]["error"]["message"], got
    assert refused[0]["id"] == 7.0 and type(refused[0]["id"]) is float  # answered with the id as sent


def test_a_cancel_naming_7_0_cancels_request_7(daemon):
    for sent, named in [(9, 9), (7, 7.0), (8.0, 8)]:  # 9, 9: the cancel is in time
        request = {"jsonrpc": "2.0", "id": sent, "method": "workspace.reindex", "params": [KB]}
        cancel = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": named}}
        got = answers(daemon, json.dumps(request).encode() + b"\n" + json.dumps(cancel).encode() + b"\n")
        assert len(got) == 1 and got[0]["error"]["code"] == -32800, got
        assert got[0]["id"] == sent and type(got[0]["id"]) is type(sent)
