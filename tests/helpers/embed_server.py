"""A real OpenAI-compatible /v1/embeddings server on 127.0.0.1, serving
vectors computed by the bundled ONNX model, for tests of the HTTP provider and
of model switches. `stop()` makes it vanish, as a crashed server would."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from autodoc.embed.onnx import OnnxProvider

_model: OnnxProvider | None = None
_lock = threading.Lock()


def _provider() -> OnnxProvider:
    global _model
    with _lock:
        if _model is None:
            _model = OnnxProvider()
        return _model


class EmbedServer:
    def __init__(self):
        provider = _provider()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # keep test output clean
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length", 0))
                body = json.loads(self.rfile.read(n))
                texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
                server.requests += 1
                server.texts += len(texts)
                vecs = provider.embed(texts)
                out = {
                    "object": "list",
                    "model": body.get("model"),
                    "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)],
                }
                data = json.dumps(out).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.requests = 0
        self.texts = 0
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1/embeddings"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
