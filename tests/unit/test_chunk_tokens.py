"""wordpiece_tokens: shape on tricky strings, and calibration against MiniLM's tokenizer."""

from __future__ import annotations

import runpy
import statistics
from pathlib import Path

import pytest

from autodoc.ingest.chunk import chunk_document
from autodoc.ingest.markdown import parse_markdown
from autodoc.ingest.scan import SkipFile, read_document, scan_workspace
from autodoc.ingest.text import prepared_text
from autodoc.ingest.tokens import wordpiece_tokens

CORPORA = Path(__file__).parents[1] / "corpora"


@pytest.mark.parametrize(
    "text, n",
    [
        ("", 0),
        ("   \n\t", 0),
        ("the lease", 2),
        ("数据库迁移", 5),  # one per ideograph, as BERT splits them
        ("-32069", 3),  # "-", "320", "69"
        ("wal_checkpoint(TRUNCATE)", 8),  # the real tokenizer says 8 too
        ("a3f9c2e", 7),  # letters and digits alternate: one piece each
    ],
)
def test_estimate_shapes(text, n):
    assert wordpiece_tokens(text) == n


def test_long_words_cost_more():
    assert wordpiece_tokens("antidisestablishmentarianism") > wordpiece_tokens("anti") == 1


def _tokenizer():
    from tokenizers import Tokenizer

    from autodoc.embed.onnx import default_tokenizer_path

    path = default_tokenizer_path()

    tk = Tokenizer.from_file(str(path))
    tk.no_padding()  # the file ships padding and truncation at 128
    tk.no_truncation()
    return tk


def test_calibration_against_minilm_tokenizer():
    tk = _tokenizer()
    kb = runpy.run_path(str(CORPORA / "make_special.py"))["ensure_special_files"]()
    texts = []
    for e in scan_workspace(kb, max_bytes=1 << 20):
        try:
            text = prepared_text(e.path.name, read_document(e.path, max_bytes=1 << 20))[0]
        except SkipFile:
            continue
        if e.skip is None:
            texts += [c.text for c in chunk_document(text, parse_markdown(text), section_tokens=10**9)]
    pairs = [(wordpiece_tokens(t), len(tk.encode(t, add_special_tokens=False).ids)) for t in texts]
    pairs = [(e, r) for e, r in pairs if r >= 20]
    assert len(pairs) >= 40
    errors = [(e - r) / r for e, r in pairs]
    assert statistics.mean(abs(x) for x in errors) < 0.06
    assert 0.95 < sum(e for e, _ in pairs) / sum(r for _, r in pairs) < 1.05
    assert max(abs(x) for x in errors) < 0.25
