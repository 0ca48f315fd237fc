"""Ingest, frontmatter: the YAML block at the very start of a Markdown file.

Input: the document text and its lines. Output: a Frontmatter — the JSON-safe
mapping, where the body starts, problems (with file line numbers), the file
lines of supersedes/superseded_by values and the span of the abstract field.

Never raises. A value YAML cannot construct (2020-02-30, a 5,000-digit
integer, an unknown !tag, a list used as a key) is kept as the text written,
with a problem; only YAML that does not parse at all, or that breaks a
resource limit below, loses the whole block (again with a problem).

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
from dataclasses import dataclass, field
from typing import Any, cast

import yaml

from .lines import Line
from .types import Problem

_OPEN = "---"
_CLOSE = ("---", "...")

# Resource limits. Real frontmatter is far below each (the five corpora in
# ../shared/data/corpora: at most 987 characters, nesting 4): they exist so
# one hostile file cannot hang or exhaust the indexer.
MAX_FRONTMATTER_CHARS = 65_536  # a larger block is not parsed (the body is still read)
MAX_FRONTMATTER_DEPTH = 32  # nested collections; PyYAML's composer recurses per level
# Values after alias expansion. Without aliases a block under the size cap
# holds at most ~33,000 nodes, so only aliases ("billion laughs") reach this.
MAX_FRONTMATTER_NODES = 50_000
# Integers beyond SQLite's signed 64-bit range are kept as text: they cannot be
# stored as numbers, and clients in JavaScript could not read them exactly.
_INT_RANGE = 1 << 63

_Y = "tag:yaml.org,2002:"
_SCALAR_TAGS = {_Y + t for t in ("str", "null", "bool", "int", "float", "timestamp", "binary")}
_SEQ_TAGS = {_Y + "seq", _Y + "omap", _Y + "pairs"}
_MAP_TAGS = {_Y + "map", _Y + "set"}
_MERGE = _Y + "merge"
# Characters the YAML reader refuses (C0 controls such as \x07, lone surrogates…).
_SURROGATE = re.compile("[\ud800-\udfff]")
_NON_PRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


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


class _TooDeep(yaml.MarkedYAMLError):
    pass


class _Loader(yaml.SafeLoader):
    """SafeLoader that refuses nesting deeper than MAX_FRONTMATTER_DEPTH.

    Flow collections are counted by the scanner, before their tokens pile up
    (PyYAML's scanner does work per open '[' for every token, so 30,000 of
    them would take minutes); block ones by the composer, which recurses.
    """

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0

    def fetch_flow_collection_start(self, TokenClass):
        if self.flow_level >= MAX_FRONTMATTER_DEPTH:
            raise _TooDeep(None, None, f"nested deeper than {MAX_FRONTMATTER_DEPTH} levels", self.get_mark())
        super().fetch_flow_collection_start(TokenClass)

    def compose_node(self, parent, index):
        self._depth += 1
        try:
            if self._depth > MAX_FRONTMATTER_DEPTH:
                raise _TooDeep(
                    None, None, f"nested deeper than {MAX_FRONTMATTER_DEPTH} levels", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def read_frontmatter(text: str, lines: list[Line]) -> Frontmatter:
    """Find and parse the frontmatter; never raises (see the module docstring)."""
    if not lines or lines[0].text.lstrip("\ufeff").rstrip() != _OPEN:
        return Frontmatter()
    close = next((i for i in range(1, len(lines)) if lines[i].text.rstrip() in _CLOSE), None)
    if close is None:
        # Without a closing fence the "---" is a thematic break, not frontmatter.
        return Frontmatter(problems=[Problem(1, "frontmatter is not closed (no closing --- line); read as body")])
    fm = Frontmatter(body_index=close + 1)
    y_start = lines[1].start
    y_text = text[y_start : lines[close].start]
    if len(y_text) > MAX_FRONTMATTER_CHARS:
        fm.problems.append(
            Problem(
                2,
                f"frontmatter is {len(y_text)} characters, over the limit of {MAX_FRONTMATTER_CHARS}; ignored",
                "limit",
            )
        )
        return fm
    y_text = _replace_unreadable(y_text, fm.problems)
    node = _compose(y_text, fm.problems)
    if node is None:
        return fm
    if not isinstance(node, yaml.MappingNode):
        kind = "list" if isinstance(node, yaml.SequenceNode) else "scalar"
        fm.problems.append(Problem(2, f"frontmatter is a {kind}, not a mapping; ignored"))
        return fm
    try:
        fm.data = _Builder(y_text, fm.problems).top(node)
        _locate(node, y_text, y_start, fm)
    except Exception as e:  # a defect here must cost this block, never the file
        fm.data = {}
        fm.problems.append(Problem(2, f"frontmatter could not be read ({type(e).__name__}: {e}); ignored"))
    return fm


def _replace_unreadable(y_text: str, problems: list[Problem]) -> str:
    """Characters the YAML reader rejects become U+FFFD (same length, so marks keep their places)."""
    first = _NON_PRINTABLE.search(y_text)
    if first is None:
        return y_text
    count = len(_NON_PRINTABLE.findall(y_text))
    line = y_text.count("\n", 0, first.start()) + 2
    problems.append(
        Problem(
            line,
            f"frontmatter holds {count} control or invalid character(s) "
            f"(first: U+{ord(first.group()):04X}); replaced by U+FFFD",
        )
    )
    return _NON_PRINTABLE.sub("\ufffd", y_text)


def _compose(y_text: str, problems: list[Problem]) -> yaml.Node | None:
    """The YAML node graph (aliases not expanded), or None with a problem."""
    try:
        loader = _Loader(y_text)
    except Exception as e:
        problems.append(Problem(2, f"invalid YAML frontmatter: {e}"))
        return None
    try:
        return loader.get_single_node()
    except _TooDeep as e:
        mark = e.problem_mark
        assert mark is not None  # _Loader raises it at the mark of the node too deep
        problems.append(Problem(mark.line + 2, f"frontmatter {e.problem}; ignored", "limit"))
    except yaml.YAMLError as e:
        problems.append(Problem(_error_line(e, y_text) + 2, f"invalid YAML frontmatter: {_error_text(e)}"))
    except Exception as e:  # RecursionError, or a PyYAML defect: the block is lost, not the file
        problems.append(Problem(2, f"frontmatter could not be read ({type(e).__name__}); ignored"))
    finally:
        loader.dispose()
    return None


class _Builder:
    """YAML nodes → JSON-safe values, keeping what cannot be constructed as its text."""

    def __init__(self, y_text: str, problems: list[Problem]):
        self.y_text = y_text
        self.problems = problems
        self.budget: float = MAX_FRONTMATTER_NODES
        self._sizes: dict[int, float] = {}
        self._ctor = yaml.SafeLoader("")  # only its scalar constructors are used

    def top(self, node: yaml.MappingNode) -> dict[str, Any]:
        return self._mapping(node, top=True)

    def _problem(self, node: yaml.Node, message: str, code: str = "frontmatter") -> None:
        self.problems.append(Problem(node.start_mark.line + 2, message, code))

    def _size(self, node: yaml.Node, depth: int = 1) -> float:
        """Values in node once aliases are expanded; inf for a cycle or nesting past the limit
        (aliases can nest deeper than the text). Memoised by node, so linear in the graph."""
        if depth > MAX_FRONTMATTER_DEPTH:
            return math.inf
        key = id(node)
        got = self._sizes.get(key)
        if got is not None:
            return got
        self._sizes[key] = math.inf  # met again while still being measured: a cycle
        total = 1.0
        if isinstance(node, yaml.SequenceNode):
            total += sum(self._size(c, depth + 1) for c in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(self._size(k, depth + 1) + self._size(v, depth + 1) for k, v in node.value)
        self._sizes[key] = total
        return total

    def _value(self, node: yaml.Node, name: str) -> Any:
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, name)
        if node.tag not in _SEQ_TAGS | _MAP_TAGS:
            self._problem(
                node,
                f"{name}: unknown tag {node.tag}; read as a plain "
                f"{'list' if isinstance(node, yaml.SequenceNode) else 'mapping'}",
            )
        if isinstance(node, yaml.SequenceNode):
            return [self._value(c, name) for c in node.value]
        if node.tag == _Y + "set":
            return [self._key(k, name) for k, _ in node.value]
        return self._mapping(cast(yaml.MappingNode, node), name=name)  # neither scalar nor sequence

    def _mapping(self, node: yaml.MappingNode, *, top: bool = False, name: str = "") -> dict[str, Any]:
        out: dict[str, Any] = {}
        merged, own = self._pairs(node, name, set())
        for k, v in merged:  # merged keys: the first source wins, the mapping's own keys override
            key = self._key(k, name)
            if key not in out:
                out[key] = self._checked(k, v, key, name, top)
        first_line: dict[str, int] = {}
        for k, v in own:
            key = self._key(k, name)
            if key in first_line:
                self._problem(
                    k,
                    f"duplicate key {self._where(name, key)!r} (first on line {first_line[key]}); "
                    "the last value is kept",
                )
            first_line.setdefault(key, k.start_mark.line + 2)
            out[key] = self._checked(k, v, key, name, top)
        return out

    @staticmethod
    def _where(name: str, key: str) -> str:
        return f"{name}.{key}" if name else key

    def _checked(self, k: yaml.Node, v: yaml.Node, key: str, name: str, top: bool) -> Any:
        """The value, unless it is a top-level one past the expansion budget (None and a problem)."""
        where = self._where(name, key)
        if top:  # each top-level value is measured whole, once: nested ones are inside it
            size = self._size(v)
            if size == math.inf:
                self._problem(
                    v,
                    f"{where}: the value refers to itself or nests deeper than "
                    f"{MAX_FRONTMATTER_DEPTH} levels through YAML aliases; dropped",
                    "limit",
                )
                return None
            if size > self.budget:
                self._problem(
                    v,
                    f"{where}: YAML aliases expand the value to {int(size)} values, over the "
                    f"limit of {MAX_FRONTMATTER_NODES} for the block; dropped",
                    "limit",
                )
                return None
            self.budget -= size
        return self._value(v, where)

    def _pairs(self, node: yaml.MappingNode, name: str, seen: set[int]):
        """(merged pairs in precedence order, the mapping's own pairs), YAML merge keys (<<: *base) resolved."""
        seen.add(id(node))
        merged: list[tuple[yaml.Node, yaml.Node]] = []
        own: list[tuple[yaml.Node, yaml.Node]] = []
        for k, v in node.value:
            if k.tag != _MERGE:
                own.append((k, v))
                continue
            sources = v.value if isinstance(v, yaml.SequenceNode) else [v]
            if not all(isinstance(s, yaml.MappingNode) and id(s) not in seen for s in sources):
                self._problem(k, f"{name or 'frontmatter'}: '<<' merges only mappings, once each; kept as a key")
                own.append((yaml.ScalarNode(_Y + "str", "<<", k.start_mark, k.end_mark), v))
                continue
            for s in sources:  # earlier sources win, and a source's own keys beat what it merged
                m, o = self._pairs(s, name, seen)
                merged += o + m
        return merged, own

    def _text(self, node: yaml.Node, text: str, name: str) -> str:
        """text with each lone surrogate (a "\ud800" escape: no UTF-8 can hold it, nor the store)
        replaced by U+FFFD, and a problem said once for it."""
        if not _SURROGATE.search(text):
            return text
        self._problem(node, f"{name + ': ' if name else ''}a lone surrogate escape, not a character; replaced")
        return _SURROGATE.sub("\ufffd", text)

    def _key(self, node: yaml.Node, name: str) -> str:
        if isinstance(node, yaml.ScalarNode):
            # 404: or 2024-01-01: as written, not str() of the value ("None", "True")
            return self._text(node, node.value, name)
        text = " ".join(self.y_text[node.start_mark.index : node.end_mark.index].split())
        self._problem(
            node,
            f"{name + ': ' if name else ''}a {'list' if isinstance(node, yaml.SequenceNode) else 'mapping'} "
            f"used as a key; kept as the text {text[:60]!r}",
        )
        return text

    def _scalar(self, node: yaml.ScalarNode, name: str) -> Any:
        tag = node.tag
        if tag == _Y + "str":
            return self._text(node, node.value, name)
        if tag == _Y + "binary":
            return "".join(node.value.split())  # base64 as written: JSON cannot hold bytes
        if tag not in _SCALAR_TAGS:
            self._problem(node, f"{name}: unknown tag {tag}; kept as text")
            return node.value
        try:
            v = self._ctor.yaml_constructors[tag](self._ctor, node)
        except Exception as e:  # 2020-02-30, 5,000 digits, !!int xx
            kind = tag.rsplit(":", 1)[-1]
            self._problem(node, f"{name}: {_clip(node.value)} is not a valid {kind} ({_reason(e)}); kept as text")
            return node.value
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, int):
            if -_INT_RANGE <= v < _INT_RANGE:
                return v
            self._problem(node, f"{name}: integer {_clip(node.value)} is outside the 64-bit range; kept as text")
            return node.value
        if isinstance(v, float):
            return v if math.isfinite(v) else str(v)
        if isinstance(v, (dt.date, dt.datetime, dt.time)):
            return v.isoformat()
        return json_safe(v)


def _clip(s: str, n: int = 40) -> str:
    return repr(s if len(s) <= n else s[:n] + "…")


def _reason(e: Exception) -> str:
    msg = str(e).split("\n", 1)[0].split("; ", 1)[0]  # Python's advice after "; " is not for our users
    return msg[:120] or type(e).__name__


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
            fm.value_lines[name] = [  # a link target, stored as text: no lone surrogate (see _text)
                (_SURROGATE.sub("\ufffd", it.value), it.start_mark.line + 2)
                for it in items
                if isinstance(it, yaml.ScalarNode)
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
