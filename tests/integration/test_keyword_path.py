"""Issue 19, the keyword path's answer building made cheaper: the same answers as before.

On a real store (three real corpora from ../shared/data/corpora: notes with tags,
decision records, Chinese docs), for queries cut from the corpora themselves and
for keyword, CJK, prefix, phrase, facet and stopword-only queries, each new
computation is compared with the one it replaced, kept here as the reference:
- `answerable`'s signals (search/evidence.py): the passage's stems without offsets
  (tokens.stems) give the coverage tokenize gave, and the word weights read through
  FTS5's cached term counts equal one fts5vocab lookup per stem (passages.word_weights);
- the candidates' facts (store/hits.candidates) equal a json.loads per row.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.search import answerable as A
from autodoc.search import evidence
from autodoc.search.lexical.tokens import stems as passage_stems
from autodoc.search.lexical.tokens import tokenize
from autodoc.service import Service
from autodoc.store import hits as stored_hits
from autodoc.store import passages
from autodoc.store.lexical.ftstext import STOPWORDS, fts_text
from autodoc.store.workspaces import get_workspace

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
pytestmark = pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}")
NO_MODEL = {"embedding": {"provider": "none"}}
WORKSPACES = {"foam": "foam-docs", "adr": "simpler-grants-adr", "zh": "opentelemetry-docs/content/zh/docs/concepts"}
EXTRA = [
    "收集器 配置",
    "OpenTelemetry 收集器 exporters",
    "数据",  # CJK runs, mixed scripts, one bigram
    "wikilink*",
    '"daily note" template',
    "tag:foam graph",
    "the of and",  # prefix, phrase, facet, stopwords
    "café naïve Straße",
    "snake_case file-name",
    'say "hi"',
    "日本語 テスト",
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("keyword_path")
    s = Service(Settings.from_env(store=tmp / "store" / "autodoc.db"))
    for name, rel in WORKSPACES.items():
        assert (CORPORA / rel).is_dir(), rel
        s.workspace_add(name, str(CORPORA / rel), NO_MODEL)
        s.index(name)
    yield s
    s.close()


def _queries(db, ws_id: int, n: int = 30) -> list[str]:
    """Sentences and two-word keyword queries cut from the workspace's own chunks, plus EXTRA."""
    texts = [t for (t,) in db.execute("SELECT text FROM chunks WHERE workspace_id=? ORDER BY id", (ws_id,))]
    out = []
    for t in texts[:: max(1, len(texts) // n)][:n]:
        words = re.findall(r"\w+", t)
        out.append(" ".join(words[:12]))
        content = [w for w in words if w.lower() not in STOPWORDS and len(w) > 3]
        out.append(" ".join(content[2:4]))
    return [q for q in out if q.strip()] + EXTRA


def _old_query_stems(query: str) -> list[str]:
    text = re.sub(r"(?:^|\s)-?[\w.-]+:\S+", " ", query)
    words = re.findall(r"\w+", text)
    content = [w for w in words if w.lower() not in STOPWORDS] or words
    return list(dict.fromkeys(s for w in content for _, _, s in tokenize(fts_text(w))))


def test_answerable_signals_as_before(store):
    """The coverage search/evidence.py computes from a passage's stems without offsets equals the
    coverage tokenize gave, with word weights read through FTS5's cached term counts equal to one
    fts5vocab lookup per stem (passages.word_weights)."""
    checked = weighed = 0
    for name in WORKSPACES:
        with store.store.read() as db:
            ws = get_workspace(db, name)
            queries = _queries(db, ws.id)
        for q in queries:
            full = store.search(name, q, {"stages": ["lexical"], "limit": 10, "answer": "full", "min_confidence": 0})
            with store.store.read() as db:
                assert A.query_stems(q, tokenize) == _old_query_stems(q), q
                stems = _old_query_stems(q)
                words = evidence.query_words(db, q)
                old_weights = passages.word_weights(db, stems)
                assert words.stems == stems and words.weights == pytest.approx(old_weights), q
                texts = stored_hits.chunk_texts(db, [h["chunk_id"] for h in full["hits"]])
                for h in full["hits"]:
                    passage = h["breadcrumb"] + "\n" + texts.get(h["chunk_id"], "")
                    old = A.coverage(stems, old_weights, passage, tokenize)
                    new = A.coverage_of(words.stems, words.weights, passage_stems(fts_text(passage)))
                    assert new == pytest.approx(old), (q, h["path"])
                weighed += len(stems)
            checked += bool(full["hits"])
    assert checked >= 100 and weighed >= 300, (checked, weighed)


def test_candidates_as_before(store):
    with store.store.read() as db:
        ids = [c for (c,) in db.execute("SELECT id FROM chunks ORDER BY id")]
        tagged = 0
        for i in range(0, len(ids), 97):
            batch = ids[i : i + 97] + [10**9]  # an id no chunk has: absent, as a retired chunk is
            got = stored_hits.candidates(db, batch)
            want = {
                cid: (did, path, json.loads(tags), ordinal)
                for cid, did, path, tags, ordinal in db.execute(
                    """SELECT c.id, c.document_id, d.path, d.tags, c.ordinal FROM chunks c
                   JOIN documents d ON d.id = c.document_id WHERE c.id IN (SELECT value FROM json_each(?))""",
                    (json.dumps(batch),),
                )
            }
            assert {c: (v.document_id, v.path, v.tags, v.ordinal) for c, v in got.items()} == want
            tagged += sum(1 for v in got.values() if v.tags)
    assert tagged > 0  # documents with tags were among them
