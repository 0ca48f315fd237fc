"""Typed values (pure): coercing frontmatter values to a declared type, and
parsing the value side of a facet token (`adr:0042`, `date:>=2025-01-01`,
`adr:10..20`) into a condition over the facets table's columns.

A facet row is (value, num, date): `value` is the canonical text, lowercased
(what equality on string, enum, list and boolean fields compares, and what
facet counts show); `num` is set for numbers, `date` (ISO YYYY-MM-DD) for dates.

Runs on: any thread (pure: no I/O, no shared state).
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

TYPES = ("string", "integer", "number", "boolean", "date", "list", "enum")
# how a field's facet compares: enum and list compare as strings
KIND_OF = {
    "string": "string",
    "enum": "string",
    "list": "string",
    "integer": "number",
    "number": "number",
    "boolean": "boolean",
    "date": "date",
}

_INT = re.compile(r"^[+-]?\d+$")
_NUM = re.compile(r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?$")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:[Tt ][0-9:.+\-Zz ]*)?$")
_YEAR = re.compile(r"^(\d{4})$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")
_TRUE = {"true", "yes", "on", "y", "1"}
_FALSE = {"false", "no", "off", "n", "0"}


class CoerceError(ValueError):
    """A value that is not of the declared type; the message says what was expected."""

    def __init__(self, message: str, code: str = "schema.type", item: int | None = None):
        super().__init__(message)
        self.code = code
        self.item = item  # which item of a list value


@dataclass(frozen=True)
class Typed:
    value: str  # canonical text, lowercased
    num: float | None = None
    date: str | None = None


def _describe(v: Any) -> str:
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    if v is None:
        return "nothing"
    s = repr(v) if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)
    return s if len(s) <= 40 else s[:37] + "..."


def _num_text(n: float) -> str:
    return str(int(n)) if float(n).is_integer() and abs(n) < 2**63 else repr(float(n))


def _float_or_none(n: float) -> float | None:
    """n as a finite float, or None (an int past a float's range raises OverflowError in float())."""
    try:
        f = float(n)
    except OverflowError:
        return None
    return f if math.isfinite(f) else None


def parse_int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float):
        return int(v) if math.isfinite(v) and v.is_integer() else None
    if isinstance(v, str) and _INT.match(v.strip()):
        try:
            return int(v.strip())
        except ValueError:  # past Python's 4,300-digit limit: frontmatter keeps such a number as text
            return None
    return None


def parse_number(v: Any) -> float | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return _float_or_none(v)
    if isinstance(v, str) and _NUM.match(v.strip()):
        f = float(v.strip())
        return f if math.isfinite(f) else None
    return None


def parse_bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str):
        s = v.strip().lower()
        if s in _TRUE:
            return True
        if s in _FALSE:
            return False
    return None


def parse_date(v: Any) -> str | None:
    """A full date (a datetime keeps its date part) → 'YYYY-MM-DD', else None."""
    if isinstance(v, (dt.date, dt.datetime)):
        return (v.date() if isinstance(v, dt.datetime) else v).isoformat()
    if not isinstance(v, str):
        return None
    m = _DATE.match(v.strip())
    if not m:
        return None
    try:
        return dt.date(int(m.group(1)), int(m.group(2)), int(m.group(3))).isoformat()
    except ValueError:
        return None


def date_span(s: str) -> tuple[str, str] | None:
    """'2024' → (2024-01-01, 2024-12-31); '2024-03' → the month; a full date → itself."""
    s = s.strip()
    m = _YEAR.match(s)
    if m:
        return f"{m.group(1)}-01-01", f"{m.group(1)}-12-31"
    m = _MONTH.match(s)
    if m:
        y, mo = int(m.group(1)), int(m.group(2))
        if not 1 <= mo <= 12:
            return None
        nxt = dt.date(y + (mo == 12), mo % 12 + 1, 1)
        return f"{y:04d}-{mo:02d}-01", (nxt - dt.timedelta(days=1)).isoformat()
    d = parse_date(s)
    return (d, d) if d else None


def _scalar_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return _num_text(v)
    return str(v).strip().lower()


def coerce(type_: str, v: Any, values: tuple[str, ...] = ()) -> list[Typed]:
    """A frontmatter value (JSON-safe, as parsed) → facet rows, or CoerceError.

    `values` are an enum's allowed values (lowercased). A list field takes a
    list of scalars or one scalar; every other type takes one scalar.
    """
    if type_ == "list":
        items = v if isinstance(v, list) else [v]
        out = []
        for i, it in enumerate(items):
            if it is None:
                continue
            if isinstance(it, (dict, list)):
                raise CoerceError(
                    f"expected a list of strings, got an item that is {_describe(it)}",
                    item=i if isinstance(v, list) else None,
                )
            out.append(Typed(_scalar_text(it)))
        return out
    if isinstance(v, list):
        raise CoerceError(f"expected {_ARTICLE[type_]}, got a list")
    if isinstance(v, dict):
        raise CoerceError(f"expected {_ARTICLE[type_]}, got a mapping")
    if type_ == "string":
        return [Typed(_scalar_text(v))]
    if type_ == "enum":
        s = _scalar_text(v)
        if values and s not in values:
            raise CoerceError(f"{_describe(v)} is not one of {', '.join(values)}", "schema.enum")
        return [Typed(s)]
    if type_ == "integer":
        n = parse_int(v)
        if n is None:
            raise CoerceError(f"expected an integer, got {_describe(v)}")
        f = _float_or_none(n)
        if f is None:  # past a float's range (about 309 digits): a facet compares numbers as floats
            raise CoerceError(f"expected an integer of at most 308 digits, got {_describe(v)}")
        return [Typed(str(n), num=f)]
    if type_ == "number":
        f = parse_number(v)
        if f is None:
            raise CoerceError(f"expected a number, got {_describe(v)}")
        return [Typed(_num_text(f), num=f)]
    if type_ == "boolean":
        b = parse_bool(v)
        if b is None:
            raise CoerceError(f"expected a boolean (true or false), got {_describe(v)}")
        return [Typed("true" if b else "false")]
    if type_ == "date":
        d = parse_date(v)
        if d is None:
            raise CoerceError(f"expected a date (YYYY-MM-DD), got {_describe(v)}")
        return [Typed(d, date=d)]
    raise CoerceError(f"unknown type {type_!r}")


