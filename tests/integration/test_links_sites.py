"""Issue 35: links resolved the way the site renders them, on real pages of the OpenTelemetry docs
(Hugo: extensionless and folder links, addresses relative to a page's own address, /docs/...
from content/en), Foam's reference definitions, a Middleman layout (source/, .html.md), the
`site_roots` setting, and `status` listing only links that are really broken."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers.kb_schema import NO_MODEL

from autodoc.config import Settings
from autodoc.service import Service

CORPORA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "corpora"
OTEL = "content/en/docs"
PAGES = [
    "_index.md",
    "concepts/observability-primer.md",
    "concepts/context-propagation/index.md",
    "concepts/signals/_index.md",
    "concepts/signals/baggage.md",
    "concepts/signals/traces.md",
    "concepts/signals/metrics.md",
    "concepts/signals/logs.md",
]
pytestmark = pytest.mark.skipif(not CORPORA.is_dir(), reason=f"no corpora at {CORPORA}")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("site") / "kb"
    for rel in PAGES:  # real pages, in the site's own layout
        dest = root / OTEL / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(CORPORA / "opentelemetry-docs" / OTEL / rel, dest)
    faq = root / "foam" / "user" / "frequently-asked-questions.md"
    faq.parent.mkdir(parents=True)
    shutil.copyfile(CORPORA / "foam-docs/docs/user/frequently-asked-questions.md", faq)
    (root / "foam/user/features").mkdir()
    (root / "foam/user/features/wikilinks.md").write_text("# Wikilinks\n\nText.\n")
    # a Middleman manual: pages are source/**/*.html.md, linked by their address
    (root / "source/team").mkdir(parents=True)
    (root / "source/team/statuspage.html.md").write_text("# Statuspage\n\nWho runs it.\n")
    (root / "source/guides/upgrade_bosh").mkdir(parents=True)
    (root / "source/guides/upgrade_bosh/index.html.md").write_text("# Upgrade BOSH\n\nSteps.\n")
    (root / "source/adr").mkdir()
    (root / "source/adr/ADR006-rds-broker.html.md").write_text("# ADR006 RDS broker\n\nDecided.\n")
    (root / "source/adr/ADR007-next.html.md").write_text(
        "# ADR007\n\nAfter [ADR006](../ADR006-rds-broker), see [statuspage](/team/statuspage).\n"
    )
    (root / "source/index.html.md").write_text(
        "# Manual\n\n- [Upgrade](guides/upgrade_bosh/)\n- [Status](/team/statuspage)\n"
        "- [License](../LICENSE) and [images](images/)\n- [Gone](guides/not-there/) and [[images]]\n"
    )
    (root / "source/images").mkdir()
    (root / "LICENSE").write_text("MIT\n")
    s = Service(Settings.from_env(store=root.parent / "s.db"))
    s.workspace_add("kb", str(root), NO_MODEL)
    s.index("kb")
    yield s, root
    s.close()


def out(s: Service, path: str) -> dict[str, str | None]:
    return {l["target"]: l["target_path"] for l in s.document_links("kb", path)["links"]}


def test_hugo_extensionless_links_reach_their_pages(site):
    s, _ = site
    got = out(s, f"{OTEL}/concepts/signals/_index.md")  # [Traces](traces) from a folder's index page
    for sig in ("traces", "metrics", "logs", "baggage"):
        assert got[sig] == f"{OTEL}/concepts/signals/{sig}.md"


def test_addresses_are_relative_to_the_page_address(site):
    s, _ = site
    got = out(s, f"{OTEL}/concepts/signals/baggage.md")  # served at /docs/concepts/signals/baggage/
    assert got["../traces"] == f"{OTEL}/concepts/signals/traces.md"
    assert got["../../context-propagation"] == f"{OTEL}/concepts/context-propagation/index.md"


def test_site_absolute_links_resolve_under_a_site_root(site):
    s, _ = site
    got = out(s, f"{OTEL}/concepts/observability-primer.md")
    assert got["/docs/concepts/signals/traces"] == f"{OTEL}/concepts/signals/traces.md"
    assert got["/docs/concepts/signals"] == f"{OTEL}/concepts/signals/_index.md"
    back = {b["source_path"] for b in s.document_backlinks("kb", f"{OTEL}/concepts/signals/traces.md")["backlinks"]}
    assert f"{OTEL}/concepts/observability-primer.md" in back


def test_middleman_pages_by_address(site):
    s, _ = site
    got = out(s, "source/index.html.md")
    assert got["guides/upgrade_bosh"] == "source/guides/upgrade_bosh/index.html.md"
    assert got["/team/statuspage"] == "source/team/statuspage.html.md"
    adr = out(s, "source/adr/ADR007-next.html.md")
    assert adr["../ADR006-rds-broker"] == "source/adr/ADR006-rds-broker.html.md"


def test_foam_reference_definitions_resolve(site):
    s, _ = site
    links = s.document_links("kb", "foam/user/frequently-asked-questions.md")["links"]
    defs = [l for l in links if l["target"] == "features/wikilinks.md"]
    assert [(l["line"], l["target_path"]) for l in defs] == [(37, "foam/user/features/wikilinks.md")]


def test_status_lists_only_links_that_are_really_broken(site):
    s, _ = site
    broken = {(b["path"], b["target"]) for b in s.workspace_status("kb")["broken_links"]}
    mine = {t for p, t in broken if p == "source/index.html.md"}
    # ../LICENSE and images/ are there: files, not documents; [[images]] names a note, and none is there
    assert mine == {"guides/not-there", "images"}
    assert out(s, "source/index.html.md")["../LICENSE"] is None  # still no document


def test_site_roots_setting_and_a_target_that_appears_later(tmp_path):
    root = tmp_path / "kb"
    (root / "site/pages").mkdir(parents=True)
    (root / "index.md").write_text("# Home\n\n[Setup](/pages/setup/) and [later](/pages/later).\n")
    (root / "site/pages/setup.md").write_text("# Setup\n\nSteps.\n")
    s = Service(Settings.from_env(store=tmp_path / "s.db"))
    try:
        s.workspace_add("kb", str(root), NO_MODEL)
        s.index("kb")
        assert out(s, "index.md") == {"/pages/setup": None, "/pages/later": None}  # "site" is no default root

        def generation() -> int:
            db = s.store.reader()
            with db:
                return int(db.execute("SELECT value FROM meta WHERE key='generation'").fetchone()[0])

        gen = generation()
        cfg = s.workspace_configure("kb", {"site_roots": ["/site/"]})["config"]
        assert cfg["site_roots"] == ["site"]
        assert generation() > gen  # readers' caches keyed by it move on
        assert out(s, "index.md") == {"/pages/setup": "site/pages/setup.md", "/pages/later": None}
        (root / "site/pages/later.md").write_text("# Later\n")
        s.index_paths("kb", ["site/pages/later.md"])
        assert out(s, "index.md")["/pages/later"] == "site/pages/later.md"
    finally:
        s.close()


def test_live_saves_on_a_site_layout_agree_with_a_full_rebuild(tmp_path):
    """A live save re-resolves only the links its names could change: on a Hugo/Jekyll layout
    (pages by address, folder pages, permalinks, site roots) every link must still resolve as a
    rebuild from scratch resolves it, whatever appears, moves or goes."""
    import random

    from autodoc.store.links import _tables_for
    from autodoc.store.workspaces import get_workspace

    rng = random.Random(11)
    root = tmp_path / "ws"
    names = [
        "content/en/docs/signals/traces.md",
        "content/en/docs/signals/_index.md",
        "content/en/docs/signals/logs/index.md",
        "content/en/docs/collector.md",
        "source/team/statuspage.html.md",
        "docs/_docs/history.md",
        "notes/traces.md",
    ]
    targets = [
        "traces",
        "../traces/",
        "logs/",
        "../collector",
        "/docs/signals/traces/",
        "/docs/signals/",
        "/docs/history/",
        "/team/statuspage",
        "statuspage.html",
        "../../notes/traces.md",
        "nothing-here/",
    ]

    def write(path: str) -> None:
        permalink = rng.choice(["", "", "/docs/history/", "/docs/signals/traces/"])
        fm = f"---\ntitle: Page {rng.randint(1, 3)}\n" + (f"permalink: {permalink}\n" if permalink else "") + "---\n"
        links = " ".join(f"[l]({t})" for t in rng.sample(targets, 4))
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(f"{fm}\nSee {links}.\n")

    for n in names[:3]:
        write(n)
    s = Service(Settings.from_env(store=tmp_path / "store" / "autodoc.db"))
    try:
        s.workspace_add("w", str(root), NO_MODEL)
        s.index("w")
        checked = 0
        for step in range(40):
            present = [n for n in names if (root / n).exists()]
            op = rng.choice(["write", "write", "delete", "move"]) if present else "write"
            if op == "write":
                n = rng.choice(names)
                write(n)
                changed = [n]
            elif op == "delete":
                n = rng.choice(present)
                (root / n).unlink()
                changed = [n]
            else:
                a = rng.choice(present)
                b = rng.choice([x for x in names if x != a])
                (root / b).parent.mkdir(parents=True, exist_ok=True)
                (root / a).replace(root / b)
                changed = [a, b]
            s.index_paths("w", changed)
            db = s.store.reader()
            with db:
                ws = get_workspace(db, "w")
                fresh = _tables_for(db, ws.id)
                rows = db.execute(
                    "SELECT d.path, l.target, l.target_path FROM links l JOIN documents d "
                    "ON d.id = l.source_id WHERE l.workspace_id=?",
                    (ws.id,),
                ).fetchall()
            checked += len(rows)
            for src, target, got in rows:
                assert got == fresh.resolve(src, target), (step, op, changed, src, target, got)
        assert checked > 200
    finally:
        s.close()


def test_jekyll_pages_by_permalink_collection_post_and_link_tag(tmp_path):
    root = tmp_path / "kb"
    src = CORPORA / "jekyll" / "docs"
    for rel in ("_docs/history.md", "_tutorials/navigation.md", "_posts/2016-04-19-jekyll-3-0-4-released.markdown"):
        (root / "docs" / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / rel, root / "docs" / rel)
    (root / "docs" / "index.md").write_text(
        "# Home\n\n[History](/docs/history/), [nav](/tutorials/navigation/),\n"
        "[3.0.4](/news/2016/04/19/jekyll-3-0-4-released/) and [again]({% link _docs/history.md %}).\n"
    )
    s = Service(Settings.from_env(store=tmp_path / "s.db"))
    try:
        s.workspace_add("kb", str(root), NO_MODEL)
        s.index("kb")
        assert out(s, "docs/index.md") == {
            "/docs/history": "docs/_docs/history.md",  # permalink: "/docs/history/"
            "/tutorials/navigation": "docs/_tutorials/navigation.md",  # a collection's page
            "/news/2016/04/19/jekyll-3-0-4-released": "docs/_posts/2016-04-19-jekyll-3-0-4-released.markdown",
            "/_docs/history.md": "docs/_docs/history.md",  # {% link %}, from the site's root (docs/)
        }
    finally:
        s.close()


def test_a_translated_page_links_to_the_translation(tmp_path):
    """Hugo serves /docs/x from a Japanese page as the Japanese page when there is one: content/ja
    is tried first for a page under content/ja (a sibling of the site root content/en)."""
    root = tmp_path / "kb"
    for lang in ("en", "ja"):
        for rel in ("concepts/observability-primer.md", "concepts/signals/traces.md"):
            dest = root / "content" / lang / "docs" / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(CORPORA / "opentelemetry-docs" / "content" / lang / "docs" / rel, dest)
    s = Service(Settings.from_env(store=tmp_path / "s.db"))
    try:
        s.workspace_add("kb", str(root), NO_MODEL)
        s.index("kb")
        for lang in ("en", "ja"):
            got = out(s, f"content/{lang}/docs/concepts/observability-primer.md")
            assert got["/docs/concepts/signals/traces"] == f"content/{lang}/docs/concepts/signals/traces.md"
    finally:
        s.close()
