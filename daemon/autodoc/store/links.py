"""Link resolution: raw link targets → document paths in the same workspace.

A target resolves, in order, as: a relative path from the linking file (with
or without `.md`), a workspace-relative path, a file stem, a title, an alias,
or an ADR number ("ADR 0203", "0203", "adr-203" → frontmatter `adr: 203`),
or "<field> N" for an integer field the workspace schema marks `link: true`.
After each write, links without a target are tried again, so a link written
before its target existed resolves once the target appears. The resolver (the
name tables) is rebuilt over the whole workspace only when some document's
names change (added, deleted, moved, retitled, re-aliased, new frontmatter):
an edit to a body, the common case while typing, resolves just its own links.
"""

from __future__ import annotations

import json
import posixpath
import re

import apsw

from ..schema.values import parse_int
from .facets import active_schema

_ADR_NUM = re.compile(r"^(?:adr[\s_-]*)?0*(\d{1,6})$", re.I)


def _norm(s: str) -> str:
    return " ".join(s.lower().split())


def build_resolver(docs: list[tuple[str, str, list[str], dict]], link_fields: tuple[str, ...] | list[str] = ()):
    """docs: (path, title, aliases, frontmatter). Returns resolve(source_path, target).

    link_fields: integer fields the workspace schema marks `link: true`; a
    target written "<field> N" ("RFC 12", "rfc-0012") resolves to the
    document whose field is N."""
    paths = {p: p for p, *_ in docs}
    lower_paths = {p.lower(): p for p, *_ in docs}
    by_stem: dict[str, str] = {}
    by_title: dict[str, str] = {}
    by_alias: dict[str, str] = {}
    by_adr: dict[int, str] = {}
    by_field: dict[str, dict[int, str]] = {}
    field_res = [(f, re.compile(rf"^{re.escape(f)}[\s_-]*#?0*(\d{{1,9}})$", re.I)) for f in link_fields]
    for p, title, aliases, fm in sorted(docs):
        stem = posixpath.splitext(posixpath.basename(p))[0].lower()
        by_stem.setdefault(stem, p)
        if title:
            by_title.setdefault(_norm(title), p)
        for a in aliases:
            by_alias.setdefault(_norm(str(a)), p)
        num = fm.get("adr") if isinstance(fm, dict) else None
        if isinstance(num, (int, str)) and str(num).strip().lstrip("0").isdigit():
            by_adr.setdefault(int(str(num).strip()), p)
        m = re.match(r"^(?:adr[-_ ]?)?(\d{3,6})\b", posixpath.basename(p), re.I)
        if m:
            by_adr.setdefault(int(m.group(1)), p)
        lower = {str(k).lower(): v for k, v in fm.items()} if isinstance(fm, dict) else {}
        for f in link_fields:
            n = parse_int(lower.get(f))
            if n is not None:
                by_field.setdefault(f, {}).setdefault(n, p)

    def resolve(source: str, target: str) -> str | None:
        t = target.strip()
        if not t:
            return None
        base = posixpath.dirname(source)
        for cand in (posixpath.normpath(posixpath.join(base, t)), posixpath.normpath(t.lstrip("/"))):
            for c in (cand, cand + ".md", cand + ".markdown"):
                if c in paths:
                    return c
                if c.lower() in lower_paths:
                    return lower_paths[c.lower()]
        n = _norm(t)
        stem = posixpath.splitext(posixpath.basename(t))[0].lower()
        for table, key in ((by_stem, stem), (by_title, n), (by_alias, n)):
            if key in table:
                return table[key]
        m = _ADR_NUM.match(n.replace("adr ", "adr"))
        if m and int(m.group(1)) in by_adr:
            return by_adr[int(m.group(1))]
        for f, rx in field_res:
            m = rx.match(n)
            if m and int(m.group(1)) in by_field.get(f, {}):
                return by_field[f][int(m.group(1))]
        return None

    return resolve


def _resolver_for(db: apsw.Connection, workspace_id: int):
    docs = [
        (p, t, json.loads(a), json.loads(f))
        for p, t, a, f in db.execute(
            "SELECT path, title, aliases, frontmatter FROM documents WHERE workspace_id=?", (workspace_id,)
        )
    ]
    schema = active_schema(db, workspace_id)
    return build_resolver(docs, schema.link_fields() if schema else ())


def _apply(db: apsw.Connection, resolve, rows) -> int:
    updates = []
    for rowid, source, target, current in rows:
        new = resolve(source, target)
        if new != current:
            updates.append((new, rowid))
    db.executemany("UPDATE links SET target_path=? WHERE rowid=?", updates)
    return len(updates)


_LINKS_SQL = ("SELECT l.rowid, d.path, l.target, l.target_path FROM links l JOIN documents d ON d.id = l.source_id "
              "WHERE l.workspace_id=?")


def resolve_workspace(db: apsw.Connection, workspace_id: int) -> int:
    """Recompute every link's target_path in the workspace; return how many changed."""
    return _apply(db, _resolver_for(db, workspace_id), db.execute(_LINKS_SQL, (workspace_id,)).fetchall())


class LinkResolver:
    """Per-workspace resolver cache (one per Service; used under its write lock)."""

    def __init__(self) -> None:
        self._cache: dict[int, object] = {}

    def forget(self, workspace_id: int) -> None:
        self._cache.pop(workspace_id, None)

    def update(self, db: apsw.Connection, workspace_id: int, *, names_changed: bool) -> int:
        resolve = self._cache.get(workspace_id)
        if names_changed or resolve is None:
            resolve = self._cache[workspace_id] = _resolver_for(db, workspace_id)
            return _apply(db, resolve, db.execute(_LINKS_SQL, (workspace_id,)).fetchall())
        # rewritten links start unresolved; broken ones get another try
        return _apply(db, resolve, db.execute(_LINKS_SQL + " AND l.target_path IS NULL", (workspace_id,)).fetchall())
