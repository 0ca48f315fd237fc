"""What each MCP tool answers: its `outputSchema`, the shape of the structured content it returns.

A client may check every answer against it (the official SDK client does, so the e2e tests check
each real answer). A schema names the fields an agent relies on and their types, and leaves room
for fields added later (no `additionalProperties: false`): an agent reads what it knows. An error
answer (`isError`) is `{error, did_you_mean?, …}` and is not described here: clients check only
answers that are not errors.

Runs on: the event loop (constants).
"""

from __future__ import annotations

from typing import Any

_STR = {"type": "string"}
_INT = {"type": "integer"}
_NUM = {"type": "number"}
_BOOL = {"type": "boolean"}
_STRS = {"type": "array", "items": _STR}
_NOTES = {"type": "array", "items": _STR, "description": "what was read differently from what was sent, and why"}
_OPT_STR = {"type": ["string", "null"]}
_OBJ = {"type": "object"}


def _obj(props: dict[str, Any], required: list[str], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, "required": required, **more}


_REF = {"type": "string", "description": "workspace:path, with #Lstart-end when it names lines"}

_HIT = _obj(
    {
        "ref": _REF,
        "workspace": _STR,
        "title": _STR,
        "text": _STR,
        "confidence": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
        "origin": _OBJ,
    },
    ["ref"],
)

_READ_ONE = {
    "ref": _REF,
    "workspace": _STR,
    "path": _STR,
    "line_start": _INT,
    "line_end": _INT,
    "total_lines": _INT,
    "text": _STR,
    "section": _STR,
    "next_lines": {**_STR, "description": "the lines to ask for next when the answer was cut"},
    "notes": _NOTES,
}

_HEADING: dict[str, Any] = _obj(
    {
        "level": _INT,
        "title": _STR,
        "line_start": _INT,
        "line_end": _INT,
        "tokens": _INT,
        "children": {"type": "array", "items": {"$ref": "#/$defs/heading"}},
    },
    ["level", "title", "line_start", "line_end", "children"],
)

