"""Tool arguments, read the way a model writes them.

A model nests options it saw in the RPC (`opts: {limit: 5}`), names a param
the way another tool does (`k`, `top_k`, `file`), writes numbers as strings
and asks for lines past the end. One rule for all of it: a value that means
one thing is taken as meant — a number written as a string ("3"), a fraction
where a whole number goes (1.7 → 2), a number past the range (clamped), a
line range written backwards ("80-40" → 40-80) or starting before line 1, a
boolean written as a string — and every such reading is said in the answer's
`notes`; a value that means nothing ("five", "the middle") fails with a
message saying what to send instead. Nothing is reinterpreted silently. References are the ones search answers carry:
`workspace:path#L10-15` (also `path#L10-15`, `path:10-15`, `path`).

Runs on: the event loop (pure).
"""

from __future__ import annotations

import builtins
import math
import re
from typing import Any

from .. import refs
from ..refs import Ref
from ..suggest import close_names
from .backend import ToolError
from .wire import ARGUMENTS_WERE_A_STRING

NESTED = ("opts", "options", "params", "arguments", "args", "filters")
ALIASES = {
    "k": "limit",
    "top_k": "limit",
    "topk": "limit",
    "n": "limit",
    "max_results": "limit",
    "count": "limit",
    "num_results": "limit",
    "size": "limit",
    "q": "query",
    "question": "query",
    "search": "query",
    "text": "query",
    "prompt": "query",
    "ws": "workspace",
    "workspace_name": "workspace",
    "kb": "workspace",
    "collection": "workspace",
    "path": "ref paths",
    "file": "ref paths",
    "document": "ref",
    "doc": "ref",
    "filename": "ref paths",
    "file_path": "ref paths",
    "note": "ref",
    "files": "paths",
    "hit": "ref",
    "citation": "ref",
    "id": "ref session_id",
    "uri": "ref",
    "url": "ref",
    "name": "ref workspace",
    "refs": "ref",
    "line_range": "lines",
    "range": "lines",
    "span": "lines",
    "line": "around",
    "at_line": "around",
    "heading": "section",
    "budget": "budget_tokens",
    "max_tokens": "budget_tokens",
    "token_budget": "budget_tokens",
    "tokens": "budget_tokens",
    "filter_paths": "paths",
    "prefix": "paths",
    "folder": "paths",
    "dir": "paths",
    "tag": "tags",
    "mode": "stages",
    "since": "cursor",
    "after": "cursor",
    "field": "facet",
    "messages": "turns",
    "conversation": "turns",
    "events": "turns",
    "transcript": "turns",
    "session": "session_id",
}
_LINES = re.compile(r"^\s*L?(\d+)\s*(?:(?:-|:|–|\.\.)\s*L?(\d+)\s*)?$", re.I)


def parse_ref(text: str) -> Ref:
    """`autodoc://ws/path` (a resource's address), else the one ref format (refs.py): `ws:path#L10-15`,
    `path#L10-15`, `path:10-15` or a bare path."""
    text = text.strip()
    if text.startswith("autodoc://"):
        ws, _, path = text[len("autodoc://") :].partition("/")
        return Ref(ws or None, path, None)
    return refs.parse(text)


