"""Link resolution: raw link targets → document paths in the same workspace.

A target resolves, in order, as: a relative path from the linking file, a
workspace-relative path, a file stem, a title, an alias, or an ADR number
("ADR 0203", "0203", "adr-203" → frontmatter `adr: 203`), or "<field> N" for
an integer field the workspace schema marks `link: true`.
A path resolves as a static site renders it: to the file itself, to the page
whose file is the path plus a page suffix ("guide" → guide.md, guide.html.md;
"guide.html" too), or to the folder's page (guide/index.md, _index.md,
README.md). A path that names no file ("../traces", "guides/upgrade") is a
page's address: from a page that is not a folder's index, the site renders
it relative to the page's own address (docs/a/b.md is served at /docs/a/b/),
so that base is tried before the file's folder.
A site-absolute target ("/docs/concepts/") names a page from the workspace
root or one of the workspace's `site_roots` (content/en, source, ...; from a
page under a sibling of a root, content/ja, that sibling first), a
Jekyll collection's page (/tutorials/x from _tutorials/x.md) or post
(/news/2016/04/19/title from _posts/2016-04-19-title.md), or a page whose
frontmatter `permalink`/`url` (or a Hugo alias) is that address, and nothing
else: when no document is there it is broken.
After each write, links without a target are tried again, so a link written
before its target existed resolves once the target appears. The name tables
are kept per workspace and updated one document at a time: an edit to a body,
the common case while typing, resolves just its own links; a new, moved or
retitled document updates its own names and re-resolves only the links that
could now point elsewhere.

Runs on: the writer, inside the caller's transaction; the name tables are only touched under the store's write lock.
"""

from __future__ import annotations

import json
import logging
import posixpath
import re
from bisect import insort
from typing import Any

from ..config.workspace import WorkspaceConfig
from ..fmschema.values import parse_int
from .documents import next_generation
from .facets import active_schema
from .interface import Snapshot
from .sessions import NOT_SESSION
from .sql import dialect, in_ids, row_key

log = logging.getLogger("autodoc.links")

_ADR_NUM = re.compile(r"^(?:adr[\s_-]*)?0*(\d{1,6})$", re.I)


# an `adr:` value that is an ADR number: ASCII digits only (str.isdigit() is true for "²", which
# int() refuses), and few enough that int() never meets Python's 4,300-digit limit
_ADR_VALUE = re.compile(r"^0*([0-9]{1,18})$")