_ARTICLE = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "date": "a date (YYYY-MM-DD)",
    "list": "a list of strings",
    "enum": "one of the allowed values",
}


def untyped(v: Any) -> list[Typed]:
    """Facet rows for a field no schema declares: text, plus num for YAML numbers
    and date for ISO dates, so ranges work without a schema too."""
    items = v if isinstance(v, list) else [v]
    out = []
    for it in items:
        if isinstance(it, (str, int, float, bool)):
            num = _float_or_none(it) if isinstance(it, (int, float)) and not isinstance(it, bool) else None
            date = parse_date(it) if isinstance(it, str) else None
            text = ("true" if it else "false") if isinstance(it, bool) else str(it).lower()  # as before schemas
            out.append(Typed(text, num, date))
    return out


# -- the query side ------------------------------------------------------------

_RANGE_OP = re.compile(r"^(>=|<=|>|<)(.+)$")


def condition(kind: str | None, raw: str) -> tuple[str, list[Any]]:
    """The value side of a facet token → an SQL predicate over (value, num, date).

    kind is the field's comparison kind ("string", "number", "date",
    "boolean") or None when the workspace has no schema. Numbers and dates
    take ranges: `>=X`, `<=X`, `>X`, `<X`, `X..Y`, `X..`, `..Y` (inclusive);
    a date may be a year or a month (`2024`, `2024-03`) and then means all of
    it. A value that does not parse as the field's type is compared as text.
    """
    literal = ("value = ?", [raw.strip().lower()])
    rng = _parse_range(raw)
    if kind in ("number", "date"):
        return _typed_condition(kind, raw, rng) or literal
    if kind is None and rng is not None:  # no schema: whichever of number and date the bounds parse as
        got = [c for c in (_typed_condition(k, raw, rng) for k in ("number", "date")) if c is not None]
        if not got:
            return literal
        if len(got) == 1:
            return got[0]
        return ("(" + " OR ".join(sql for sql, _ in got) + ")", [p for _, ps in got for p in ps])
    if kind == "boolean":
        b = parse_bool(raw)
        return ("value = ?", ["true" if b else "false"]) if b is not None else literal
    if kind is None:
        n = parse_number(raw)
        if n is not None:  # adr:0042 finds adr: 42 even without a schema
            return ("(value = ? OR num = ?)", [raw.strip().lower(), n])
    return literal


def _parse_range(raw: str) -> tuple[str, str | None, str | None, str] | None:
    """(op, lo, hi, form) for a range token, else None."""
    s = raw.strip()
    m = _RANGE_OP.match(s)
    if m:
        return (m.group(1), m.group(2).strip(), None, "op")
    if ".." in s:
        lo, _, hi = s.partition("..")
        lo, hi = lo.strip(), hi.strip()
        if lo or hi:
            return ("..", lo or None, hi or None, "span")
    return None


def _typed_condition(kind: str, raw: str, rng) -> tuple[str, list[Any]] | None:
    lo_of: Callable[[str], float | str | None]
    hi_of: Callable[[str], float | str | None]
    if kind == "number":
        col, lo_of, hi_of = "num", parse_number, parse_number
    else:
        col, lo_of, hi_of = "date", _date_lo, _date_hi
    if rng is None:
        if kind == "number":
            n = parse_number(raw)
            return (f"{col} = ?", [n]) if n is not None else None
        span = date_span(raw)
        if span is None:
            return None
        return (f"{col} = ?", [span[0]]) if span[0] == span[1] else (f"{col} BETWEEN ? AND ?", list(span))
    op, a, b, form = rng
    if form == "op":
        lo, hi = lo_of(a), hi_of(a)
        if lo is None:
            return None
        table = {">=": (">=", lo), ">": (">", hi), "<=": ("<=", hi), "<": ("<", lo)}
        sym, bound = table[op]
        return (f"{col} {sym} ?", [bound])
    parts, params = [], []
    if a is not None:
        lo = lo_of(a)
        if lo is None:
            return None
        parts.append(f"{col} >= ?")
        params.append(lo)
    if b is not None:
        hi = hi_of(b)
        if hi is None:
            return None
        parts.append(f"{col} <= ?")
        params.append(hi)
    return ("(" + " AND ".join(parts) + ")", params)


def _date_lo(s: str) -> str | None:
    span = date_span(s)
    return span[0] if span else None


def _date_hi(s: str) -> str | None:
    span = date_span(s)
    return span[1] if span else None


def is_range(raw: str) -> bool:
    return _parse_range(raw) is not None
