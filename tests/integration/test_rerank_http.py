"""Stage 3 remote provider (autodoc.rerank.http) against a real HTTP server on
127.0.0.1 that the test starts. The server scores with the tiny ONNX
cross-encoder, so the HTTP ranker must reproduce the local scores exactly,
in input order, whichever order the server lists them in."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from helpers.tiny_models import MAGIC, build_tiny_cross_encoder

from autodoc.rerank import RankerCancelled, RankerDown, make_ranker
from autodoc.rerank.http import HttpRanker

QUERY = "how is the store lock recovered after a crash"
PASSAGES = [
    "bananas are rich in potassium",
    "the writer takes the lease after expiry",
    "the store lock is recovered by a new writer",
    f"when the holder crashed the {MAGIC} expired",
    "sunny weather and rain",
]
TEI_MAX_BATCH = 32  # TEI's default --max-client-batch-size


class _Server:
    """A rerank server: /rerank (TEI) and /v1/rerank (Cohere) under mode prefixes.

    /rerank, /v1/rerank, /ok/...  correct answers, listed by descending score
    /fail/...                     HTTP 500 with a TEI-style error body
    /hang/...                     never answers (until the test ends)
    /badjson/...                  200 with a body that is not JSON
    /short/...                    200 but one passage's score is missing
    /wrongshape/...               200 with an object where a list belongs
    """

    def __init__(self, ranker):
        self.ranker = ranker
        self.requests: list[dict] = []
        self.release = threading.Event()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep pytest output clean
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "body": body, "headers": dict(self.headers)})
                mode, _, api_path = self.path.lstrip("/").partition("/")
                if mode in ("rerank", "v1"):
                    mode, api_path = "ok", self.path.lstrip("/")
                if mode == "hang":
                    server.release.wait(10)
                    return self._send(503, {"error": "released"})
                if mode == "fail":
                    return self._send(500, {"error": "model overloaded", "error_type": "Overloaded"})
                if mode == "badjson":
                    return self._send(200, b"<html>not json</html>")
                if mode not in ("ok", "short", "wrongshape"):
                    return self._send(404, {"error": "no route"})
                if api_path == "rerank":  # TEI
                    texts = body["texts"]
                    if len(texts) > TEI_MAX_BATCH:
                        return self._send(
                            422,
                            {
                                "error": f"batch size {len(texts)} > maximum allowed batch size {TEI_MAX_BATCH}",
                                "error_type": "Validation",
                            },
                        )
                    scores = server.ranker.score(body["query"], texts)
                    out = sorted(({"index": i, "score": s} for i, s in enumerate(scores)), key=lambda r: -r["score"])
                    if mode == "short":
                        out = out[:-1]
                    if mode == "wrongshape":
                        out = {"results": out}
                    return self._send(200, out)
                if api_path == "v1/rerank":  # Cohere
                    scores = server.ranker.score(body["query"], body["documents"])
                    results = sorted(
                        ({"index": i, "relevance_score": s} for i, s in enumerate(scores)),
                        key=lambda r: -r["relevance_score"],
                    )[: body.get("top_n")]
                    if mode == "short":
                        results = results[:-1]
                    return self._send(
                        200, {"id": "x", "results": results, "meta": {"billed_units": {"search_units": 1}}}
                    )
                return self._send(404, {"error": "no route"})

            def _send(self, status, payload):
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout tests)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    folder = build_tiny_cross_encoder(tmp_path_factory.mktemp("tiny"))
    return make_ranker({"provider": "onnx", "path": str(folder)})


@pytest.fixture()
def server(local):
    s = _Server(local)
    yield s
    s.close()


def _http(url, **cfg) -> HttpRanker:
    r = make_ranker({"provider": "http", "url": url, **cfg})
    assert isinstance(r, HttpRanker)
    return r


def test_tei_scores_match_local_in_input_order(server, local):
    r = _http(server.base, api="tei")
    scores = r.score(QUERY, PASSAGES)
    assert scores == local.score(QUERY, PASSAGES)  # JSON round-trips Python floats exactly
    req = server.requests[-1]
    assert req["path"] == "/rerank"
    assert req["body"] == {"query": QUERY, "texts": PASSAGES, "truncate": True}
    assert "authorization" not in {k.lower() for k in req["headers"]}
    snap = r.meter.snapshot()
    assert (snap["calls"], snap["texts"], snap["errors"]) == (1, len(PASSAGES), 0)
    r.close()


def test_cohere_scores_match_local_and_send_the_key(server, local, monkeypatch):
    monkeypatch.setenv("AUTODOC_TEST_RERANK_KEY", "k-123")
    r = _http(server.base + "/", api="cohere", model="rerank-english-v3.0", api_key_env="AUTODOC_TEST_RERANK_KEY")
    scores = r.score(QUERY, PASSAGES)
    assert scores == local.score(QUERY, PASSAGES)
    req = server.requests[-1]
    assert req["path"] == "/v1/rerank"
    assert req["body"] == {
        "model": "rerank-english-v3.0",
        "query": QUERY,
        "documents": PASSAGES,
        "top_n": len(PASSAGES),
    }
    assert req["headers"]["Authorization"] == "Bearer k-123"
    assert r.name == "rerank-english-v3.0"
    r.close()


def test_cohere_base_ending_in_its_version_is_not_doubled(server, local):
    # issue 18: "https://api.cohere.com/v1" posted to /v1/v1/rerank
    r = _http(server.base + "/v1", api="cohere", model="m")
    assert r.score(QUERY, PASSAGES) == local.score(QUERY, PASSAGES)
    assert server.requests[-1]["path"] == "/v1/rerank"
    r.close()
    r = _http(server.base + "/ok/v1/", api="cohere", model="m")
    r.score(QUERY, PASSAGES)
    assert server.requests[-1]["path"] == "/ok/v1/rerank"
    r.close()


def test_full_endpoint_url_is_used_as_is(server, local):
    r = _http(server.base + "/ok/rerank")
    assert r.score(QUERY, PASSAGES) == local.score(QUERY, PASSAGES)
    assert server.requests[-1]["path"] == "/ok/rerank"
    r.close()


def test_tei_window_split_into_server_sized_batches(server, local):
    window = [PASSAGES[i % len(PASSAGES)] + f" note {i}" for i in range(40)]
    r = _http(server.base)
    assert r.score(QUERY, window) == local.score(QUERY, window)
    sizes = [len(req["body"]["texts"]) for req in server.requests]
    assert sizes == [32, 8]
    r.close()
    # Without batching a TEI server refuses the window, and the reason says why.
    r = _http(server.base, batch=40)
    with pytest.raises(RankerDown, match="HTTP 422: batch size 40 > maximum allowed batch size 32"):
        r.score(QUERY, window)
    r.close()


def test_server_error_is_ranker_down_with_reason(server):
    r = _http(server.base + "/fail/rerank")
    with pytest.raises(RankerDown) as info:
        r.score(QUERY, PASSAGES)
    assert info.value.reason == f"ranker at {server.base}/fail/rerank answered HTTP 500: model overloaded"
    snap = r.meter.snapshot()
    assert snap["errors"] == 1 and snap["last_error"] == info.value.reason and snap["texts"] == 0
    r.close()


def test_hanging_server_times_out(server):
    r = _http(server.base + "/hang/rerank", timeout=5)
    started = time.monotonic()
    with pytest.raises(RankerDown) as info:
        r.score(QUERY, PASSAGES, timeout=0.3)
    elapsed = time.monotonic() - started
    assert info.value.reason == f"ranker at {server.base}/hang/rerank did not answer within its deadline of 0.3 s"
    assert 0.25 <= elapsed < 1.5
    r.close()


def test_config_timeout_applies_when_caller_gives_none(server):
    r = _http(server.base + "/hang/v1/rerank", api="cohere", model="m", timeout=0.2)
    started = time.monotonic()
    with pytest.raises(RankerDown, match="deadline of 0.2 s"):
        r.score(QUERY, PASSAGES)
    assert time.monotonic() - started < 1.5
    r.close()


@pytest.mark.parametrize(
    "url_path, api, words",
    [
        ("/badjson/rerank", "tei", "answered with invalid JSON: '<html>not json</html>'"),
        ("/short/rerank", "tei", "scored 4 of 5 passages (missing ["),
        ("/short/v1/rerank", "cohere", "scored 4 of 5 passages (missing ["),
        ("/wrongshape/rerank", "tei", 'unexpected shape (expected a list of {"index", "score"})'),
        ("/nowhere/rerank", "tei", "HTTP 404: no route"),
    ],
)
def test_bad_answers_are_ranker_down(server, url_path, api, words):
    r = _http(server.base + url_path, api=api, **({"model": "m"} if api == "cohere" else {}))
    with pytest.raises(RankerDown) as info:
        r.score(QUERY, PASSAGES)
    assert words in info.value.reason
    r.close()


def test_unreachable_server(server):
    # A port that was just free: bind, read the number, close.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = _http(f"http://127.0.0.1:{port}", timeout=2)
    with pytest.raises(RankerDown, match=f"cannot reach ranker at http://127.0.0.1:{port}/rerank"):
        r.score(QUERY, PASSAGES)
    r.close()


def test_key_removed_after_config_is_ranker_down(server, monkeypatch):
    monkeypatch.setenv("AUTODOC_TEST_RERANK_KEY", "k")
    r = _http(server.base, api_key_env="AUTODOC_TEST_RERANK_KEY")
    monkeypatch.delenv("AUTODOC_TEST_RERANK_KEY")
    with pytest.raises(RankerDown, match="AUTODOC_TEST_RERANK_KEY .* is not set"):
        r.score(QUERY, PASSAGES)
    assert server.requests == []
    r.close()


def test_cancel_before_a_batch_sends_nothing(server):
    r = _http(server.base)
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(RankerCancelled):
        r.score(QUERY, PASSAGES, cancel=cancel)
    snap = r.meter.snapshot()
    assert server.requests == [] and snap["errors"] == 0 and snap["calls"] == 0
    assert r.score(QUERY, []) == []
    r.close()
