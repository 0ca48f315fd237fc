"""Ingest, a transcript file: JSONL lines in the common shapes → session.append events.

Input: the lines of a JSONL transcript. Output: events `{id, kind, text, time}`
(session.append's params), the session id and title the file names, if any.

Accepted lines (one event each):
- AutoDoc's own: `{"id", "kind", "text", "time"}`, the kind also seed 000's (`chat.message`,
  `agent.response`, `tool.call`, ...), in `kind` or `type`;
- chat-style: `{"role": "user"|"assistant"|"system"|"tool", "content": str | [parts]}`;
- Claude-Code-style: `{"type": "user"|"assistant"|…, "uuid", "timestamp", "sessionId",
  "message": {"role", "content"}}`; a `{"type": "summary", "summary"}` line titles the session.
Content parts of type `text` are the words; `tool_use` and `tool_result` parts
make a line a tool call or result when it has no text; `thinking` and other
parts are dropped. An event without an id is named by its line number, so
importing the same file again replaces rather than duplicates.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .session import KIND_ALIASES

ROLE_KINDS = {
    "user": "message",
    "human": "message",
    "assistant": "response",
    "agent": "response",
    "system": "status",
    "tool": "tool_result",
    "function": "tool_result",
}
KINDS = ("message", "response", "tool_call", "tool_result", "status", "error", "other")
MAX_TEXT = 1_048_576  # session.append's limit on one event's text (characters)
MAX_ID = 256


class TranscriptError(ValueError):
    """A line that is not a transcript event; the message names the line."""


@dataclass
class Transcript:
    events: list[dict[str, Any]] = field(default_factory=list)
    session_id: str | None = None
    title: str | None = None
    cut: list[str] = field(default_factory=list)  # ids of events whose text was longer than MAX_TEXT


def _content_text(content: Any) -> tuple[str, str | None]:
    """(the text, the kind the parts imply when there is no text: tool_call | tool_result | None)."""
    if isinstance(content, str):
        return content, None
    if not isinstance(content, list):
        return "", None
    texts: list[str] = []
    implied = None
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            t = part.get("type")
            if t == "text" and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif t in ("tool_use", "function_call", "tool_call"):
                implied = implied or "tool_call"
            elif t in ("tool_result", "function_result"):
                implied = implied or "tool_result"
    return "\n\n".join(t for t in texts if t.strip()), implied


def _own_kind(obj: dict[str, Any]) -> str | None:
    """The kind of a line in AutoDoc's own shape (`kind`, or seed 000's `type` such as chat.message), else None."""
    for key in ("kind", "type"):
        value = obj.get(key)
        if (
            isinstance(value, str)
            and KIND_ALIASES.get(value, value) in KINDS
            and (key == "kind" or value in KIND_ALIASES)
        ):
            return KIND_ALIASES.get(value, value)
    return None


def _event(obj: dict[str, Any], lineno: int) -> dict[str, Any]:
    if (own := _own_kind(obj)) is not None:  # AutoDoc's own shape, or seed 000's
        kind, text = own, obj.get("text") if isinstance(obj.get("text"), str) else ""
    else:
        message = obj.get("message")
        msg: dict[str, Any] = message if isinstance(message, dict) else obj
        role = msg.get("role") if isinstance(msg.get("role"), str) else obj.get("type")
        kind = ROLE_KINDS.get(role, "other") if isinstance(role, str) else "other"
        text, implied = _content_text(msg.get("content", msg.get("text")))
        if obj.get("isMeta") is True:
            kind = "status"  # Claude Code's caveats and command echoes: not the human's words
        elif kind in ("message", "response") and not text.strip() and implied:
            kind = implied
        if obj.get("type") == "summary":
            kind = "other"
    raw_id = obj.get("uuid", obj.get("id"))
    eid = str(raw_id) if isinstance(raw_id, (str, int)) and str(raw_id) else f"line-{lineno}"
    time = obj.get("timestamp", obj.get("time", obj.get("created_at")))
    return {
        "id": eid[:MAX_ID],
        "kind": kind,
        "text": text,
        "time": time if isinstance(time, (str, int, float)) and not isinstance(time, bool) else None,
    }


def parse_transcript(lines: Iterable[str]) -> Transcript:
    """Every non-blank line as one event (module docstring); TranscriptError names a line that is not one."""
    out = Transcript()
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise TranscriptError(f"line {lineno} is not JSON ({e.msg} at column {e.colno})") from None
        if not isinstance(obj, dict):
            raise TranscriptError(f"line {lineno} is a JSON {type(obj).__name__}, not an event object")
        if out.session_id is None and isinstance(obj.get("sessionId", obj.get("session_id")), str):
            out.session_id = obj.get("sessionId", obj.get("session_id"))
        if obj.get("type") == "summary" and isinstance(obj.get("summary"), str) and out.title is None:
            out.title = obj["summary"]
        ev = _event(obj, lineno)
        if len(ev["text"]) > MAX_TEXT:
            ev["text"] = ev["text"][:MAX_TEXT]
            out.cut.append(ev["id"])
        out.events.append(ev)
    return out
