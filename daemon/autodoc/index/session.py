"""Session indexing: session.append and session.remove.

Input: a workspace, a session id and events (session.append's params).
Output: the session's document written as its next generation (ingest/session.py
renders it; store/documents.py writes it, so FTS, vectors, generations,
document.read and line-exact refs work as for a file), its events' spans
(store/sessions.py), a change-log entry, and the listeners told — the embed
queue then embeds the new chunks like any other.

Appending is idempotent per event id: an event sent again replaces the one
with its id, in its place; the events already there are read back from the
stored document, so unchanged events keep their chunks and vectors.

Runs on: the thread that calls it, inside one write transaction (the daemon's single writer slot).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from ..config import WorkspaceConfig
from ..errors import DocumentNotFound, InvalidParams
from ..ingest.secrets import Masked, mask, placeholders
from ..ingest.session import (
    Event,
    EventSpan,
    Reuse,
    classify,
    clean_text,
    derive_title,
    event_kind,
    one_line,
    relative_chunks,
    render,
    time_text,
)
from ..ingest.text import secret_problems
from ..ingest.types import Chunk
from ..store import changes as changelog
from ..store import documents as stored
from ..store import sessions as stored_sessions
from ..store.interface import StoreInterface
from ..store.workspaces import Workspace

Written = Callable[[Workspace, list[dict], list[int]], None]
LIST_LIMIT = 100  # session.list's default page


class SessionIndex:
    def __init__(
        self, store: StoreInterface, token_counter: Callable[[Workspace], Callable[[str], int] | None], written: Written
    ):
        self.store = store
        self._token_counter = token_counter
        self._written = written  # (workspace, change-log entries, touched document ids), after the commit

    def append(
        self,
        ws: Workspace,
        session_id: str,
        events: list[dict[str, Any]],
        title: str | None = None,
        *,
        remask: bool = False,
    ) -> dict[str, Any]:
        """Index a session's conversation events (module docstring); the answer counts what happened.
        `remask` masks the stored events too (rechunk, after redact_secrets was turned on): an
        append masks only the events it brings, so a long session is not scanned again per event."""
        cfg = WorkspaceConfig.from_json(ws.config)
        count = self._token_counter(ws)
        # what chunk boundaries depend on besides the event: stored chunks cut under other settings are cut again
        chunking = json.dumps([cfg.section_tokens, cfg.embedding], sort_keys=True, default=str)
        skipped: dict[str, int] = {}
        incoming: list[tuple[str, Event | None]] = []  # (id, the event, or None: not conversation)
        for i, e in enumerate(events):
            kind, disagrees = event_kind(e)  # `kind` or `type`, seed 000's names mapped (ingest/session.py)
            if kind is None or disagrees:
                field = f"events[{i}].{disagrees or 'kind'}"
                raise InvalidParams(field, "names another kind than kind" if disagrees else "is required")
            reason = classify(kind, e.get("text"))
            if reason is not None:
                skipped[reason] = skipped.get(reason, 0) + 1
                incoming.append((e["id"], None))
            else:
                text = clean_text(e["text"])
                if cfg.redact_secrets:  # masked before it is stored: a session's text is only what is stored
                    text = mask(text)[0]
                incoming.append((e["id"], Event(e["id"], kind, text, time_text(e.get("time")))))
        path = stored_sessions.session_path(session_id)
        counted = {"new": 0, "replaced": 0, "unchanged": 0, "removed": 0}
        change: dict | None = None
        doc_id: int | None = None
        with self.store.write() as db:
            current = stored_sessions.document_of(db, ws.id, session_id)
            kept: dict[str, Event] = {}
            old_title = reuse = None
            stored_events: list[stored_sessions.StoredEvent] = []
            if current is not None:
                doc_id, old_title, content = current
                stored_events = stored_sessions.events_of(db, doc_id)
                kept, reuse = _stored(db, doc_id, content, stored_events)
                if remask and cfg.redact_secrets:
                    kept = {k: replace(ev, text=mask(ev.text)[0]) for k, ev in kept.items()}
            for eid, ev in incoming:
                before = kept.get(eid)
                if ev is None:
                    if before is not None:  # replaced by something that is not conversation: it leaves the index
                        del kept[eid]
                        counted["removed"] += 1
                    continue
                counted["new" if before is None else "unchanged" if before == ev else "replaced"] += 1
                kept[eid] = ev
            ordered = list(kept.values())
            name = one_line(title) if title and title.strip() else (old_title or derive_title(ordered, session_id))
            if cfg.redact_secrets:
                name = mask(name)[0]
            if not ordered:
                change = stored.delete_document(db, ws, path) if current is not None else None
            else:
                r = render(
                    name, ordered, section_tokens=cfg.section_tokens, count_tokens=count, chunking=chunking, reuse=reuse
                )
                # what was masked, this append's and earlier ones' alike: the placeholders in the text
                r.doc.problems = secret_problems(
                    [
                        Masked(m.kind, sp.line_start + m.line - 1)
                        for sp, ev in zip(r.spans, ordered, strict=True)
                        for m in placeholders(ev.text)
                    ]
                )
                # force: the same text may be cut anew (a new section budget); write_document
                # still writes nothing when the chunks come out the same
                change = stored.write_document(
                    db, ws, path, data=r.data, doc=r.doc, chunks=r.chunks, mtime_ns=0, force=True
                )
                keys = [s.chunk_key for s in r.spans]
                if change is not None or keys != [s.chunk_key for s in stored_events]:
                    written = stored_sessions.document_of(db, ws.id, session_id)
                    assert written is not None  # written just above, in this transaction
                    doc_id = written[0]
                    stored_sessions.write_events(
                        db,
                        doc_id,
                        [
                            stored_sessions.StoredEvent(
                                s.id, i, s.kind, s.time, s.byte_start, s.byte_end, s.line_start, s.line_end, s.chunk_key
                            )
                            for i, s in enumerate(r.spans)
                        ],
                    )
            if change is not None:
                changelog.trim(db)
            answer = self._answer(db, ws, session_id, path)
        if change is not None and doc_id is not None:
            self._written(ws, [change], [doc_id])
        indexed = sum(1 for _, ev in incoming if ev is not None)
        return {
            **answer,
            "appended": len(events),
            "indexed": indexed,
            **counted,
            "skipped": skipped,
            "op": None if change is None else change["op"],
            "change_cursor": None if change is None else change["cursor"],
        }

    def rechunk(self, ws: Workspace) -> int:
        """Cut every session of the workspace again, after its section budget changed (events whose
        chunks come out the same keep their rows and vectors); how many sessions changed."""
        with self.store.locked() as db:
            ids = stored_sessions.session_ids(db, ws.id)
        return sum(1 for sid in ids if self.append(ws, sid, [], remask=True)["op"] is not None)

    def remove(self, ws: Workspace, session_id: str) -> dict[str, Any]:
        """Delete a session: its document, chunks, vectors' claims and event spans."""
        path = stored_sessions.session_path(session_id)
        with self.store.write() as db:
            current = stored_sessions.document_of(db, ws.id, session_id)
            if current is None:
                raise DocumentNotFound(
                    f"workspace {ws.name!r} has no session {session_id!r}", {"session_id": session_id}
                )
            before = self._answer(db, ws, session_id, path)
            change = stored.delete_document(db, ws, path)
            changelog.trim(db)
        if change is not None:
            self._written(ws, [change], [current[0]])
        return {
            "workspace": ws.name,
            "session_id": session_id,
            "path": path,
            "removed": True,
            "events": before["events"],
            "chunks": before["chunks"],
            "change_cursor": None if change is None else change["cursor"],
        }

    def list(self, ws: Workspace, after: str | None = None, limit: int = LIST_LIMIT) -> dict[str, Any]:
        """The workspace's sessions in id order, a page at a time (session.list)."""
        with self.store.read() as db:
            rows = stored_sessions.listed(db, ws.id, after, limit + 1)
        page = rows[:limit]
        return {
            "workspace": ws.name,
            "sessions": [
                {
                    "session_id": sid,
                    "path": stored_sessions.session_path(sid),
                    "title": title,
                    "generation": gen,
                    "events": n_events,
                    "chunks": n_chunks,
                    "first_time": first,
                    "last_time": last,
                }
                for sid, title, gen, n_events, n_chunks, first, last in page
            ],
            "next_cursor": page[-1][0] if len(rows) > limit else None,
        }

    @staticmethod
    def _answer(db, ws: Workspace, session_id: str, path: str) -> dict[str, Any]:
        """What the session holds now: {workspace, session_id, path, title, events, chunks, generation}."""
        current = stored_sessions.document_of(db, ws.id, session_id)
        if current is None:
            return {
                "workspace": ws.name,
                "session_id": session_id,
                "path": path,
                "title": None,
                "events": 0,
                "chunks": 0,
                "generation": None,
            }
        doc_id, title, _ = current
        n_events, n_chunks, gen = stored_sessions.document_counts(db, doc_id)
        return {
            "workspace": ws.name,
            "session_id": session_id,
            "path": path,
            "title": title,
            "events": n_events,
            "chunks": n_chunks,
            "generation": gen,
        }


def _stored(
    db, doc_id: int, content: bytes, events: list[stored_sessions.StoredEvent]
) -> tuple[dict[str, Event], Reuse]:
    """A stored session read back: its events (their text sliced from the document) by id, in
    order, and their chunks regrouped by event for render to reuse."""
    kept: dict[str, Event] = {}
    spans: list[EventSpan] = []
    for s in events:
        kept[s.event_id] = Event(s.event_id, s.kind, content[s.byte_start : s.byte_end].decode("utf-8"), s.time)
        spans.append(
            EventSpan(s.event_id, s.kind, s.time, s.byte_start, s.byte_end, s.line_start, s.line_end, s.chunk_key)
        )
    return kept, relative_chunks(spans, [Chunk(*row) for row in stored_sessions.chunks_of(db, doc_id)])
