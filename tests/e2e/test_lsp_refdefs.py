"""Issue 35: go-to-definition on a Foam link-reference definition (`[wikilinks]: features/wikilinks.md`)
and on a use of one (`[the docs][wikilinks]`), over the real LSP process, on foam-docs' real FAQ page;
a link with a #fragment lands on the heading it names ({#id} or slug)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_lsp import LspClient

from autodoc.config import Settings
from autodoc.service import Service

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
FAQ = CORPORA / "foam-docs" / "docs" / "user" / "frequently-asked-questions.md"
pytestmark = pytest.mark.skipif(not FAQ.is_file(), reason=f"no corpora at {CORPORA}")


def test_definition_on_a_reference_definition_and_its_use(tmp_path):
    root = tmp_path / "kb"
    (root / "user" / "features").mkdir(parents=True)
    faq = root / "user" / "frequently-asked-questions.md"
    text = FAQ.read_text(encoding="utf-8") + (
        "\nRead [the wikilink docs][wikilinks] first.\n"
        "Read [the wikilinks\npage](features/wikilinks.md) too.\n"
        "See [placeholders](features/wikilinks.md#placeholders) and [[wikilinks#Link syntax]].\n"
    )
    faq.write_text(text, encoding="utf-8")
    (root / "user" / "features" / "wikilinks.md").write_text(
        "# Wikilinks\n\nHow to link.\n\n## Link placeholders {#placeholders}\n\nText.\n\n## Link syntax\n\nMore.\n"
    )
    store = tmp_path / "store" / "autodoc.db"
    svc = Service(Settings.from_env(store=store))
    try:
        svc.workspace_add("kb", str(root), {"embedding": {"provider": "none"}})
        svc.index("kb")
    finally:
        svc.close()
    client = LspClient(store, tmp_path / "lsp.log")
    try:
        client.start(root)
        uri = client.open(faq)
        want = (root / "user" / "features" / "wikilinks.md").resolve().as_uri()
        lines = text.splitlines()
        at_def = next(n for n, l in enumerate(lines) if l.startswith("[wikilinks]: features/wikilinks.md"))
        use = len(lines) - 4
        wrapped = len(lines) - 2  # "page](features/wikilinks.md) too.": the label began a line above
        for line, col in (
            (at_def, 3),
            (at_def, 20),
            (use, lines[use].index("wikilink docs")),
            (wrapped, 1),
            (wrapped - 1, 7),
        ):
            loc = client.request(
                "textDocument/definition", {"textDocument": {"uri": uri}, "position": {"line": line, "character": col}}
            )
            assert loc is not None and loc["uri"] == want, (line, col)
            assert loc["range"]["start"]["line"] == 0
        last = len(lines) - 1
        for col, heading in ((lines[last].index("placeholders]"), 4), (lines[last].index("#Link"), 8)):
            loc = client.request(
                "textDocument/definition", {"textDocument": {"uri": uri}, "position": {"line": last, "character": col}}
            )
            assert loc["uri"] == want and loc["range"]["start"]["line"] == heading, (col, loc)
    finally:
        client.stop()
