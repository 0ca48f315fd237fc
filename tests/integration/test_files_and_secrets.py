"""Issue 35: no file is silently invisible, a few bad bytes never drop a file, and secrets never
reach the index. A real store and Service (no embedding model: these are the lexical and stored
sides); every answer is checked against its method's result schema."""

from __future__ import annotations

from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.connect import invoke
from autodoc.rpc.schemas import result_errors
from autodoc.service import Service

TOKEN = "ghp_" + "Zq7" * 12  # a GitHub token's shape: 36 characters after ghp_
PASSWORD = "hunter2Xyz9"
ERB_PAGE = b"""---
title: Incident playbook
---
# Incident playbook <%= current_page.data.title %>

<% if config[:on_call] %>
Page the quasarbell rotation first.
<% end %>
<%# a comment, not a #tag %>
"""
NOTES = f"""# Credentials

The deploy bot uses {TOKEN} for the mirror.

```yaml
password: {PASSWORD}
api_key: YOUR_API_KEY
```

After the key, the zephyrine step.
"""


def call(svc: Service, method: str, params):
    out = invoke(svc, method, params)
    assert result_errors(method, out) == [], (method, result_errors(method, out))
    return out


def paths(svc: Service, query: str) -> list[str]:
    return [h["path"] for h in call(svc, "search.query", ["kb", query, {"stages": ["lexical"]}])["hits"]]