class Args:
    """One call's arguments: flattened, aliased, and read one by one with notes."""

    def __init__(self, raw: Any, known: list[str]):
        if raw is None:
            raw = {}
        if not isinstance(raw, dict):
            raise ToolError(f"send the arguments as an object with the keys {known}")
        self.notes: list[str] = []
        if raw.get(ARGUMENTS_WERE_A_STRING) is True:  # wire.py parsed them
            raw = {k: v for k, v in raw.items() if k != ARGUMENTS_WERE_A_STRING}
            self.notes.append("read the arguments sent as a JSON string as the object it holds: send an object")
        self.values: dict[str, Any] = {}
        flat: dict[str, Any] = {}
        for key in NESTED:
            if key not in known and isinstance(raw.get(key), dict):
                flat.update(raw[key])
                self.notes.append(
                    f"read the keys of {key!r} as arguments ({', '.join(map(str, raw[key]))}): they go at the top level"
                )
        flat.update({k: v for k, v in raw.items() if not (k in NESTED and k not in known and isinstance(v, dict))})
        for key, value in flat.items():
            name = (
                key
                if key in known
                else next((a for a in ALIASES.get(str(key).lower(), "").split() if a in known), None)
            )
            if name is None:
                near = close_names(str(key), known, 1, cutoff=0.75, fold_case=False)
                name = near[0] if near else None
            if name is None:
                self.notes.append(f"ignored {key!r}: this tool takes {', '.join(known)}")
                continue
            if name != key:
                self.notes.append(f"read {key!r} as {name!r}")
            if name in self.values:
                continue  # the exact name, given at the top level, wins over an alias or a nested one
            if value is not None:
                self.values[name] = value

    def has(self, name: str) -> bool:
        return name in self.values

    def str(
        self, name: builtins.str, *, required: builtins.bool = False, example: builtins.str = ""
    ) -> builtins.str | None:
        v = self.values.get(name)
        if v is None or (isinstance(v, str) and not v.strip()):  # blank is absent: "   " searched for everything
            if required:
                raise ToolError(f"{name} is required{': e.g. ' + repr(example) if example else ''}")
            return None
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return str(v)
        if not isinstance(v, str):
            raise ToolError(f"{name} must be a string{', e.g. ' + repr(example) if example else ''}, not {_kind(v)}")
        return v

    def int(
        self, name: builtins.str, default: builtins.int | None, lo: builtins.int, hi: builtins.int
    ) -> builtins.int | None:
        v = self.values.get(name)
        if v is None:
            return default
        n: int | None = None
        x = _number(v)
        if x is not None and x.is_integer():
            n = int(x)
        elif x is not None:
            n = math.floor(x + 0.5)
            self.notes.append(f"{name} {v!r} is not a whole number: used {n}")
        if n is None:
            raise ToolError(f"{name} must be a whole number from {lo} to {hi}, not {v!r}")
        if isinstance(v, str) and x is not None and x.is_integer():
            self.notes.append(f"read {name} {v!r} (a string) as the number {n}")
        if n < lo or n > hi:
            clamped = min(max(n, lo), hi)
            self.notes.append(f"{name} {n} is outside {lo}..{hi}: used {clamped}")
            n = clamped
        return n

    def float(
        self, name: builtins.str, default: builtins.float, lo: builtins.float, hi: builtins.float
    ) -> builtins.float:
        v = self.values.get(name)
        if v is None:
            return default
        x = _number(v)
        if x is None:
            raise ToolError(f"{name} must be a number from {lo} to {hi}, not {v!r}")
        if isinstance(v, str):
            self.notes.append(f"read {name} {v!r} (a string) as the number {x:g}")
        if not lo <= x <= hi:
            self.notes.append(f"{name} {x} is outside {lo}..{hi}: used {min(max(x, lo), hi)}")
        return min(max(x, lo), hi)

    def bool(self, name: builtins.str, default: builtins.bool) -> builtins.bool:
        v = self.values.get(name)
        if v is None:
            return default
        if isinstance(v, bool):
            return v
        if isinstance(v, str) and v.strip().lower() in ("true", "yes", "1", "false", "no", "0"):
            b = v.strip().lower() in ("true", "yes", "1")
            self.notes.append(f"read {name} {v!r} (a string) as {str(b).lower()}")
            return b
        raise ToolError(f"{name} must be true or false, not {v!r}")

    def strings(self, name: builtins.str, example: builtins.str = "") -> list[builtins.str] | None:
        v = self.values.get(name)
        if v is None:
            return None
        if isinstance(v, str):
            v = [s.strip() for s in v.split(",")] if "," in v else [v]
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            raise ToolError(f"{name} must be a list of strings{', e.g. ' + example if example else ''}, not {_kind(v)}")
        return [s for s in v if s] or None

    def choice(self, name: builtins.str, options: list[builtins.str], default: builtins.str) -> builtins.str:
        v = self.values.get(name)
        if v is None:
            return default
        if isinstance(v, str) and v.lower() in options:
            return v.lower()
        raise ToolError(f"{name} must be one of {options}, not {v!r}")

    def dict(self, name: builtins.str, example: builtins.str = "") -> builtins.dict[builtins.str, Any] | None:
        v = self.values.get(name)
        if v is None:
            return None
        if not isinstance(v, dict):
            raise ToolError(f"{name} must be an object{', e.g. ' + example if example else ''}, not {_kind(v)}")
        return v

    def lines(self, name: builtins.str = "lines") -> tuple[builtins.int, builtins.int] | None:
        """ "a-b", "a:b", "La-Lb", "a", [a, b] or {start, end} → (a, b), a ≤ b, both ≥ 1."""
        v = self.values.get(name)
        if v is None:
            return None
        pair: tuple[int, int] | None = None
        if isinstance(v, int) and not isinstance(v, bool):
            pair = (v, v)
        elif isinstance(v, str) and (m := _LINES.match(v)):
            pair = (int(m.group(1)), int(m.group(2) or m.group(1)))
        elif isinstance(v, list) and len(v) in (1, 2) and all(isinstance(x, int) for x in v):
            pair = (v[0], v[-1])
        elif isinstance(v, dict) and isinstance(v.get("start"), int):
            pair = (v["start"], v["end"] if "end" in v else v["start"])
        if pair is None:
            raise ToolError(
                f'{name} must be a line range like "10-25" (1-based, inclusive) or one line number, not {v!r}'
            )
        a, b = pair
        if b < a:
            a, b = b, a
            self.notes.append(f"{name} {v!r} ran backwards: read {a}-{b}")
        if a < 1:
            self.notes.append(f"{name} {v!r} starts before line 1: read from line 1")
            a, b = 1, max(1, b)
        return a, b


def _number(v: Any) -> float | None:
    """A number, or a string holding one; None for anything else (a boolean is no number)."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        x = float(v)
    elif isinstance(v, str) and re.fullmatch(r"\s*-?(?:\d+(?:\.\d*)?|\.\d+)\s*", v):
        x = float(v)
    else:
        return None
    return x if math.isfinite(x) else None


def _kind(v: Any) -> str:
    return {dict: "an object", list: "a list", bool: "a boolean", str: "a string"}.get(type(v), type(v).__name__)