def _adr_number(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if 0 < v < 10**18 else None
    m = _ADR_VALUE.match(v.strip()) if isinstance(v, str) else None
    return (int(m.group(1)) or None) if m else None  # "0" names no ADR, as before


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


_WORD = re.compile(r"\w+")
_INDEX_NAMES = ("index", "_index", "readme")
_POST_NAME = re.compile(r"^\d{4}-\d{2}-\d{2}-")
_POST_ADDRESS = re.compile(r"(?:^|/)(\d{4})/(\d{2})/(\d{2})/([^/]+?)(?:\.html?)?$")
_PAGE_EXT = (".html", ".htm")
# a target ending so names a file, relative to the file that links it
_FILE_EXT = (".md", ".markdown", ".mdown", ".mkd", ".mdx")


def _address(url: str) -> str:
    """A site address as a key: no leading or trailing slash, no .html, lowercased."""
    a = url.split("#", 1)[0].split("?", 1)[0].strip().strip("/").lower()
    for ext in _PAGE_EXT:
        if a.endswith(ext):
            a = a[: -len(ext)]
    return a[:-6] if a.endswith("/index") else "" if a == "index" else a


class NameTables:
    """The names a link target can resolve by, kept one document at a time.

    Each key (path, lowercased path, page address, file stem, title, alias,
    permalink, ADR number, "<field> N") lists every document that has it,
    sorted; the first path wins, so the answer does not depend on the order
    documents arrived in. A save that adds, removes or renames one document
    updates its keys only, instead of re-reading every document's names (2.3 s
    at 100,000 files)."""

    def __init__(
        self,
        link_fields: tuple[str, ...] | list[str] = (),
        site_roots: tuple[str, ...] | list[str] = (),
        page_suffixes: tuple[str, ...] | list[str] = (".md",),
    ):
        self.link_fields = tuple(link_fields)
        self.site_roots = ("", *site_roots)
        self.page_suffixes = tuple(sorted({s.lower() for s in page_suffixes}, key=lambda s: (-len(s), s)))
        self._field_res = [(f, re.compile(rf"^{re.escape(f)}[\s_-]*#?0*(\d{{1,9}})$", re.I)) for f in self.link_fields]
        self._keys: dict[str, set[tuple[str, Any]]] = {}  # path -> its keys
        self._table: dict[tuple[str, Any], list[str]] = {}  # key -> sorted paths

    def page(self, path: str) -> str:
        """A document's address, lowercased: its path without its page suffix, and a folder's
        index page (index, _index, README) as the folder ("docs/a/_index.md" -> "docs/a")."""
        low = path.lower()
        for suffix in self.page_suffixes:
            if low.endswith(suffix) and len(low) > len(suffix):
                low = low[: -len(suffix)]
                break
        else:
            return low
        head, _, name = low.rpartition("/")
        return head if name in _INDEX_NAMES else low

    def _keys_of(self, p: str, title: str, aliases: list, fm: Any) -> set[tuple[str, Any]]:
        page = self.page(p)
        keys: set[tuple[str, Any]] = {
            ("path", p),
            ("lower", p.lower()),
            ("page", page),
            ("stem", posixpath.splitext(posixpath.basename(p))[0].lower()),
            ("stem", posixpath.basename(page)),  # "ADR006-rds-broker.html.md" is ADR006-rds-broker
        }
        if "/_posts/" in f"/{p}" and _POST_NAME.match(posixpath.basename(page)):
            keys.add(("post", posixpath.basename(page)))
        for key in ("permalink", "url"):  # Jekyll's and Hugo's address of a page
            v = fm.get(key) if isinstance(fm, dict) else None
            if isinstance(v, str) and v.startswith("/") and ":" not in v:
                keys.add(("site", _address(v)))
        for a in aliases:  # a Hugo alias "/docs/old-place/" is an address the site redirects
            if isinstance(a, str) and a.startswith("/"):
                keys.add(("site", _address(a)))
        if title:
            keys.add(("title", _norm(title)))
        for a in aliases:
            keys.add(("alias", _norm(str(a))))
        num = _adr_number(fm.get("adr") if isinstance(fm, dict) else None)
        if num is not None:
            keys.add(("adr", num))
        m = re.match(r"^(?:adr[-_ ]?)?(\d{3,6})\b", posixpath.basename(p), re.I)
        if m:
            keys.add(("adr", int(m.group(1))))
        lower = {str(k).lower(): v for k, v in fm.items()} if isinstance(fm, dict) else {}
        for f in self.link_fields:
            n = parse_int(lower.get(f))
            if n is not None:
                keys.add((f"field:{f}", n))
        return keys

    def check(self, p: str, title: str, aliases: list, fm: Any) -> None:
        """Raise what add() would meet in a document's names: the writer calls this inside the
        document's own savepoint, so a value no key can be made of skips that document only."""
        self._keys_of(p, title, aliases, fm)

    def add(self, p: str, title: str, aliases: list, fm: Any) -> None:
        self.remove(p)
        try:
            keys = self._keys_of(p, title, aliases, fm)
        except Exception:  # one document's names never stop the workspace's links: it keeps its path
            log.exception("links: the names of %s could not be read; it resolves by its path only", p)
            keys = {("path", p), ("lower", p.lower())}
        self._keys[p] = keys
        for k in keys:
            insort(self._table.setdefault(k, []), p)

    def remove(self, p: str) -> None:
        for k in self._keys.pop(p, ()):
            paths = self._table[k]
            paths.remove(p)
            if not paths:
                del self._table[k]

    def words(self, p: str) -> set[str] | None:
        """The longest word of each of a document's keys: a link target that
        resolves by that key contains it (what to look for among the links).
        None when some key has no word at all."""
        out = set()
        for _, key in self._keys.get(p, ()):
            ws = _WORD.findall(str(key).lower())
            if not ws:
                return None
            out.add(max(ws, key=len))
        return out

    def _at(self, cand: str) -> str | None:
        """The document at a workspace-relative path: the file, or the page of that address."""
        if cand.startswith("../") or cand == "..":
            return None  # outside the workspace
        hit = self._first("path", cand) or self._first("lower", cand.lower())
        if hit:
            return hit
        low = cand.lower()
        for ext in _PAGE_EXT:  # "guide.html": the page guide.md renders to
            if low.endswith(ext):
                low = low[: -len(ext)]
                break
        return self._first("page", "" if low == "." else self.page(low))

    def _first(self, kind: str, key: Any) -> str | None:
        paths = self._table.get((kind, key))
        return paths[0] if paths else None

    def _roots_for(self, source: str) -> list[str]:
        """The site roots for a link written in source: first the sibling of a root that holds
        the page (content/ja for a page under content/ja when content/en is a root: Hugo serves
        a translated page's /docs/x as the translation when there is one), then the roots."""
        first = []
        for root in self.site_roots:
            parent, _, _ = root.rpartition("/")
            if parent and source.startswith(parent + "/"):
                sibling = parent + "/" + source[len(parent) + 1 :].split("/", 1)[0]
                if sibling != source and sibling not in first:
                    first.append(sibling)
        return first + [r for r in self.site_roots if r not in first]

    def resolve(self, source: str, target: str) -> str | None:
        t = target.strip()
        if not t:
            return None
        if t.startswith("/"):  # a site-absolute address: from the root or a site root, or a permalink
            rel = posixpath.normpath(t.strip("/"))
            for root in self._roots_for(source):
                hit = self._at(posixpath.normpath(posixpath.join(root, rel)))
                if hit:
                    return hit
            for root in self.site_roots:  # Jekyll: a collection's pages (_tutorials/x.md) are served at /tutorials/x/
                hit = self._at(posixpath.normpath(posixpath.join(root, "_" + rel)))
                if hit:
                    return hit
            post = _POST_ADDRESS.search(rel)  # Jekyll: _posts/2016-04-19-title.md at /news/2016/04/19/title/
            if post:
                hit = self._first("post", "-".join(post.groups()).lower())
                if hit:
                    return hit
            return self._first("site", _address(t))
        base = posixpath.dirname(source)
        bases = [base, ""]
        own = self.page(source)
        if not t.lower().endswith(_FILE_EXT) and own not in (base.lower(), source.lower()):
            # "../traces" from docs/concepts/signals/baggage.md: the page is served at
            # /docs/concepts/signals/baggage/, and an address is relative to that
            bases.insert(0, own)
        for b in bases:
            hit = self._at(posixpath.normpath(posixpath.join(b, t)))
            if hit:
                return hit
        n = _norm(t)
        stem = posixpath.splitext(posixpath.basename(t))[0].lower()
        for kind, key in (("stem", stem), ("title", n), ("alias", n)):
            hit = self._first(kind, key)
            if hit:
                return hit
        m = _ADR_NUM.match(n.replace("adr ", "adr"))
        if m:
            hit = self._first("adr", int(m.group(1)))
            if hit:
                return hit
        for f, rx in self._field_res:
            m = rx.match(n)
            if m:
                hit = self._first(f"field:{f}", int(m.group(1)))
                if hit:
                    return hit
        return None


# a session is no link target: a note's [[Title]] must not resolve to a conversation
_NAMES_SQL = f"SELECT path, title, aliases, frontmatter FROM documents WHERE workspace_id=? AND {NOT_SESSION}"


def _tables_for(db: Snapshot, workspace_id: int) -> NameTables:
    schema = active_schema(db, workspace_id)
    row = db.execute("SELECT config FROM workspaces WHERE id=?", (workspace_id,)).fetchone()
    cfg = WorkspaceConfig.from_json(json.loads(row[0]) if row else None)
    tables = NameTables(schema.link_fields() if schema else (), cfg.site_roots, cfg.page_suffixes)
    for p, t, a, f in db.execute(_NAMES_SQL, (workspace_id,)):
        tables.add(p, t, json.loads(a), json.loads(f))
    return tables


def _resolver_for(db: Snapshot, workspace_id: int):
    return _tables_for(db, workspace_id).resolve


def _apply(db: Snapshot, resolve, rows) -> int:
    updates = []
    for rowid, source, target, current in rows:
        new = resolve(source, target)
        if new != current:
            updates.append((new, rowid))
    db.executemany(f"UPDATE links SET target_path=? WHERE {row_key(db)}=?", updates)
    return len(updates)


def _links_sql(db: Snapshot, ws: str = "?") -> str:
    """Every link of a workspace (`ws`: its placeholder), as (row id, source path, target, resolved path)."""
    return (
        f"SELECT l.{row_key(db)}, d.path, l.target, l.target_path FROM links l JOIN documents d ON d.id = l.source_id "
        f"WHERE l.workspace_id={ws}"
    )


class LinkResolver:
    """Per-workspace name tables (one per Service; used under its write lock)."""

    # Past this many renamed documents in one write, reading every name again is cheaper.
    INCREMENTAL_MAX = 256

    def __init__(self) -> None:
        self._cache: dict[int, NameTables] = {}

    def forget(self, workspace_id: int) -> None:
        self._cache.pop(workspace_id, None)

    def reconfigure(self, db: Snapshot, workspace_id: int) -> int:
        """Resolve every link again after the workspace's site layout (site_roots, page_suffixes)
        changed, inside the caller's transaction; readers' caches move on if any link did."""
        self.forget(workspace_id)
        moved = self.update(db, workspace_id, changed=None)
        if moved:
            next_generation(db)  # supersede chains and other per-generation caches
        return moved

    def check(self, workspace_id: int, path: str, title: str, aliases: list, fm: Any) -> None:
        """Raise when a document's names (title, aliases, frontmatter) cannot be keyed."""
        (self._cache.get(workspace_id) or NameTables()).check(path, title, aliases, fm)

    def update(self, db: Snapshot, workspace_id: int, *, changed: set[str] | None) -> int:
        """Bring links up to date after a write. `changed`: the paths whose names
        (path, title, aliases, frontmatter) changed, old and new paths of a move;
        None when unknown (every name is read again and every link resolved)."""
        tables = self._cache.get(workspace_id)
        if tables is None or changed is None or len(changed) > self.INCREMENTAL_MAX:
            tables = self._cache[workspace_id] = _tables_for(db, workspace_id)
            return _apply(db, tables.resolve, db.execute(_links_sql(db), (workspace_id,)).fetchall())
        if not changed:  # rewritten links start unresolved; broken ones get another try
            return _apply(
                db,
                tables.resolve,
                db.execute(_links_sql(db) + " AND l.target_path IS NULL", (workspace_id,)).fetchall(),
            )
        # the longest word of each changed document's names, before and after (None: a name has none)
        named: list[set[str] | None] = [tables.words(p) for p in changed]
        for p in changed:
            tables.remove(p)
        cond, paths = in_ids(db, "path", sorted(changed))
        for p, t, a, f in db.execute(_NAMES_SQL + f" AND {cond}", (workspace_id, paths)):
            tables.add(p, t, json.loads(a), json.loads(f))
            named.append(tables.words(p))
        known = [ws for ws in named if ws is not None]
        if len(known) < len(named) or not all(w.isascii() for ws in known for w in ws):  # LIKE folds ASCII case only
            return _apply(db, tables.resolve, db.execute(_links_sql(db), (workspace_id,)).fetchall())
        words: set[str] = set().union(*known)
        # A link can change its answer only if it is unresolved, points at a changed document, is
        # written in a changed (moved) document, or names one of the changed keys, whose longest
        # word its target then contains. A target with any non-ASCII character is always tried:
        # Python folds some (fullwidth digits, the Kelvin sign) to ASCII, LIKE does not.
        patterns: Any = [f"%{w}%" for w in sorted(words)]
        if dialect(db) == "postgres":
            # the same test: a character outside printable ASCII, ILIKE (the words are ASCII; LIKE in
            # SQLite folds ASCII case only, and a target with anything else is taken by the first test)
            others = "l.target ~ '[^ -~]' OR l.target ILIKE ANY(:patterns)"
            sets = "l.target_path = ANY(:paths) OR d.path = ANY(:paths)"
        else:
            others = (
                "l.target GLOB '*[^ -~]*' OR EXISTS (SELECT 1 FROM json_each(:patterns) w WHERE l.target LIKE w.value)"
            )
            sets = "l.target_path IN (SELECT value FROM json_each(:paths)) OR d.path IN (SELECT value FROM json_each(:paths))"
            patterns = json.dumps(patterns)
        rows = db.execute(
            _links_sql(db, ":ws") + f" AND (l.target_path IS NULL OR {sets} OR {others})",
            {"ws": workspace_id, "paths": paths, "patterns": patterns},
        ).fetchall()
        return _apply(db, tables.resolve, rows)