@pytest.fixture(scope="module")
def kb(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("files") / "kb"
    (root / "source").mkdir(parents=True)
    (root / ".github").mkdir()
    (root / "a.md").write_text("# A\n\nThe lighthouse keeper.\n")
    (root / "b.mdx").write_text("# B\n\nAn mdx page about frobnitz.\n")
    (root / "source" / "incident.html.md.erb").write_bytes(ERB_PAGE)
    (root / ".github" / "CONTRIBUTING.md").write_text("# Contributing\n\nSign the glorbix form.\n")
    (root / "latin1.md").write_bytes(b"# Caf\xe9 notes\n\nThe espresso machine\xff needs descaling.\n")
    (root / "utf16.md").write_bytes("\ufeff# Wide\r\n\r\nThe marmoset file.\r\n".encode("utf-16-le"))
    (root / "binary.md").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR")
    (root / "notes.md").write_text(NOTES)
    return root


@pytest.fixture(scope="module")
def svc(tmp_path_factory, kb: Path):
    s = Service(Settings.from_env(store=tmp_path_factory.mktemp("store") / "a.db"))
    call(s, "workspace.add", {"name": "kb", "root": str(kb), "config": {"embedding": {"provider": "none"}}})
    report = call(s, "workspace.index", ["kb"])
    s.first_report = report  # type: ignore[attr-defined]
    yield s
    s.close()


def test_files_left_out_by_the_markdown_rule_are_counted_with_the_setting_to_change(svc):
    for answer in (svc.first_report, call(svc, "workspace.status", ["kb"])["files"]):
        left = answer["left_out"]
        assert left["files"] == 1 and left["by_extension"] == {".md.erb": 1}
        assert left["hidden_folders"] == 1 and ".github/" in left["examples"] and left["setting"] == "markdown"
    assert paths(svc, "frobnitz") == ["b.mdx"]  # .mdx is Markdown by default


def test_a_few_bad_bytes_are_replaced_and_recorded_and_a_bom_decides_utf16(svc):
    assert paths(svc, "descaling") == ["latin1.md"]
    assert paths(svc, "marmoset") == ["utf16.md"]
    problems = {p["path"]: p for p in call(svc, "document.problems", ["kb"])["problems"] if p["code"] == "encoding"}
    assert problems["latin1.md"]["line"] == 1 and "2 runs of invalid UTF-8 bytes" in problems["latin1.md"]["message"]
    assert "UTF-16LE" in problems["utf16.md"]["message"]
    read = call(svc, "document.read", ["kb", "latin1.md"])
    assert "Caf\ufffd notes" in read["text"]
    skipped = {s["path"]: s["reason"] for s in call(svc, "workspace.status", ["kb"])["files"]["skipped"]}
    assert skipped == {"binary.md": "binary file (NUL byte at byte 8)"}


def test_secrets_are_masked_in_place_and_counted(svc, kb):
    assert paths(svc, TOKEN) == [] and paths(svc, PASSWORD) == []
    assert paths(svc, "zephyrine") == ["notes.md"]
    read = call(svc, "document.read", ["kb", "notes.md"])
    content = read["text"]
    assert TOKEN not in content and PASSWORD not in content and "YOUR_API_KEY" in content
    assert "[redacted:github-token]" in content and "password: [redacted:password]" in content
    assert content.count("\n") == NOTES.count("\n")  # line numbers are the file's
    status = call(svc, "workspace.status", ["kb"])
    assert status["files"]["redacted"] == [{"path": "notes.md", "count": 2}]
    lines = sorted((p["line"], p["message"]) for p in status["problems"] if p["code"] == "secret")
    assert [n for n, _ in lines] == [3, 6] and all(TOKEN not in m and PASSWORD not in m for _, m in lines)
    out = call(svc, "session.append", {"workspace": "kb", "session_id": "s1", "events": [
        {"id": "1", "kind": "message", "text": f"my token is {TOKEN}, and the quokka?"}]})  # fmt: skip
    assert out["indexed"] == 1 and paths(svc, TOKEN) == [] and paths(svc, "quokka") == [".session/s1"]
    assert TOKEN not in call(svc, "document.read", ["kb", ".session/s1"])["text"]
    redacted = call(svc, "workspace.status", ["kb"])["files"]["redacted"]
    assert {"path": ".session/s1", "count": 1} in redacted


def test_changing_the_markdown_rule_reindexes_what_it_takes_in_and_leaves_out(svc):
    rule = [".md", "*.html.md.erb", ".github/**/*.md"]
    call(svc, "workspace.configure", ["kb", {"markdown": rule}])
    assert paths(svc, "quasarbell") == ["source/incident.html.md.erb"]
    assert paths(svc, "glorbix") == [".github/CONTRIBUTING.md"]
    assert paths(svc, "frobnitz") == []  # .mdx is no longer in the rule: its document left
    read = call(svc, "document.read", ["kb", "source/incident.html.md.erb"])
    assert "<%" not in read["text"] and read["text"].count("\n") == ERB_PAGE.count(b"\n")
    tags = call(svc, "workspace.tags", ["kb"])["tags"]
    assert not any(t["tag"] == "tag" for t in tags)  # "<%# a comment, not a #tag %>" was blanked
    left = call(svc, "workspace.status", ["kb"])["files"]["left_out"]
    assert left["by_extension"] == {".mdx": 1} and left["hidden_folders"] == 0
    with pytest.raises(Exception, match="markdown"):
        invoke(svc, "workspace.configure", ["kb", {"markdown": ["../x/*.md"]}])


def test_masking_can_be_turned_off_and_on_again_masks_sessions_saved_meanwhile(svc):
    call(svc, "workspace.configure", ["kb", {"redact_secrets": False}])
    try:
        assert paths(svc, TOKEN) == ["notes.md"]
        assert all(r["path"] != "notes.md" for r in call(svc, "workspace.status", ["kb"])["files"]["redacted"])
        call(svc, "session.append", {"workspace": "kb", "session_id": "off", "events": [
            {"id": "1", "kind": "message", "text": f"pasted {TOKEN} while masking was off"}]})  # fmt: skip
        assert sorted(paths(svc, TOKEN)) == [".session/off", "notes.md"]
    finally:
        call(svc, "workspace.configure", ["kb", {"redact_secrets": True}])
    assert paths(svc, TOKEN) == []
    assert TOKEN not in call(svc, "document.read", ["kb", ".session/off"])["text"]
