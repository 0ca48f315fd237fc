"""The `save_session` and `sessions` tools: an agent keeps its own
conversation in the knowledge base (session.append), so a later session can
search and cite it, and sees which conversations are kept (session.list).

A model sends turns as chat messages (`role` user/assistant, `content` a
string or text parts); they become session events. A turn without an `id` is
named by its position, so sending the whole conversation again replaces the
turns already saved instead of repeating them.

Runs on: the event loop.
"""

from __future__ import annotations

import json
from typing import Any

from .args import Args
from .backend import Backend, ToolError

KINDS = {
    "user": "message",
    "human": "message",
    "message": "message",
    "assistant": "response",
    "agent": "response",
    "ai": "response",
    "model": "response",
    "response": "response",
    "tool": "tool_result",
    "tool_result": "tool_result",
    "tool_call": "tool_call",
    "function": "tool_call",
    "system": "status",
    "status": "status",
    "error": "error",
}
EXAMPLE = '[{"role": "user", "text": "why did we pick SQLite?"}, {"role": "assistant", "text": "Because …"}]'


def _text(turn: dict[str, Any]) -> str:
    content = turn.get("text", turn.get("content", ""))
    if isinstance(content, list):  # chat-style parts: keep the text ones
        content = "\n\n".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type", "text") == "text"
        )
    if not isinstance(content, str):
        raise ToolError(f"a turn's text must be a string, not {type(content).__name__}; e.g. {EXAMPLE}")
    return content


def events_of(turns: Any) -> list[dict[str, Any]]:
    """Chat turns → session.append events (pure)."""
    if not isinstance(turns, list) or not turns:
        raise ToolError(f"turns must be a non-empty list of the conversation's turns, e.g. {EXAMPLE}")
    events = []
    for i, turn in enumerate(turns, 1):
        if not isinstance(turn, dict):
            raise ToolError(f"turn {i} must be an object with role and text, e.g. {EXAMPLE}")
        role = str(turn.get("role", turn.get("kind", ""))).lower()
        if role not in KINDS:
            raise ToolError(
                f"turn {i}: role must be user or assistant (tool, system and error turns are "
                f"accepted and not indexed), not {role!r}"
            )
        event: dict[str, Any] = {"id": str(turn.get("id") or f"turn-{i}"), "kind": KINDS[role], "text": _text(turn)}
        if isinstance(turn.get("time"), (str, int, float)) and not isinstance(turn.get("time"), bool):
            event["time"] = turn["time"]
        events.append(event)
    return events


async def save_session(b: Backend, a: Args) -> tuple[dict[str, Any], str]:
    sid = a.str("session_id", required=True, example="2026-12-01-lease-debugging")
    assert sid is not None
    events = events_of(a.values.get("turns"))
    [ws] = await b.workspace(a.str("workspace"))
    params: dict[str, Any] = {"workspace": ws, "session_id": sid, "events": events}
    if (title := a.str("title")) is not None:
        params["title"] = title
    got = await b.call("session.append", params)
    out: dict[str, Any] = {
        "workspace": ws,
        "session_id": sid,
        "ref": f"{ws}:{got['path']}",
        "saved": got["indexed"],
        "skipped": got["skipped"],
        "session_turns": got["events"],
        "next": 'search it with scope "sessions"; send the whole conversation again to update it',
    }
    if a.notes:
        out["notes"] = a.notes
    return out, json.dumps(out, ensure_ascii=False, separators=(",", ":"))


async def list_sessions(b: Backend, a: Args) -> tuple[dict[str, Any], str]:
    [ws] = await b.workspace(a.str("workspace"))
    limit = a.int("limit", 20, 1, 200)
    got = await b.call("session.list", {"workspace": ws, "after": a.str("cursor"), "limit": limit})
    out: dict[str, Any] = {
        "workspace": ws,
        "sessions": [
            {
                "ref": f"{ws}:{x['path']}",
                "session_id": x["session_id"],
                "title": x["title"],
                "turns": x["events"],
                "last_time": x["last_time"],
            }
            for x in got["sessions"]
        ],
        "next_cursor": got["next_cursor"],
    }
    if not got["sessions"] and not a.str("cursor"):
        # a team's reader role may not save one: say so rather than suggest what will be refused
        writable = (await b.call("server.info", [])).get("writable", True)
        a.notes.append(
            "no saved conversations yet: `save_session` keeps one"
            if writable
            else "no saved conversations: this store is read-only for this connection (a team database's "
            "reader role), so `save_session` is refused here"
        )
    if a.notes:
        out["notes"] = a.notes
    return out, json.dumps(out, ensure_ascii=False, separators=(",", ":"))
