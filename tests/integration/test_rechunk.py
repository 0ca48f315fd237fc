"""Issue 16: what determines the chunks is recorded per workspace, and a change re-chunks.

Chunk boundaries depend on the section size, the abstract chunk and the token
counter, which is the configured embedding model's tokenizer (or a word-count
estimate without one). A store whose chunking changed, by workspace.configure
or by a crash between writing a new config and re-chunking, must equal a fresh
index of the same folder under the same config (compared table by table with
bench/reliability.py). Real parts: the bundled MiniLM tokenizer, a real store.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.service import Service
from autodoc.store import workspaces as wsrows

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from bench.reliability import differences, dump, problems

NO_MODEL = {"embedding": {"provider": "none"}}
ONNX = {"embedding": {"provider": "onnx"}}


def write_folder(root: Path, n: int = 12) -> None:
    """Sections whose word count and WordPiece count disagree (identifiers, numbers, CJK)."""
    root.mkdir()
    for i in range(n):
        paras = []
        for j in range(6):
            ident = " ".join(f"get_{i}_{j}_{k}Handler(0x{k:04x})" for k in range(8))
            paras.append(f"Paragraph {j} of note {i}: {ident} 文書{i}の段落{j}です。 plain words here.")
        body = "\n\n".join(paras)
        (root / f"note-{i:02d}.md").write_text(
            f"---\ntitle: Note {i}\ntags: [t{i % 3}]\n---\n# Note {i}\n\n## Part A\n\n{body}\n\n## Part B\n\n{body}\n"
        )


def fresh(tmp_path: Path, kb: Path, config: dict, name: str) -> dict:
    s = Service(Settings.from_env(store=tmp_path / name / "autodoc.db"))
    try:
        s.workspace_add("kb", str(kb), {**config, "section_tokens": 64})
        s.index("kb")
    finally:
        s.close()
    return dump(tmp_path / name / "autodoc.db", "kb")


@pytest.fixture()
def kb(tmp_path: Path) -> Path:
    write_folder(tmp_path / "kb")
    return tmp_path / "kb"


def test_switching_the_embedding_model_rechunks_to_a_fresh_index(tmp_path, kb):
    want_none = fresh(tmp_path, kb, NO_MODEL, "fresh-none")
    want_onnx = fresh(tmp_path, kb, ONNX, "fresh-onnx")
    assert differences(want_none, want_onnx), "the tokenizers agree here: the test could not fail"
    store = tmp_path / "s" / "autodoc.db"
    s = Service(Settings.from_env(store=store))
    try:
        s.workspace_add("kb", str(kb), {**NO_MODEL, "section_tokens": 64})
        s.index("kb")
        assert differences(dump(store, "kb"), want_none) == []
        s.workspace_configure("kb", ONNX)
        assert differences(dump(store, "kb"), want_onnx) == []
        s.workspace_configure("kb", NO_MODEL)
        assert differences(dump(store, "kb"), want_none) == []
    finally:
        s.close()
    assert problems(store) == []


def test_a_config_written_without_its_rechunk_is_rechunked_by_the_next_index(tmp_path, kb):
    """A crash between the config's commit and the end of its re-chunk leaves the new
    config over the old chunks (the crash harness hits this window; here the config row
    is written directly, as the first half of workspace.configure would)."""
    want = fresh(tmp_path, kb, ONNX, "fresh-onnx")
    store = tmp_path / "s" / "autodoc.db"
    s = Service(Settings.from_env(store=store))
    try:
        s.workspace_add("kb", str(kb), {**NO_MODEL, "section_tokens": 200})
        s.index("kb")
        long_answer = "\n\n".join(f"Paragraph {i}: " + " ".join(f"word{i}x{j}" for j in range(40)) for i in range(12))
        s.session_append(
            "kb",
            "s-1",
            [{"id": "1", "kind": "message", "text": "why?"}, {"id": "2", "kind": "response", "text": long_answer}],
        )
        before = s.workspace_status("kb")["sessions"]["chunks"]
        with s.store.write() as db:
            ws = wsrows.get_workspace(db, "kb")
            wsrows.set_config(db, ws, {**ws.config, **ONNX, "section_tokens": 64})
        s.index("kb")
        # the session is cut again by the new budget too (more, smaller chunks), not left as it was
        assert s.workspace_status("kb")["sessions"]["chunks"] > before
        s.session_remove("kb", "s-1")  # the fresh index has no session to compare with
        assert differences(dump(store, "kb"), want) == []
        report = s.index("kb")
        assert report["modified"] == 0 and report["unchanged"] == 12  # recorded: no second re-chunk
    finally:
        s.close()
