"""`autodoc session …`: import a transcript into a workspace's session scope, list the sessions, or remove one.

`autodoc session import WORKSPACE FILE.jsonl [--session-id ID] [--title T]`
reads the transcript (ingest/transcript.py) and sends its events with
session.append, in batches that stay far below the frame limit; `autodoc
session remove WORKSPACE ID` is session.remove, `autodoc session list
WORKSPACE` session.list (one line per session). Both go to the daemon when one
holds the store, else run in this process (connect.py), like every command.

Runs on: the main thread of the CLI.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .config import Settings
from .connect import call

if TYPE_CHECKING:
    from .ingest.transcript import Transcript

BATCH_EVENTS = 1000
BATCH_CHARS = 4_000_000  # well under the 16 MiB frame limit, even with JSON escapes
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,199}$")


class SessionUsage(Exception):
    """What the command line asked cannot be done as written; the message says why."""


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "session",
        help="index conversations (a transcript's messages and responses) beside a workspace's files, or remove one",
    )
    ssub = s.add_subparsers(dest="scmd", required=True)
    im = ssub.add_parser(
        "import",
        help="index a JSONL transcript as one session (tool calls, tool results, status and errors are skipped)",
    )
    im.add_argument("workspace")
    im.add_argument("file", help="JSONL: {role, content} lines, Claude Code transcripts, or {id, kind, text, time}")
    im.add_argument("--session-id", help="default: the transcript's sessionId, else the file's name")
    im.add_argument("--title", help="default: the transcript's summary, else the first line of the first message")
    rm = ssub.add_parser("remove", help="remove a session from a workspace")
    rm.add_argument("workspace")
    rm.add_argument("session_id")
    ls = ssub.add_parser("list", help="the sessions of a workspace, in id order")
    ls.add_argument("workspace")


# a transcript is read whole, as every file is (ingest/readfile.py): a long agent session is tens of MB
MAX_TRANSCRIPT_BYTES = 256 << 20


def _events_only(lines: list[str], unread: list[int]) -> Iterator[str]:
    """The lines, a line that is no JSON object blanked (parse_transcript passes over blank lines,
    keeping the others' numbers) and its number kept in `unread`: one torn or stray line of a
    long transcript is skipped and reported, not the whole file refused."""
    for lineno, line in enumerate(lines, 1):
        try:
            ok = not line.strip() or isinstance(json.loads(line), dict)
        except ValueError:
            ok = False
        if not ok:
            unread.append(lineno)
        yield line if ok else ""


def _read_transcript(path: Path, unread: list[int]) -> Transcript:
    """The parsed transcript, or SessionUsage: read through the one reader, so a FIFO or a
    device given as the file is refused instead of blocking or filling memory; the numbers of
    the lines that are no JSON event go to `unread`."""
    from .ingest.readfile import Refused, read_regular  # ingest/: only to import a transcript
    from .ingest.transcript import TranscriptError, parse_transcript

    try:
        text = read_regular(path, max_bytes=MAX_TRANSCRIPT_BYTES).data.decode("utf-8")
        # the lines open() would give (universal newlines): str.splitlines() also cuts at U+2028,
        # which a JSON string may hold unescaped
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        return parse_transcript(_events_only(lines, unread))
    except Refused as e:
        raise SessionUsage(f"cannot read {path}: {e.reason}") from None
    except OSError as e:
        raise SessionUsage(f"cannot read {path}: {e.strerror or e}") from None
    except UnicodeDecodeError as e:
        raise SessionUsage(f"{path} is not UTF-8 text (byte {e.start})") from None
    except TranscriptError as e:
        raise SessionUsage(f"{path}: {e}") from None


def _unread(unread: list[int]) -> str:
    shown = ", ".join(map(str, unread[:20])) + (f" and {len(unread) - 20} more" if len(unread) > 20 else "")
    return f"{len(unread)} line{'s' if len(unread) > 1 else ''} skipped (not a JSON event: line{'s' if len(unread) > 1 else ''} {shown})"


def _session_id(given: str | None, found: str | None, file: Path) -> str:
    if given is not None:
        return given  # session.append's schema says what is wrong with it, if anything
    for candidate in (found, file.stem):
        if candidate and _SESSION_ID.match(candidate):
            return candidate
    cleaned = re.sub(r"[^A-Za-z0-9._:@+=-]+", "-", file.stem).strip("-._:@+=")[:200]
    if not cleaned:
        raise SessionUsage(f"{file.name} gives no usable session id: pass --session-id")
    return cleaned


def _batches(events: list[dict[str, Any]]):
    batch: list[dict[str, Any]] = []
    size = 0
    for e in events:
        n = len(e.get("text") or "") + 200
        if batch and (len(batch) >= BATCH_EVENTS or size + n > BATCH_CHARS):
            yield batch
            batch, size = [], 0
        batch.append(e)
        size += n
    if batch:
        yield batch


EXIT_USAGE = 2  # as cli.py's


def run(args: argparse.Namespace, settings: Settings) -> int:
    """0 when done, 2 for a command line that cannot be carried out (the RPC's own errors
    propagate, for cli.main to report like any command's)."""
    try:
        return _run(args, settings)
    except SessionUsage as e:
        print(f"autodoc: {e}", file=sys.stderr)
        return EXIT_USAGE


def _run(args: argparse.Namespace, settings: Settings) -> int:
    if args.scmd == "list":
        after = None
        while True:  # every page: a terminal list is read whole
            page = call(settings, "session.list", {"workspace": args.workspace, "after": after, "limit": 1000})
            for x in page["sessions"]:
                when = x["last_time"] or "-"
                print(f"{x['session_id']}\t{x['events']} events\t{when}\t{x['title'] or ''}")
            if (after := page["next_cursor"]) is None:
                return 0
    if args.scmd == "remove":
        gone = call(settings, "session.remove", {"workspace": args.workspace, "session_id": args.session_id})
        print(f"removed session {gone['session_id']} ({gone['events']} events, {gone['chunks']} chunks)")
        return 0
    path = Path(args.file)
    unread: list[int] = []
    transcript = _read_transcript(path, unread)
    if unread and not transcript.events:
        raise SessionUsage(f"no line of {path} is a JSON event object (line {unread[0]} is not)")
    sid = _session_id(args.session_id, transcript.session_id, path)
    title = args.title or transcript.title
    totals: dict[str, int] = {"appended": 0, "indexed": 0, "new": 0, "replaced": 0, "unchanged": 0}
    skipped: dict[str, int] = {}
    out: dict[str, Any] = {}
    for batch in _batches(transcript.events) if transcript.events else [[]]:
        params: dict[str, Any] = {"workspace": args.workspace, "session_id": sid, "events": batch}
        if title:
            params["title"] = title
        out = call(settings, "session.append", params)
        for k in totals:
            totals[k] += out[k]
        for reason, n in out["skipped"].items():
            skipped[reason] = skipped.get(reason, 0) + n
    for eid in transcript.cut:
        print(f"  event {eid}: text cut to its first 1 MiB characters", file=sys.stderr)
    why = ", ".join(f"{r} {n}" for r, n in sorted(skipped.items()))
    print(
        f"session {sid} in {args.workspace}: {totals['appended']} events read, {totals['indexed']} indexed "
        f"({totals['new']} new, {totals['replaced']} replaced, {totals['unchanged']} unchanged), "
        f"{sum(skipped.values())} skipped{f' ({why})' if why else ''}; "
        f"the session holds {out.get('events', 0)} events in {out.get('chunks', 0)} chunks at {out.get('path')}"
        + (f"; {_unread(unread)}" if unread else "")
    )
    return 0
