"""The LSP waits for a daemon to index a saved file before reading its diagnostics: it compares
the stored text with the file. The stored text is the indexed one (a masked secret, a replaced
bad byte), so a comparison with the file's bytes never matched and every such save waited the
whole SAVE_WAIT. The store here is a real one, read through a real Service."""

from __future__ import annotations

from autodoc.ingest import text
from autodoc.lsp import server


class _Client:
    """What _await_index asks of the language server: its calls, answered by a real Service."""

    def __init__(self, svc):
        self.svc = svc
        self.calls = 0

    def ws_call(self, method, params):
        assert method == "document.read"
        self.calls += 1
        return self.svc.document_read(*params)


def test_a_saved_file_whose_indexed_text_differs_is_seen_at_once(service_factory, short_tmp, monkeypatch):
    kb = short_tmp / "kb"
    kb.mkdir()
    (kb / "key.md").write_text("# key\n\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYzQ8vR3kLmN\n")
    (kb / "bytes.md").write_bytes(b"# bytes\n\ncaf\xe9 au lait\n")
    (kb / "plain.md").write_text("# plain\n\nnothing to mask\n")
    svc = service_factory(kb)
    monkeypatch.setattr(server, "SAVE_WAIT", 60.0)  # a miss would loop for a minute, not return
    decoded: list[int] = []
    real_decode = text.decode

    def decode(data):
        decoded.append(len(data))
        return real_decode(data)

    monkeypatch.setattr(text, "decode", decode)
    for name in ("key.md", "bytes.md", "plain.md"):
        client = _Client(svc)
        decoded.clear()
        server._await_index(client, "kb", name, (kb / name).as_uri())  # type: ignore[arg-type]
        assert client.calls == 1, name
        assert len(decoded) == 1, name  # the saved bytes prepared once (masked or not, from one text)
