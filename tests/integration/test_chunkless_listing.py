"""Issue 36 Low 10: a document with frontmatter and no body chunk is listed by a facets-only query.

jekyll's site_template/index.markdown is all frontmatter (`layout: home`) and
no body: it is indexed and readable, but has no chunk, and the facet listing
(and its facet counts) joined documents through their chunks, so it was
never listed.
"""

from __future__ import annotations

import pytest

from autodoc.config import Settings
from autodoc.service import Service

JEKYLL_INDEX = (  # ../shared/data/corpora/jekyll/lib/site_template/index.markdown, as it is
    "---\n# Feel free to add content and custom Front Matter to this file.\n"
    "# To modify the layout, see https://jekyllrb.com/docs/themes/#overriding-theme-defaults\n\n"
    "layout: home\n---\n"
)


@pytest.fixture
def svc(short_tmp):
    kb = short_tmp / "kb"
    kb.mkdir()
    (kb / "index.markdown").write_text(JEKYLL_INDEX)
    (kb / "about.md").write_text("---\nlayout: page\ntags: [site]\n---\n# About\n\nabout this site\n")
    (kb / "home.md").write_text("---\nlayout: home\n---\n# Home\n\nwelcome home\n")
    s = Service(Settings.from_env(store=short_tmp / "store.db"))
    s.workspace_add("kb", str(kb), {"embedding": {"provider": "none"}})
    assert s.index("kb")["added"] == 3
    yield s
    s.close()


def _paths(ans):
    return [h["path"] for h in ans["hits"]]


def test_a_document_without_chunks_is_listed_by_its_facets(svc):
    assert svc.document_read("kb", "index.markdown")["text"] == JEKYLL_INDEX
    ans = svc.search("kb", "layout:home", {"facet_counts": ["layout"]})
    assert ans["mode_used"] == "facet"
    assert _paths(ans) == ["home.md", "index.markdown"], ans["hits"]
    assert ans["facet_counts"]["layout"] == {"home": 2}
    hit = ans["hits"][1]
    assert (hit["line_start"], hit["byte_end"], hit["snippet"]) == (1, len(JEKYLL_INDEX), ""), hit
    assert _paths(svc.search("kb", "-layout:page")) == ["home.md", "index.markdown"]
    assert _paths(svc.search("kb", "layout:page")) == ["about.md"]
    assert _paths(svc.search("kb", "-tag:site", {"limit": 1})) == ["home.md"]
    listed = svc.search("kb", "-tag:nosuch", {"facet_counts": ["layout"]})
    assert _paths(listed) == ["about.md", "home.md", "index.markdown"]
    assert listed["facet_counts"]["layout"] == {"home": 2, "page": 1}


def test_words_still_find_only_chunks(svc):
    assert "index.markdown" not in _paths(svc.search("kb", "home"))