OUTPUTS: dict[str, dict[str, Any]] = {
    "search": _obj(
        {
            "query": _STR,
            "workspaces": _STRS,
            "answerable": {**_BOOL, "description": "false when nothing relevant was found"},
            "truncated": _BOOL,
            "tokens": _INT,
            "hits": {"type": "array", "items": _HIT},
            "held_back": {**_INT, "description": "passages the relevance floor held back (min_confidence)"},
            "stages": {"type": "object", "additionalProperties": _OBJ, "description": "per workspace"},
            "notes": _NOTES,
        },
        ["query", "workspaces", "answerable", "hits"],
    ),
    "read": {
        "type": "object",
        "description": "one document (`ref`), or with `refs` every one asked for in `documents`",
        "properties": {
            **_READ_ONE,
            "documents": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {**_READ_ONE, "error": _STR, "did_you_mean": _STRS},
                    "required": ["ref"],
                },
            },
        },
        "anyOf": [
            {"required": ["ref", "workspace", "path", "line_start", "line_end", "total_lines", "text"]},
            {"required": ["documents"]},
        ],
    },
    "outline": _obj(
        {
            "ref": _REF,
            "workspace": _STR,
            "path": _STR,
            "total_lines": _INT,
            "outline": {"type": "array", "items": {"$ref": "#/$defs/heading"}},
            "notes": _NOTES,
        },
        ["ref", "workspace", "path", "total_lines", "outline"],
        **{"$defs": {"heading": _HEADING}},
    ),
    "links": _obj(
        {
            "ref": _REF,
            "workspace": _STR,
            "path": _STR,
            "out": {
                "type": "array",
                "items": _obj(
                    {
                        "target": _STR,
                        "kind": _STR,
                        "line": _INT,
                        "resolved": _BOOL,
                        "ref": _REF,
                        "title": _OPT_STR,
                        "broken": _BOOL,
                    },
                    ["target", "kind", "line", "resolved"],
                ),
            },
            "in": {
                "type": "array",
                "items": _obj({"ref": _REF, "title": _OPT_STR, "kind": _STR, "line": _INT}, ["ref", "kind", "line"]),
            },
            "notes": _NOTES,
        },
        ["ref", "workspace", "path"],
    ),
    "similar": _obj(
        {
            "ref": _REF,
            "similar": {
                "type": "array",
                "items": _obj(
                    {"ref": _REF, "path": _STR, "title": _STR, "section": _OPT_STR, "score": _NUM},
                    ["ref", "path", "score"],
                ),
            },
            "notes": _NOTES,
        },
        ["ref", "similar"],
    ),
    "list": _obj(
        {
            "workspace": _STR,
            "documents": {
                "type": "array",
                "items": _obj({"ref": _REF, "title": _STR, "tags": _STRS, "lines": _INT}, ["ref", "title"]),
            },
            "next_cursor": {**_OPT_STR, "description": "pass as `cursor` for the next page; null at the end"},
            "tag_counts": {"type": "object", "additionalProperties": _INT},
            "facet_counts": _OBJ,
            "notes": _NOTES,
        },
        ["workspace", "documents", "next_cursor"],
    ),
    "changes": _obj(
        {
            "changes": {
                "type": "array",
                "items": _obj(
                    {
                        "cursor": _INT,
                        "workspace": _STR,
                        "path": _STR,
                        "op": _STR,
                        "old_path": _STR,
                        "time": {**_NUM, "description": "unix seconds"},
                    },
                    ["cursor", "workspace", "path", "op"],
                ),
            },
            "next_cursor": _INT,
            "has_more": _BOOL,
            "notes": _NOTES,
        },
        ["changes", "next_cursor", "has_more"],
    ),
    "status": _obj(
        {
            "server": _obj(
                {
                    "mode": {**_STR, "description": "daemon, in-process, or in-process (read-only: …)"},
                    "version": _STR,
                    "store": _STR,
                    "store_from": {"enum": ["--store", "AUTODOC_STORE", "default"]},
                    "daemon_not_started": _STR,
                    "writable": _BOOL,
                    "models": _OBJ,
                    "semantic": _OBJ,
                },
                ["mode", "version", "store", "store_from", "writable"],
            ),
            "workspaces": {
                "type": "array",
                "items": _obj(
                    {
                        "workspace": _STR,
                        "description": {**_STR, "description": "what it holds (workspace.configure's)"},
                        "root": _STR,
                        "root_exists": _BOOL,
                        "files": _OBJ,
                        "chunks": _INT,
                        "semantic": _OBJ,
                        "ranker": _OBJ,
                        "problems": _INT,
                        "broken_links": _INT,
                        "change_cursor": _INT,
                    },
                    ["workspace", "description", "root", "files", "chunks", "semantic"],
                ),
            },
            "notes": _NOTES,
        },
        ["server", "workspaces"],
    ),
    "reindex": _obj(
        {
            "workspace": _STR,
            "files": {
                "type": "array",
                "items": _obj(
                    {"path": _STR, "indexed": _BOOL, "ref": _REF, "lines": _INT, "reason": _STR}, ["path", "indexed"]
                ),
            },
            "index": _OBJ,
            "semantic": _STR,
            "notes": _NOTES,
        },
        ["workspace", "files"],
    ),
    "save_session": _obj(
        {
            "workspace": _STR,
            "session_id": _STR,
            "ref": _REF,
            "saved": {**_INT, "description": "turns indexed"},
            "skipped": {"type": "object", "additionalProperties": _INT, "description": "turns not indexed, by kind"},
            "session_turns": _INT,
            "next": _STR,
            "notes": _NOTES,
        },
        ["workspace", "session_id", "ref", "saved", "session_turns"],
    ),
    "sessions": _obj(
        {
            "workspace": _STR,
            "sessions": {
                "type": "array",
                "items": _obj(
                    {"ref": _REF, "session_id": _STR, "title": _STR, "turns": _INT, "last_time": _OPT_STR},
                    ["ref", "session_id"],
                ),
            },
            "next_cursor": _OPT_STR,
            "notes": _NOTES,
        },
        ["workspace", "sessions", "next_cursor"],
    ),
}
