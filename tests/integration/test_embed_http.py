"""The OpenAI-compatible HTTP embedding provider against real local HTTP
servers (http.server on 127.0.0.1:0) that serve vectors computed by the bundled
ONNX model, fail, stall or refuse connections."""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from autodoc.embed import ProviderDown, make_provider
from autodoc.embed.http import HttpProvider, normalise_url, remote_model_tokens
from autodoc.embed.onnx import OnnxProvider


@pytest.fixture(scope="module")
def local() -> OnnxProvider:
    return OnnxProvider()


class Server:
    """A scripted /v1/embeddings server. `script` is a list of behaviours
    consumed one per request ("ok", 500, 429, 401, "hang", "bad-json",
    "wrong-dim"); when it runs out every request is "ok"."""

    def __init__(self, local: OnnxProvider, script=(), expect_key: str | None = None):
        self.script = list(script)
        self.requests: list[dict] = []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def _send(self, code: int, body: dict | str, headers: dict | None = None):
                data = (body if isinstance(body, str) else json.dumps(body)).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                body["_auth"] = self.headers.get("Authorization")
                body["_path"] = self.path
                outer.requests.append(body)
                step = outer.script.pop(0) if outer.script else "ok"
                if expect_key is not None and self.headers.get("Authorization") != f"Bearer {expect_key}":
                    return self._send(401, {"error": {"message": "Incorrect API key provided"}})
                if step == "hang":
                    outer.release.wait(10)
                    return
                if isinstance(step, int):
                    hdr = {"Retry-After": "0"} if step == 429 else None
                    return self._send(step, {"error": {"message": f"scripted {step}"}}, hdr)
                if step == "bad-json":
                    return self._send(200, "{not json")
                texts = body["input"]
                vecs = local.embed(texts) * 3.0  # un-normalised: the client must normalise
                if step == "wrong-dim":
                    vecs = vecs[:, :100]
                items = [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)]
                items.reverse()  # the client must order by index, not by position
                self._send(
                    200,
                    {
                        "object": "list",
                        "model": body.get("model"),
                        "data": items,
                        "usage": {"prompt_tokens": 7 * len(texts), "total_tokens": 7 * len(texts)},
                    },
                )

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.url = self.base + "/v1/embeddings"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def serve(local):
    servers = []

    def make(script=(), **kw):
        s = Server(local, script, **kw)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.close()


TEXTS = ["How do I reset my password?", "Storage › Lease\nThe writer holds a lease.", "", "ünïcödé 🔍"]


def test_same_vectors_as_local_model(serve, local):
    srv = serve()
    p = make_provider({"provider": "http", "url": srv.base, "model": "minilm", "retries": 0})
    assert isinstance(p, HttpProvider) and p.url == srv.url
    got = p.embed(TEXTS)
    assert got.dtype == np.float32 and got.shape == (4, 384)
    assert np.allclose(got, local.embed(TEXTS), atol=1e-5)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert srv.requests[0]["model"] == "minilm" and srv.requests[0]["input"] == TEXTS
    assert srv.requests[0]["_path"] == "/v1/embeddings" and srv.requests[0]["_auth"] is None
    assert p.dim == 384 and len(srv.requests) == 1  # learnt from the answer, no probe
    m = p.meter.snapshot()
    assert (m["calls"], m["texts"], m["tokens"], m["errors"]) == (1, 4, 28, 0)
    assert np.allclose(p.embed_query(TEXTS[0]), got[0], atol=1e-6)
    d = json.loads(json.dumps(p.describe()))
    assert d["provider"] == "http" and d["name"] == "minilm" and d["dim"] == 384 and d["fingerprint"]
    p.close()


def test_batches_split_and_order_kept(serve, local):
    srv = serve()
    p = HttpProvider(srv.url, "m", batch_size=3, retries=0)
    texts = [f"text number {i} " + "x " * i for i in range(8)]
    assert np.allclose(p.embed(texts), local.embed(texts), atol=1e-5)
    assert [len(r["input"]) for r in srv.requests] == [3, 3, 2]


def test_fingerprint(serve):
    srv = serve()
    a = HttpProvider(srv.url, "m", dim=384)
    assert a.fingerprint == HttpProvider(srv.base + "/v1", "m", dim=384).fingerprint
    assert a.fingerprint != HttpProvider(srv.url, "other", dim=384).fingerprint
    assert a.fingerprint != HttpProvider(srv.url, "m", dim=256).fingerprint
    assert len(srv.requests) == 0  # dim given: nothing asked
    b = HttpProvider(srv.url, "m")
    assert b.fingerprint == a.fingerprint and len(srv.requests) == 1  # one probe for the dimension


def test_500_then_ok_is_retried(serve, local):
    srv = serve([500])
    p = HttpProvider(srv.url, "m", retries=2, backoff=0.01)
    assert np.allclose(p.embed(TEXTS[:2]), local.embed(TEXTS[:2]), atol=1e-5)
    assert len(srv.requests) == 2
    m = p.meter.snapshot()
    assert m["errors"] == 1 and m["calls"] == 1 and "HTTP 500" in m["last_error"] and "scripted 500" in m["last_error"]


