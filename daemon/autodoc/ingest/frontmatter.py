"""Ingest, frontmatter: the YAML block at the very start of a Markdown file.

Input: the document text and its lines. Output: a Frontmatter — the JSON-safe
mapping, where the body starts, problems (with file line numbers), the file
lines of supersedes/superseded_by values and the span of the abstract field.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

import yaml

from .lines import Line
from .types import Problem

_OPEN = "---"
_CLOSE = ("---", "...")


@dataclass
class Frontmatter:
    data: dict[str, Any] = field(default_factory=dict)
    body_index: int = 0  # index into lines of the first body line
    problems: list[Problem] = field(default_factory=list)
    # key -> [(value as written, 1-based file line)], for supersedes/superseded_by
    value_lines: dict[str, list[tuple[Any, int]]] = field(default_factory=dict)
    # char span of the abstract field (key through value), trailing whitespace trimmed
    abstract_chars: tuple[int, int] | None = None
    # every top-level key (as written) -> 1-based file line of the key, and of each item of a list value
    field_lines: dict[str, int] = field(default_factory=dict)
    item_lines: dict[str, list[int]] = field(default_factory=dict)


def read_frontmatter(text: str, lines: list[Line]) -> Frontmatter:
    """Find and parse the frontmatter; invalid YAML gives a Problem and empty data."""
    if not lines or lines[0].text.lstrip("\ufeff").rstrip() != _OPEN:
        return Frontmatter()
    close = next((i for i in range(1, len(lines)) if lines[i].text.rstrip() in _CLOSE), None)
    if close is None:
        # Without a closing fence the "---" is a thematic break, not frontmatter.
        return Frontmatter(problems=[Problem(1, "frontmatter is not closed (no closing --- line); read as body")])
    fm = Frontmatter(body_index=close + 1)
    y_start = lines[1].start
    y_text = text[y_start:lines[close].start]
    loader = yaml.SafeLoader(y_text)
    try:
        node = loader.get_single_node()
        value = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as e:
        fm.problems.append(Problem(_error_line(e, y_text) + 2, f"invalid YAML frontmatter: {_error_text(e)}"))
        return fm
    finally:
        loader.dispose()
    if value is None:
        return fm
    if not isinstance(value, dict):
        fm.problems.append(Problem(2, f"frontmatter is a {type(value).__name__}, not a mapping; ignored"))
        return fm
    fm.data = {str(k): json_safe(v) for k, v in value.items()}
    _locate(node, y_text, y_start, fm)
    return fm


def _locate(node: yaml.Node, y_text: str, y_start: int, fm: Frontmatter) -> None:
    """Record where every key, supersedes/superseded_by values and the abstract field sit in the file."""
    if not isinstance(node, yaml.MappingNode):
        return
    for key, val in node.value:
        name = key.value if isinstance(key, yaml.ScalarNode) else None
        if name is not None:
            fm.field_lines.setdefault(str(name), key.start_mark.line + 2)
            if isinstance(val, yaml.SequenceNode):
                fm.item_lines.setdefault(str(name), [it.start_mark.line + 2 for it in val.value])
        if name in ("supersedes", "superseded_by"):
            items = val.value if isinstance(val, yaml.SequenceNode) else [val]
            fm.value_lines[name] = [
                (it.value, it.start_mark.line + 2) for it in items if isinstance(it, yaml.ScalarNode)
            ]
        elif name == "abstract":
            end = val.end_mark.index
            # Block scalars end at the start of the following line; trim back to the text.
            while end > key.start_mark.index and y_text[end - 1] in " \t\r\n":
                end -= 1
            fm.abstract_chars = (y_start + key.start_mark.index, y_start + end)


def _error_line(e: yaml.YAMLError, y_text: str) -> int:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    if mark is not None:
        return mark.line
    pos = getattr(e, "position", None)  # ReaderError: a char index
    return y_text.count("\n", 0, pos) if isinstance(pos, int) else 0


def _error_text(e: yaml.YAMLError) -> str:
    parts = [getattr(e, "context", None), getattr(e, "problem", None)]
    msg = ", ".join(p for p in parts if p)
    return msg or str(e).splitlines()[0]


def json_safe(v: Any) -> Any:
    """YAML values → what json.dumps(allow_nan=False) accepts; dates become ISO strings."""
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return v if math.isfinite(v) else str(v)
    if isinstance(v, (dt.date, dt.datetime, dt.time)):
        return v.isoformat()
    if isinstance(v, dict):
        return {str(k): json_safe(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, set, frozenset)):
        return [json_safe(x) for x in v]
    if isinstance(v, bytes):  # !!binary
        return base64.b64encode(v).decode("ascii")
    return str(v)
