"""The session scope (issue 15, seed 000): session.append / session.remove on a
real store, hits' origins, the scope filter, coverage, the change feed, the
index job leaving sessions alone, the embed queue embedding them, and the
`autodoc session` commands in a real process. Every answer is checked against
its method's result schema."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from autodoc.config import Settings
from autodoc.connect import invoke
from autodoc.errors import DocumentNotFound, InvalidParams
from autodoc.ingest.transcript import TranscriptError, parse_transcript
from autodoc.rpc.schemas import result_errors
from autodoc.service import Service

NO_MODEL = {"embedding": {"provider": "none"}}

EVENTS = [
    {
        "id": "e1",
        "kind": "message",
        "text": "Why does the zorblatt cache evict entries early?",
        "time": "2026-11-30T10:00:00Z",
    },
    {"id": "e2", "kind": "tool_call", "text": '{"tool": "grep", "args": ["quuxfrob"]}'},
    {"id": "e3", "kind": "tool_result", "text": "quuxfrob.py:12: EVICT_AFTER = 30"},
    {"id": "e4", "kind": "status", "text": "thinking about quuxfrob"},
    {"id": "e5", "kind": "error", "text": "quuxfrob timed out"},
    {
        "id": "e6",
        "kind": "response",
        "text": "The zorblatt cache evicts after thirty seconds because EVICT_AFTER was lowered in the hotfix.",
        "time": 1796000000,
    },
    {"id": "e7", "kind": "message", "text": "   "},
]


def call(svc: Service, method: str, params):
    """One method bound and checked as over a socket; its answer checked against its schema."""
    out = invoke(svc, method, params)
    assert result_errors(method, out) == [], (method, result_errors(method, out))
    return out


def hits(svc: Service, query: str, **opts):
    return call(svc, "search.query", ["kb", query, {"stages": ["lexical"], **opts}])["hits"]


@pytest.fixture()
def kb(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "cache.md").write_text(
        "---\ntitle: Zorblatt cache\n---\n# Zorblatt cache\n\nThe zorblatt cache keeps entries for a minute.\n"
    )
    (root / "notes" / "other.md").write_text("# Other\n\nSee [[Why does the zorblatt cache evict entries early?]].\n")
    return root


@pytest.fixture()
def svc(tmp_path: Path, kb: Path):
    s = Service(Settings.from_env(store=tmp_path / "store" / "a.db"))
    call(s, "workspace.add", {"name": "kb", "root": str(kb), "config": NO_MODEL})
    call(s, "workspace.index", ["kb"])
    yield s
    s.close()


def append(svc: Service, events, session_id: str = "s-1", **more):
    return call(svc, "session.append", {"workspace": "kb", "session_id": session_id, "events": events, **more})


def test_conversation_is_indexed_searched_and_cited_back(svc):
    out = append(svc, EVENTS)
    assert out["appended"] == 7 and out["indexed"] == 2 and out["new"] == 2 and out["op"] == "add"
    assert out["skipped"] == {"tool_call": 1, "tool_result": 1, "status": 1, "error": 1, "empty": 1}
    assert out["events"] == 2 and out["chunks"] == 2 and out["path"] == ".session/s-1"
    assert out["title"] == "Why does the zorblatt cache evict entries early?"  # the human's first line

    found = hits(svc, "hotfix")
    assert [h["path"] for h in found] == [".session/s-1"]
    h = found[0]
    assert h["origin"] == {
        "kind": "session",
        "session_id": "s-1",
        "event_id": "e6",
        "event_kind": "response",
        "time": "2026-11-30T00:53:20Z",
        "title": out["title"],
    }  # unix seconds shown as UTC
    assert h["breadcrumb"] == f"{out['title']} › Agent"
    # the hit's line span read back is the event's text, exactly
    back = call(svc, "document.read", ["kb", h["path"], {"line_start": h["line_start"], "line_end": h["line_end"]}])
    assert back["text"].rstrip("\n") == EVENTS[5]["text"]
    byte = call(svc, "document.read", ["kb", h["path"], {"byte_start": h["byte_start"], "byte_end": h["byte_end"]}])
    assert byte["text"] == EVENTS[5]["text"]

    file_hit = hits(svc, "keeps entries minute")[0]
    assert file_hit["origin"] == {"kind": "file", "path": "notes/cache.md", "title": "Zorblatt cache"}
    # what was skipped is not searchable
    assert hits(svc, "quuxfrob") == []


def test_a_long_event_is_cut_at_its_own_sections(svc):
    para = "The lease holder writes its pid and socket into the lease file. " * 30
    text = f"## Diagnosis\n\n{para}\n\n## Fix\n\nDelete the florbit lease file once the holder pid is gone."
    out = append(svc, [{"id": "r1", "kind": "response", "text": text}], title="Lease trouble")
    assert out["chunks"] >= 2 and out["title"] == "Lease trouble"
    h = hits(svc, "florbit")[0]
    assert h["breadcrumb"] == "Lease trouble › Agent › Fix" and h["origin"]["event_id"] == "r1"
    back = call(svc, "document.read", ["kb", h["path"], {"line_start": h["line_start"], "line_end": h["line_end"]}])
    assert back["text"].rstrip("\n") == "## Fix\n\nDelete the florbit lease file once the holder pid is gone."


def test_a_new_section_budget_recuts_sessions_too(svc):
    long = "\n\n".join(f"Paragraph {i} says the lease outlived its writer and the store waited." for i in range(40))
    before = append(svc, [{"id": "r", "kind": "response", "text": long}])["chunks"]
    call(svc, "workspace.section_size", ["kb", 64])
    after = call(svc, "workspace.status", ["kb"])["sessions"]["chunks"]
    assert after > before
    h = hits(svc, "Paragraph 39", scope="sessions")[0]
    back = call(svc, "document.read", ["kb", h["path"], {"byte_start": h["byte_start"], "byte_end": h["byte_end"]}])
    assert "Paragraph 39" in back["text"] and back["text"] in long


def test_appending_is_idempotent_per_event_id(svc):
    first = append(svc, EVENTS)
    ids = sorted(h["chunk_id"] for h in hits(svc, "zorblatt", scope="sessions"))
    again = append(svc, EVENTS)
    assert again["op"] is None and again["change_cursor"] is None and again["unchanged"] == 2 and again["new"] == 0
    assert again["generation"] == first["generation"]
    assert sorted(h["chunk_id"] for h in hits(svc, "zorblatt", scope="sessions")) == ids  # rows (and vectors) kept

    # a new event goes after the others; an event sent again with new text replaces it in its place
    more = append(
        svc,
        [
            {"id": "e8", "kind": "message", "text": "And the gronk queue?"},
            {"id": "e1", "kind": "message", "text": "Why does the zorblatt cache drop entries early?"},
        ],
    )
    assert (more["new"], more["replaced"], more["op"], more["events"]) == (1, 1, "modify", 3)
    h = hits(svc, "drop", scope="sessions")[0]
    assert h["origin"]["event_id"] == "e1" and h["line_start"] < hits(svc, "gronk")[0]["line_start"]
    whole = call(svc, "document.read", ["kb", ".session/s-1"])["text"]
    assert whole.count(EVENTS[0]["text"]) == 1 and whole.startswith("# " + EVENTS[0]["text"])  # only the title
    assert more["title"] == first["title"]  # a session keeps its title

    # an event replaced by one that is not conversation leaves the index
    gone = append(svc, [{"id": "e8", "kind": "tool_call", "text": "gronk()"}])
    assert gone["removed"] == 1 and gone["events"] == 2 and gone["skipped"] == {"tool_call": 1}
    assert hits(svc, "gronk") == []


def test_appending_one_event_at_a_time_gives_the_chunks_of_appending_all_at_once(svc):
    long = "## Cause\n\n" + "The lease outlived its writer. " * 80 + "\n\n## Fix\n\nDelete it."
    events = [e for e in EVENTS if e["kind"] in ("message", "response")] + [
        {"id": "l1", "kind": "response", "text": long},
        {"id": "l2", "kind": "message", "text": "ok, thanks"},
    ]
    append(svc, events, session_id="whole", title="T")
    for e in events:
        append(svc, [e], session_id="steps", title="T")

    def chunks(sid):
        doc = call(svc, "document.read", ["kb", f".session/{sid}"])["text"]
        with svc.store.read() as db:  # every chunk, not a search's top few per document
            rows = db.execute(
                "SELECT c.ordinal, c.breadcrumb, c.text, c.byte_start, c.byte_end, c.line_start, "
                "c.line_end, c.text_hash, c.tokens FROM chunks c "
                "JOIN documents d ON d.id = c.document_id WHERE d.path = ? ORDER BY c.ordinal",
                (f".session/{sid}",),
            ).fetchall()
        return doc, rows

    whole, steps = chunks("whole"), chunks("steps")
    assert whole == steps and len(whole[1]) >= 5


def test_remove_takes_the_session_out(svc):
    append(svc, EVENTS)
    out = call(svc, "session.remove", ["kb", "s-1"])
    assert out["removed"] is True and out["events"] == 2 and out["chunks"] == 2
    assert hits(svc, "zorblatt", scope="sessions") == []
    st = call(svc, "workspace.status", ["kb"])
    assert st["sessions"] == {"sessions": 0, "events": 0, "chunks": 0}
    with pytest.raises(DocumentNotFound):
        invoke(svc, "session.remove", ["kb", "s-1"])


def test_list_pages_the_sessions_in_id_order(svc):
    assert call(svc, "session.list", ["kb"]) == {"workspace": "kb", "sessions": [], "next_cursor": None}
    for sid in ("b-2", "a-1", "c-3", "a-10"):
        append(svc, EVENTS, session_id=sid)
    append(svc, [{"id": "x", "kind": "message", "text": "no time given"}], session_id="d-4", title="Untimed")
    first = call(svc, "session.list", {"workspace": "kb", "limit": 2})
    assert [x["session_id"] for x in first["sessions"]] == ["a-1", "a-10"] and first["next_cursor"] == "a-10"
    s = first["sessions"][0]
    assert (s["path"], s["events"], s["chunks"]) == (".session/a-1", 2, 2)
    # the response's unix seconds (stored as ISO) come before the message's ISO time
    assert (s["first_time"], s["last_time"]) == ("2026-11-30T00:53:20Z", "2026-11-30T10:00:00Z")
    rest = call(svc, "session.list", ["kb", first["next_cursor"], 2])
    assert [x["session_id"] for x in rest["sessions"]] == ["b-2", "c-3"]
    last = call(svc, "session.list", ["kb", rest["next_cursor"], 2])
    assert [(x["session_id"], x["title"], x["first_time"]) for x in last["sessions"]] == [("d-4", "Untimed", None)]
    assert last["next_cursor"] is None
    call(svc, "session.remove", ["kb", "b-2"])
    assert [x["session_id"] for x in call(svc, "session.list", ["kb"])["sessions"]] == ["a-1", "a-10", "c-3", "d-4"]
    with pytest.raises(InvalidParams) as e:
        invoke(svc, "session.list", ["kb", None, 0])
    assert e.value.data["field"] == "limit"


def test_scope_picks_files_sessions_or_both(svc):
    append(svc, EVENTS)
    both = {h["origin"]["kind"] for h in hits(svc, "zorblatt")}
    assert both == {"file", "session"}
    assert {h["origin"]["kind"] for h in hits(svc, "zorblatt", scope="all")} == both
    assert {h["origin"]["kind"] for h in hits(svc, "zorblatt", scope="files")} == {"file"}
    assert {h["origin"]["kind"] for h in hits(svc, "zorblatt", scope="sessions")} == {"session"}
    with pytest.raises(InvalidParams) as e:
        invoke(svc, "search.query", ["kb", "zorblatt", {"scope": "chats"}])
    assert e.value.data["field"] == "opts.scope"


def test_reindex_and_the_live_index_keep_sessions(svc, kb):
    append(svc, EVENTS)
    # a real file at the reserved path is hidden: never indexed, never mistaken for the session
    (kb / ".session").mkdir()
    (kb / ".session" / "s-1").write_text("# Impostor\n\nwidgetfoo\n")
    for method in ("workspace.index", "workspace.reindex"):
        rep = call(svc, method, ["kb"])
        assert rep["deleted"] == 0
    (kb / ".session" / "s-1").unlink()
    svc.index_paths("kb", [".session/s-1", ".session/s-1.md"])  # what a watcher could report
    assert [h["origin"]["event_id"] for h in hits(svc, "hotfix")] == ["e6"]
    assert hits(svc, "widgetfoo") == []
    # a note's [[link]] never resolves to a session, though the session's title matches it
    links = call(svc, "document.links", ["kb", "notes/other.md"])["links"]
    assert links[0]["target_path"] is None


def test_coverage_and_the_change_feed_count_sessions(svc):
    cursor = call(svc, "workspace.status", ["kb"])["change_cursor"]
    a = append(svc, EVENTS)
    append(svc, [{"id": "x", "kind": "message", "text": "another zorblatt chat"}], session_id="s-2")
    st = call(svc, "workspace.status", ["kb"])
    assert st["sessions"] == {"sessions": 2, "events": 3, "chunks": 3}
    assert st["files"]["indexed"] == 2 and st["chunks"] == 2 + 3
    assert call(svc, "workspace.list", {})["workspaces"][0]["documents"] == 2
    append(svc, [{"id": "e9", "kind": "response", "text": "one more"}])
    call(svc, "session.remove", ["kb", "s-2"])
    changes = call(svc, "changes.since", ["kb", cursor])["changes"]
    assert [(c["path"], c["op"], c.get("session_id")) for c in changes] == [
        (".session/s-1", "add", "s-1"),
        (".session/s-2", "add", "s-2"),
        (".session/s-1", "modify", "s-1"),
        (".session/s-2", "delete", "s-2"),
    ]
    assert changes[0]["cursor"] == a["change_cursor"]


def test_the_workspace_schema_does_not_judge_sessions(tmp_path, kb):
    (kb / "_schema").mkdir()
    (kb / "_schema" / "frontmatter.yaml").write_text("common:\n  owner: {type: string, required: true}\n")
    s = Service(Settings.from_env(store=tmp_path / "s.db"))
    try:
        call(s, "workspace.add", {"name": "kb", "root": str(kb), "config": NO_MODEL})
        call(s, "workspace.index", ["kb"])
        append(s, EVENTS)
        (kb / "_schema" / "frontmatter.yaml").write_text("common:\n  team: {type: string, required: true}\n")
        call(s, "workspace.index", ["kb"])  # the schema changed: every file is judged again, not the session
        problems = call(s, "document.problems", ["kb"])["problems"]
        assert problems and not any(p["path"].startswith(".session/") for p in problems)
    finally:
        s.close()


def test_bad_events_are_refused_naming_the_field(svc):
    with pytest.raises(InvalidParams) as e:
        invoke(svc, "session.append", {"workspace": "kb", "session_id": "s", "events": [{"id": "1", "kind": "chat"}]})
    assert e.value.data["field"] == "events[0].kind" and "message (the human)" in e.value.message
    with pytest.raises(InvalidParams) as e:
        invoke(svc, "session.append", {"workspace": "kb", "session_id": "../x", "events": []})
    assert e.value.data["field"] == "session_id"
    nothing = append(svc, [{"id": "t", "kind": "tool_call"}], session_id="empty")
    assert nothing["op"] is None and nothing["events"] == 0 and nothing["title"] is None


def test_sessions_are_embedded_and_found_by_meaning(tmp_path, kb):
    s = Service(Settings.from_env(store=tmp_path / "s.db"))  # the bundled ONNX model
    try:
        call(s, "workspace.add", {"name": "kb", "root": str(kb)})
        call(s, "workspace.index", ["kb"])
        s.embed_pending("kb")
        append(s, EVENTS)
        assert s.embedding_status_by_name("kb")["pending"] == 2  # the session's chunks wait like any other
        s.embed_pending("kb")
        assert s.embedding_status_by_name("kb")["pending"] == 0
        found = call(
            s,
            "search.query",
            ["kb", "items removed from memory too soon", {"stages": ["semantic"], "scope": "sessions"}],
        )["hits"]
        assert found and {h["origin"]["kind"] for h in found} == {"session"}
        assert found[0]["origin"]["event_id"] in ("e1", "e6")
        files = call(
            s, "search.query", ["kb", "items removed from memory too soon", {"stages": ["semantic"], "scope": "files"}]
        )["hits"]
        assert files and {h["origin"]["kind"] for h in files} == {"file"}
    finally:
        s.close()


# -- transcripts and the command line ----------------------------------------------------------

CLAUDE = [
    {"type": "summary", "summary": "Zorblatt eviction", "leafUuid": "x"},
    {
        "type": "user",
        "uuid": "u1",
        "timestamp": "2026-11-30T10:00:00Z",
        "sessionId": "0b5c-77",
        "message": {"role": "user", "content": "Why does the zorblatt cache evict early?"},
    },
    {
        "type": "assistant",
        "uuid": "a1",
        "timestamp": "2026-11-30T10:00:05Z",
        "sessionId": "0b5c-77",
        "message": {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "grep first"},
                {"type": "text", "text": "EVICT_AFTER was lowered to thirty."},
            ],
        },
    },
    {
        "type": "assistant",
        "uuid": "a2",
        "sessionId": "0b5c-77",
        "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}]},
    },
    {
        "type": "user",
        "uuid": "u2",
        "sessionId": "0b5c-77",
        "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}]},
    },
    {"type": "user", "uuid": "u3", "isMeta": True, "message": {"role": "user", "content": "<command-name>/clear"}},
]


def test_transcript_shapes():
    t = parse_transcript(json.dumps(x) for x in CLAUDE)
    assert t.session_id == "0b5c-77" and t.title == "Zorblatt eviction"
    assert [(e["id"], e["kind"]) for e in t.events] == [
        ("line-1", "other"),
        ("u1", "message"),
        ("a1", "response"),
        ("a2", "tool_call"),
        ("u2", "tool_result"),
        ("u3", "status"),
    ]
    assert t.events[2]["text"] == "EVICT_AFTER was lowered to thirty."
    chat = parse_transcript(
        [
            json.dumps({"role": "user", "content": [{"type": "text", "text": "hi"}]}),
            "",
            json.dumps({"role": "assistant", "content": "hello"}),
            json.dumps({"id": "z", "kind": "error", "text": "boom"}),
        ]
    )
    assert [(e["id"], e["kind"], e["text"]) for e in chat.events] == [
        ("line-1", "message", "hi"),
        ("line-3", "response", "hello"),
        ("z", "error", "boom"),
    ]
    with pytest.raises(TranscriptError, match="line 2 is not JSON"):
        parse_transcript(["{}", "nope"])


def test_session_import_and_remove_from_the_command_line(tmp_path, kb):
    env = dict(os.environ, AUTODOC_STORE=str(tmp_path / "store" / "a.db"), AUTODOC_SOCKET=str(tmp_path / "no.sock"))

    def run(*args, check=True):
        p = subprocess.run(
            [sys.executable, "-m", "autodoc.cli", *args], env=env, capture_output=True, text=True, timeout=120
        )
        assert not check or p.returncode == 0, (args, p.stdout, p.stderr)
        return p

    setup = Service(Settings.from_env(store=tmp_path / "store" / "a.db"))  # the same store the commands open
    setup.workspace_add("kb", str(kb), NO_MODEL)
    setup.close()
    transcript = tmp_path / "chat.jsonl"
    transcript.write_text("".join(json.dumps(x) + "\n" for x in CLAUDE))
    out = run("session", "import", "kb", str(transcript)).stdout
    assert "session 0b5c-77" in out and "2 indexed" in out and "4 skipped" in out
    answer = json.loads(run("search", "-w", "kb", "--json", "EVICT_AFTER thirty").stdout)
    h = answer["hits"][0]
    assert h["origin"]["session_id"] == "0b5c-77" and h["origin"]["event_id"] == "a1"
    assert h["origin"]["title"] == "Zorblatt eviction"
    text = run("read", "kb", h["path"], "--lines", f"{h['line_start']}-{h['line_end']}").stdout
    assert text.strip() == "EVICT_AFTER was lowered to thirty."
    named = run("session", "import", "kb", str(transcript), "--session-id", "mine").stdout
    assert "session mine" in named
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"role": "user", "content": "hi"}\n[1, 2]\n')
    # a line that is no JSON event is skipped and named, the rest imported (issue 38)
    skipped = run("session", "import", "kb", str(bad), check=False)
    assert skipped.returncode == 0 and "1 line skipped (not a JSON event: line 2)" in skipped.stdout
    listed = run("session", "list", "kb").stdout.splitlines()
    assert [line.split("\t")[0] for line in listed] == ["0b5c-77", "bad", "mine"] and "Zorblatt eviction" in listed[0]
    assert "removed session 0b5c-77" in run("session", "remove", "kb", "0b5c-77").stdout


# -- the daemon ---------------------------------------------------------------------------------


async def test_the_daemon_pushes_session_changes_embeds_them_and_its_watcher_keeps_them(short_tmp, kb, daemon_factory):
    """A real `autodoc serve --socket` checking its own answers against the schemas: a session
    append is pushed to subscribers, embedded by the daemon's queue (the packaged MiniLM) and
    found by meaning; a hidden `.session/` folder appearing under the watched root changes nothing."""
    import anyio

    from autodoc_client import Client

    sock = short_tmp / "d.sock"
    d = daemon_factory(short_tmp, store=short_tmp / "a.db", sock=sock, env={"AUTODOC_CHECK_RESULTS": "1"}, timeout=30)
    try:
        async with await Client.connect_socket(sock) as c:
            await c.call("workspace.add", ["kb", str(kb)])
            await c.call("workspace.index", ["kb"])
            with anyio.fail_after(90):
                while (await c.call("workspace.status", ["kb"]))["embedding"]["state"] != "ready":
                    await anyio.sleep(0.1)
            await c.call("changes.subscribe", ["kb"])
            out = await c.call("session.append", {"workspace": "kb", "session_id": "live", "events": EVENTS})
            assert result_errors("session.append", out) == [] and out["op"] == "add"
            note = await c.next_notification("changes.changed", timeout=30)
            assert [(ch["path"], ch["op"], ch["session_id"]) for ch in note.params["changes"]] == [
                (".session/live", "add", "live")
            ]
            with anyio.fail_after(90):
                while (await c.call("workspace.status", ["kb"]))["embedding"]["pending"]:
                    await anyio.sleep(0.1)
            answer = await c.call(
                "search.query",
                ["kb", "items removed from memory too soon", {"stages": ["semantic"], "scope": "sessions"}],
            )
            assert answer["hits"] and answer["hits"][0]["origin"]["session_id"] == "live"

            (kb / ".session").mkdir()
            (kb / ".session" / "live").write_text("# Impostor\n")
            (kb / ".session" / "live").unlink()
            (kb / "notes" / "after.md").write_text("# After\n\nwritten after the hidden folder\n")
            note = await c.next_notification("changes.changed", timeout=30)
            assert [ch["path"] for ch in note.params["changes"]] == ["notes/after.md"]
            status = await c.call("workspace.status", ["kb"])
            assert status["sessions"] == {"sessions": 1, "events": 2, "chunks": 2}
            removed = await c.call("session.remove", ["kb", "live"])
            assert result_errors("session.remove", removed) == []
            note = await c.next_notification("changes.changed", timeout=30)
            assert [(ch["path"], ch["op"]) for ch in note.params["changes"]] == [(".session/live", "delete")]
            await c.call("server.shutdown")
        assert d.wait(timeout=30) == 0
    finally:
        d.close()


SEED_EVENTS = [  # seed 000's own event log vocabulary, in `type` (its field) and in `kind`
    {"id": "s1", "type": "chat.message", "text": "How is the glimmerfax rotated?"},
    {"id": "s2", "type": "tool.call", "text": '{"tool": "grep"}'},
    {"id": "s3", "kind": "tool.result", "text": "glimmerfax.py:3"},
    {"id": "s4", "type": "agent.status", "text": "reading"},
    {"id": "s5", "kind": "agent.error", "text": "timeout"},
    {"id": "s6", "type": "agent.response", "text": "The glimmerfax is rotated nightly by the cron job."},
]


def test_seed_000_event_vocabulary_is_accepted_in_type_or_kind(svc):
    out = append(svc, SEED_EVENTS, session_id="seed")
    assert out["indexed"] == 2 and out["new"] == 2
    assert out["skipped"] == {"tool_call": 1, "tool_result": 1, "status": 1, "error": 1}
    found = hits(svc, "glimmerfax nightly")
    assert found[0]["origin"]["event_id"] == "s6" and found[0]["origin"]["event_kind"] == "response"
    # the same event sent again under its documented kind is the same event
    again = append(svc, [{"id": "s6", "kind": "response", "text": SEED_EVENTS[-1]["text"]}], session_id="seed")
    assert again["unchanged"] == 1 and again["op"] is None


def test_an_event_without_kind_or_type_or_with_two_that_disagree_is_refused(svc):
    with pytest.raises(InvalidParams) as e:
        invoke(svc, "session.append", {"workspace": "kb", "session_id": "s", "events": [{"id": "1", "text": "x"}]})
    assert e.value.data["field"].startswith("events[0]") and "kind" in e.value.message
    with pytest.raises(InvalidParams) as e:
        invoke(
            svc,
            "session.append",
            {"workspace": "kb", "session_id": "s", "events": [{"id": "1", "kind": "message", "type": "tool.call"}]},
        )
    assert e.value.data["field"] == "events[0].type"


def test_a_transcript_in_seed_000_vocabulary_imports_its_kinds():
    t = parse_transcript(
        json.dumps(x)
        for x in [
            {"id": "a", "type": "chat.message", "text": "hi"},
            {"id": "b", "type": "agent.response", "text": "hello"},
            {"id": "c", "kind": "tool.call", "text": "{}"},
        ]
    )
    assert [(e["id"], e["kind"], e["text"]) for e in t.events] == [
        ("a", "message", "hi"),
        ("b", "response", "hello"),
        ("c", "tool_call", "{}"),
    ]