def test_429_honours_retry_after(serve):
    srv = serve([429, 429])
    p = HttpProvider(srv.url, "m", retries=2, backoff=5.0)  # Retry-After: 0 overrides the 5 s backoff
    t = time.monotonic()
    p.embed(["x"])
    assert time.monotonic() - t < 2.0 and len(srv.requests) == 3 and p.meter.snapshot()["errors"] == 2


def test_persistent_500_gives_up(serve):
    srv = serve([500, 503, 502, 500])
    p = HttpProvider(srv.url, "m", retries=2, backoff=0.01)
    with pytest.raises(ProviderDown, match=r"HTTP 502.*after 3 attempts") as e:
        p.embed(["x"])
    assert e.value.retryable and len(srv.requests) == 3
    m = p.meter.snapshot()
    assert m["errors"] == 3 and m["calls"] == 0


def test_hanging_server_times_out(serve):
    srv = serve(["hang", "hang"])
    p = HttpProvider(srv.url, "m", timeout=0.3, retries=2, backoff=0.01)
    t = time.monotonic()
    with pytest.raises(ProviderDown, match="timeout"):
        p.embed(["x"])
    assert time.monotonic() - t < 2.0
    assert len(srv.requests) == 1  # a read timeout is not retried
    assert p.meter.snapshot()["errors"] == 1


def test_connection_refused():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = HttpProvider(f"http://127.0.0.1:{port}", "m", retries=1, backoff=0.01, timeout=2)
    with pytest.raises(ProviderDown, match="cannot connect") as e:
        p.embed(["x"])
    assert str(port) in str(e.value) and e.value.retryable
    assert p.meter.snapshot()["errors"] == 2
    with pytest.raises(ProviderDown):
        p.dim  # the probe fails the same way
    assert p.meter.snapshot()["errors"] == 4
    with pytest.raises(ProviderDown, match="cannot connect"):
        p.fingerprint  # a recent failed probe is not repeated at once
    assert p.meter.snapshot()["errors"] == 4
    d = p.describe()  # no I/O: unknown stays null
    assert d["dim"] is None and d["fingerprint"] is None and "cannot connect" in d["meter"]["last_error"]
    assert p.embed([]).shape == (0, 0)


def test_api_key_from_env(serve, monkeypatch, local):
    srv = serve(expect_key="sk-test-123")
    p = HttpProvider(srv.url, "m", api_key_env="AUTODOC_TEST_KEY", retries=3, backoff=0.01)
    monkeypatch.delenv("AUTODOC_TEST_KEY", raising=False)
    with pytest.raises(ProviderDown, match="AUTODOC_TEST_KEY is not set") as e:
        p.embed(["x"])
    assert not e.value.retryable and len(srv.requests) == 0
    monkeypatch.setenv("AUTODOC_TEST_KEY", "wrong")
    with pytest.raises(ProviderDown, match="401.*Incorrect API key") as e:
        p.embed(["x"])
    assert not e.value.retryable and len(srv.requests) == 1  # 401 is not retried
    monkeypatch.setenv("AUTODOC_TEST_KEY", "sk-test-123")
    assert np.allclose(p.embed(["x"]), local.embed(["x"]), atol=1e-5)
    assert srv.requests[-1]["_auth"] == "Bearer sk-test-123"
    assert "sk-test-123" not in json.dumps(p.describe())


def test_bad_answers(serve):
    srv = serve(["bad-json", "ok", "wrong-dim"])
    p = HttpProvider(srv.url, "m", retries=0)
    with pytest.raises(ProviderDown, match="unexpected answer"):
        p.embed(["x"])
    p.embed(["x"])
    with pytest.raises(ProviderDown, match="100-d embeddings, expected 384") as e:
        p.embed(["x"])
    assert not e.value.retryable
    cfg = HttpProvider(srv.url, "m", dim=256, retries=0)
    with pytest.raises(ProviderDown, match="expected 256"):
        cfg.embed(["x"])


def test_url_forms_and_estimates():
    assert normalise_url("http://h:8080") == "http://h:8080/v1/embeddings"
    assert normalise_url("http://h:8080/") == "http://h:8080/v1/embeddings"
    assert normalise_url("https://api.example.com/v1") == "https://api.example.com/v1/embeddings"
    assert normalise_url("http://h/v1/embeddings/") == "http://h/v1/embeddings"
    assert normalise_url("http://h/openai") == "http://h/openai/v1/embeddings"
    p = HttpProvider("http://127.0.0.1:9", "m", dim=8)
    assert p.count_tokens(["hello world", ""]) == [remote_model_tokens("hello world"), 2]
    assert p.count_tokens(["word " * 100])[0] >= 100
