"""The tool list: names, descriptions and input schemas, written for a model (and each
tool's output schema, outputs.py).

tests/golden/mcp_tools.json holds what tools/list answers; a change here is a
change to what every agent reads, so the golden file changes with it.

Runs on: the event loop (constants).
"""

from __future__ import annotations

from typing import Any

from .outputs import OUTPUTS

REF = (
    "A document reference: a search hit's `ref` (`workspace:path#L10-15`), `workspace:path`, "
    "or a path relative to the workspace root (e.g. `adrs/0012-lease-recovery.md`)."
)
WORKSPACE = "Workspace name. Optional when there is only one; see `status` for the names."


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required:
        schema["required"] = required
    return schema


_STR = {"type": "string"}
_STRS = {"type": "array", "items": {"type": "string"}}

TOOLS: list[dict[str, Any]] = [
    {
        "name": "search",
        "title": "Search the knowledge base",
        "description": (
            "Search the local Markdown knowledge base (notes, ADRs, runbooks, docs) by meaning and keywords. "
            "Returns the best passages, one per document (the first document also its passages that match best "
            "of all), each with a `ref` to cite (`workspace:path#L10-15`), "
            "its title and section, the passage text, and a `confidence` (0..1). `answerable` is false when "
            "nothing relevant was found: say so rather than guessing from weak hits. `superseded_by` names the "
            "document that replaces an outdated one. Read more around a hit with `read`."
        ),
        "inputSchema": _obj(
            {
                "query": {
                    **_STR,
                    "description": 'What to find, in plain words. Supports "exact phrases", '
                    "prefix*, -word, field:value and tag:x.",
                },
                "workspace": {**_STR, "description": "Workspace to search. Omit to search every workspace."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                    "default": 5,
                    "description": "How many hits (documents) to return.",
                },
                "paths": {**_STRS, "description": 'Only documents under these path prefixes, e.g. ["adrs/"].'},
                "tags": {**_STRS, "description": "Only documents with these tags."},
                "facets": {
                    "type": "object",
                    "additionalProperties": _STRS,
                    "description": 'Frontmatter filters, e.g. {"status": ["accepted"]}; dates and numbers '
                    'take ranges like ">=2024-01-01".',
                },
                "stages": {
                    **_STRS,
                    "description": "Advanced: retrieval stages, any of lexical, semantic, rerank, "
                    "graph. Default: lexical + semantic + rerank.",
                },
                "budget_tokens": {
                    "type": "integer",
                    "minimum": 300,
                    "maximum": 32000,
                    "default": 800,
                    "description": "Most tokens the whole answer may take. The first passage comes whole "
                    "when it fits and is cut at a line end when it does not; later ones are cut to a run of "
                    "their lines (those holding the question's rarer words), or dropped, to fit, the least "
                    "confident last (`truncated` then says so).",
                },
                "min_confidence": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "default": 0.03,
                    "description": "The relevance floor: hold back passages whose own match is less "
                    "confident than this (never one holding every word of the query); `held_back` counts "
                    "them; 0 keeps every hit.",
                },
                "per_document": {
                    "type": "boolean",
                    "default": True,
                    "description": "true: one passage per document, its best (the first document also "
                    "the passages that the words or the meaning match best of all); false: a document may "
                    "give several passages.",
                },
                "scope": {
                    "type": "string",
                    "enum": ["files", "sessions", "all"],
                    "default": "all",
                    "description": "files: the workspace's documents; sessions: conversations saved with "
                    "`save_session`; all: both.",
                },
            },
            ["query"],
        ),
    },
    {
        "name": "read",
        "title": "Read a document",
        "description": (
            "Read a document, or part of it, with numbered lines. Give a search hit's `ref` to read that "
            'passage, or a path; narrow with `lines` ("40-80"), `around` a line, or a `section` heading. '
            "Several documents at once: `refs`, a list of refs (each may carry its lines, `path#L40-80`). "
            "Out-of-range lines are clamped to the document; an unknown path answers with `did_you_mean`."
        ),
        "inputSchema": _obj(
            {
                "ref": {**_STR, "description": REF + " Required unless `refs` is given."},
                "refs": {
                    **_STRS,
                    "maxItems": 20,
                    "description": "Instead of `ref`: several refs read in one call, each answered in "
                    "`documents` as `read` answers one (a ref that cannot be read gets its own `error`).",
                },
                "workspace": {**_STR, "description": WORKSPACE},
                "lines": {**_STR, "description": 'Line range to read, 1-based and inclusive, e.g. "40-80".'},
                "around": {"type": "integer", "minimum": 1, "description": "Read the lines around this line number."},
                "context": {
                    "type": "integer",
                    "minimum": 0,
                    "maximum": 500,
                    "default": 15,
                    "description": "With `around`: lines to show on each side.",
                },
                "section": {**_STR, "description": "Read the section under this heading (case-insensitive)."},
                "max_lines": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 2000,
                    "default": 400,
                    "description": "Most lines to return; the answer says where to continue.",
                },
            },
        ),
    },
    {
        "name": "outline",
        "title": "Outline a document",
        "description": (
            "A document's heading tree: each heading with its level, line span and size in tokens. Use it to "
            "decide which section to `read` in a long document."
        ),
        "inputSchema": _obj(
            {
                "ref": {**_STR, "description": REF},
                "workspace": {**_STR, "description": WORKSPACE},
            },
            ["ref"],
        ),
    },
    {
        "name": "links",
        "title": "Links of a document",
        "description": (
            "A document's links: outgoing (what it links to, each resolved to a path or marked broken) and "
            "incoming (which documents link to it, with their lines). Follow decisions, supersessions and "
            "related notes this way."
        ),
        "inputSchema": _obj(
            {
                "ref": {**_STR, "description": REF},
                "workspace": {**_STR, "description": WORKSPACE},
                "direction": {
                    "type": "string",
                    "enum": ["out", "in", "both"],
                    "default": "both",
                    "description": "out: links from this document; in: links to it; both.",
                },
            },
            ["ref"],
        ),
    },
    {
        "name": "similar",
        "title": "Similar documents",
        "description": "Documents about the same thing as a given document, best first, with a `ref` to cite each.",
        "inputSchema": _obj(
            {
                "ref": {**_STR, "description": REF},
                "workspace": {**_STR, "description": WORKSPACE},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 50,
                    "default": 5,
                    "description": "How many documents.",
                },
            },
            ["ref"],
        ),
    },
    {
        "name": "list",
        "title": "Browse documents",
        "description": (
            "Browse a workspace's documents in path order, filtered by path prefix, tags or frontmatter "
            "facets, with counts per tag and per value of the facets named in `count`. Page with `cursor`."
        ),
        "inputSchema": _obj(
            {
                "workspace": {**_STR, "description": WORKSPACE},
                "paths": {**_STRS, "description": "Only documents under these path prefixes."},
                "tags": {**_STRS, "description": "Only documents with these tags."},
                "facets": {
                    "type": "object",
                    "additionalProperties": _STRS,
                    "description": 'Frontmatter filters, e.g. {"type": ["adr"]}.',
                },
                "count": {**_STRS, "description": 'Frontmatter fields to count documents by, e.g. ["status"].'},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 200,
                    "default": 50,
                    "description": "Documents per page.",
                },
                "cursor": {**_STR, "description": "`next_cursor` of the previous page."},
            }
        ),
    },
    {
        "name": "changes",
        "title": "Recent changes",
        "description": (
            "What changed in the knowledge base since a cursor: documents added, modified, renamed or deleted, "
            "oldest first. Start with cursor 0 (or the `change_cursor` of `status`) and pass `next_cursor` "
            "next time."
        ),
        "inputSchema": _obj(
            {
                "workspace": {**_STR, "description": "Workspace. Omit for every workspace."},
                "cursor": {"type": "integer", "minimum": 0, "default": 0, "description": "Changes after this cursor."},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 1000,
                    "default": 100,
                    "description": "Most changes to return.",
                },
            }
        ),
    },
    {
        "name": "status",
        "title": "Index status",
        "description": (
            "The state of each workspace: files indexed and skipped, chunks, semantic search (ready, or how "
            "many vectors are pending and when they should be done), the reranker, and problems found in "
            "documents. Call it when search answers look thin or a document seems missing."
        ),
        "inputSchema": _obj(
            {
                "workspace": {**_STR, "description": "Workspace. Omit for every workspace."},
            }
        ),
    },
    {
        "name": "reindex",
        "title": "Index files now",
        "description": (
            "Index files you just wrote or changed so that search finds them now. Give their paths relative "
            "to the workspace root; the answer says, for each, whether it is indexed."
        ),
        "inputSchema": _obj(
            {
                "paths": {**_STRS, "description": 'Files to index, e.g. ["notes/2024-06-01-decision.md"].'},
                "workspace": {**_STR, "description": WORKSPACE},
            },
            ["paths"],
        ),
    },
    {
        "name": "save_session",
        "title": "Save this conversation",
        "description": (
            "Save this conversation (the user's messages and your responses) in the knowledge base, so later "
            'sessions can find it with `search` (scope "sessions" or "all") and cite it. Send the turns in '
            "order; to update it, send the whole conversation again with the same session_id (turns are matched "
            "by `id`, else by position). Tool calls and results are accepted and not indexed."
        ),
        "inputSchema": _obj(
            {
                "session_id": {
                    **_STR,
                    "description": "A stable name for this conversation, e.g. "
                    '"2026-12-01-lease-debugging" or its UUID.',
                },
                "turns": {
                    "type": "array",
                    "description": "The conversation, oldest first.",
                    "items": _obj(
                        {
                            "role": {"type": "string", "enum": ["user", "assistant", "tool", "system"]},
                            "text": {**_STR, "description": "What was said (Markdown)."},
                            "id": {**_STR, "description": "Optional stable id of the turn."},
                            "time": {**_STR, "description": "Optional ISO 8601 time."},
                        },
                        ["role", "text"],
                    ),
                },
                "title": {**_STR, "description": "Optional title; default: the first line of the first message."},
                "workspace": {**_STR, "description": WORKSPACE},
            },
            ["session_id", "turns"],
        ),
    },
    {
        "name": "sessions",
        "title": "Saved conversations",
        "description": (
            "The conversations saved with `save_session`, in session_id order: each with a `ref` to `read` it, "
            "its title, its number of turns and the time of its last turn. Page with `cursor`."
        ),
        "inputSchema": _obj(
            {
                "workspace": {**_STR, "description": WORKSPACE},
                "limit": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": 200,
                    "default": 20,
                    "description": "Sessions per page.",
                },
                "cursor": {**_STR, "description": "`next_cursor` of the previous page."},
            }
        ),
    },
]

# every tool reads this machine's store and nothing else; reindex and save_session write (the index, not files)
WRITES = ("reindex", "save_session")
for _t in TOOLS:
    _t["annotations"] = {
        "readOnlyHint": _t["name"] not in WRITES,
        "openWorldHint": False,
        **({"idempotentHint": True, "destructiveHint": False} if _t["name"] in WRITES else {}),
    }

for _t in TOOLS:  # what each answers (outputs.py): clients check answers against it
    _t["outputSchema"] = OUTPUTS[_t["name"]]

NAMES = [t["name"] for t in TOOLS]
KNOWN_ARGS: dict[str, list[str]] = {t["name"]: list(t["inputSchema"]["properties"]) for t in TOOLS}
