"""`autodoc lsp`: the knowledge base inside any editor, over the Language Server Protocol (pygls, stdio).

What it answers, each through the same RPC methods the daemon serves:

* workspace/symbol: a search (`search.query`); each hit is a symbol named by
  its breadcrumb, located at the exact lines it matched; what the relevance
  floor held back is counted in a window/logMessage.
* textDocument/definition on a `[[wikilink]]` or `[text](relative.md)` link:
  the document it resolves to (`document.links`); hover: its title and first lines.
* textDocument/references: the links that point at this document (`document.backlinks`).
* textDocument/completion after `[[`: documents found by the typed prefix,
  inserted as the wikilink target (with nothing typed yet: the workspace's
  documents in path order, for the editor to filter); after `#`: the
  workspace's tags (`workspace.tags`).
* diagnostics on open and save: why the document breaks the parser or the
  workspace schema (`document.problems`).

Where the calls run is connect.py's `Backend`: when a daemon holds the store and
listens on a socket, on that daemon (it watches the files itself); otherwise on
a Service in this process, which takes the writer lease, indexes a file when the
editor saves it and embeds its new sections in the background (`index_paths`);
a writer without a socket (a running `autodoc index`, say) leaves it a reader.
When the daemon it went to has gone, the backend chooses again once (the next
daemon's socket, or this process) and the call is retried.
A file outside every workspace gets no answers and one message saying why.

A workspace whose root is not a folder on this machine (a team's database, indexed by a daemon
on the machine that has the files) is answered from its stored text: each location is a
read-only copy of the document as stored (copies.py), so a symbol, a definition or a reference
opens at the lines it names, and links, hover and references work from inside the copy too. A
save of a copy is never indexed (its workspace's files are elsewhere).

A location spans whole lines, in the file or in its copy (locations.py).
pygls's own log (each message at INFO) is kept to warnings unless -v or
AUTODOC_LOG=debug asks for it; the server's own lines stay.

Runs on: pygls's event loop and its worker threads (handlers); saved files are indexed under the backend's write lock, and embedded on one thread per workspace (connect.py).
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, BinaryIO
from urllib.parse import unquote, urlparse

from lsprotocol import types as T
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..config import Settings
from ..connect import Backend
from ..errors import AutodocError, DocumentNotFound, WorkspaceNotFound
from ..ingest.inline import link_spans, reference_definitions, slug
from ..ingest.readfile import Refused, read_regular
from ..ingest.secrets import mask
from ..ingest.text import prepared_text
from .copies import Copies, copies_dir
from .locations import FileLines

log = logging.getLogger("autodoc.lsp")

SYMBOL_LIMIT = 50
COMPLETION_LIMIT = 20
BROWSE_LIMIT = 100  # documents `[[` offers before anything is typed (the editor filters them as you type)
HOVER_LINES = 12  # lines of the linked document a hover shows
SAVE_WAIT = 3.0  # seconds a daemon gets to index a saved file before its diagnostics are read
SAVED_MAX_BYTES = 64 << 20  # a saved file read to compare with the store: past any workspace's max_file_bytes
_OPEN_WIKI = re.compile(r"\[\[([^\[\]\n|#]*)$")
_OPEN_TAG = re.compile(r"(?<![\w&#/\\{])#([\w/-]*)$")  # as ingest/inline.py reads a #tag


def uri_path(uri: str) -> Path | None:
    u = urlparse(uri)
    return Path(unquote(u.path)) if u.scheme == "file" else None


class AutodocLanguageServer(LanguageServer):
    def __init__(self, settings: Settings):
        super().__init__("autodoc", __version__)
        self.settings = settings
        self._backend: Backend | None = None
        self._backend_lock = threading.Lock()
        self._roots: list[tuple[Path, str]] | None = None  # (root, workspace name), longest root first
        self._warned: set[str] = set()
        self.copies = Copies(copies_dir(settings))  # stored texts of documents not on this machine

    @property
    def backend(self) -> Backend:
        with self._backend_lock:  # handlers run on several threads; one backend, one lease
            if self._backend is None:
                self._backend = Backend(self.settings, name="lsp")
            return self._backend

    def call(self, method: str, params: list[Any]) -> Any:
        """A read (every method the server uses is one). The Service serves readers on any
        thread at once, as the daemon does, so reads do not wait for a save or a batch of
        embedding; only writes take the lock. pygls runs these handlers on worker threads."""
        return self.backend.call(method, params)

    def roots(self, refresh: bool = False) -> list[tuple[Path, str]]:
        if self._roots is None or refresh:
            listed = self.call("workspace.list", [])["workspaces"]
            self._roots = sorted(
                ((Path(w["root"]).resolve(), w["name"]) for w in listed), key=lambda r: -len(str(r[0]))
            )
        return self._roots

    def locate(self, uri: str) -> tuple[str, str, Path] | None:
        """(workspace, workspace-relative path, root) of a document, or None (said once per file).
        A copy of a stored document (copies.py) is located as the document it copies."""
        path = uri_path(uri)
        if path is None:
            return None
        path = path.resolve()
        copied = self.copies.locate(path)
        if copied is not None:
            name, rel = copied
            for root, known in self.roots():
                if known == name:
                    return name, rel, root
        for refresh in (False, True):
            for root, name in self.roots(refresh):
                if path.is_relative_to(root):
                    return name, path.relative_to(root).as_posix(), root
        if uri not in self._warned:
            self._warned.add(uri)
            self.window_show_message(
                T.ShowMessageParams(
                    type=T.MessageType.Info,
                    # the store named: an editor that starts the server without the shell's
                    # AUTODOC_STORE looks in another one, and every answer is then empty
                    message=f"AutoDoc: {path} is in no workspace of the store {self.settings.store_named()} "
                    + (
                        # a team's database: its roots are the indexer's folders, and a reader may add none
                        "(a shared store's workspaces are folders on the indexer's machine: workspace "
                        "symbols search them and open read-only copies of the stored text; links, hover "
                        "and diagnostics work in those copies, or in a file under a root on this machine)"
                        if self.settings.postgres
                        else "(add one: autodoc workspace add NAME PATH)"
                    ),
                )
            )
        return None

    def ws_call(self, method: str, params: list[Any]) -> Any:
        """A call naming a workspace: a workspace removed (or a nested one added) since the
        roots were read makes them be read again before the error reaches the editor."""
        try:
            return self.call(method, params)
        except WorkspaceNotFound:
            self._roots = None
            raise

    def workspaces_in_view(self) -> list[tuple[Path, str]]:
        """The workspaces under or around the editor's folders; all of them when none matches."""
        folders = [p.resolve() for p in (uri_path(f.uri) for f in self.workspace.folders.values()) if p]
        if self.workspace.root_path:
            folders.append(Path(self.workspace.root_path).resolve())
        roots = self.roots()
        near = [(r, n) for r, n in roots if any(r.is_relative_to(f) or f.is_relative_to(r) for f in folders)]
        return near or roots


def build_server(settings: Settings) -> AutodocLanguageServer:
    server = AutodocLanguageServer(settings)

    @server.feature(T.WORKSPACE_SYMBOL)
    @server.thread()
    def workspace_symbol(ls: AutodocLanguageServer, params: T.WorkspaceSymbolParams):
        query = params.query.strip()
        if not query:
            return []
        out: list[T.SymbolInformation] = []
        files = FileLines(ls)
        held = 0
        for root, name in ls.workspaces_in_view():
            # a symbol is a place in a file: sessions (session.append) are not
            # the server holds back hits that stop matching (the relevance floor): what is left are the
            # symbols, whether or not the workspace's vectors are in yet
            answer = ls.ws_call("search.query", [name, query, {"limit": SYMBOL_LIMIT, "scope": "files"}])
            held += answer.get("held_back", 0)
            for h in answer["hits"]:
                where = files.document(name, root, h["path"], h["line_start"], h["line_end"], h["generation"])
                if where is None:
                    continue  # removed since the search: nothing to open
                out.append(
                    T.SymbolInformation(
                        name=h["breadcrumb"] or h["path"],
                        kind=T.SymbolKind.String,
                        container_name=f"{name}:{h['path']}:{h['line_start']}",
                        location=where,
                    )
                )
        if held:  # a symbol list has no place for it: the client's log does (every client reports it)
            ls.window_log_message(
                T.LogMessageParams(
                    type=T.MessageType.Info,
                    message=f"AutoDoc: {query!r}: {len(out)} symbols; {held} weak hits held back by the "
                    "relevance floor (passages that stopped matching the query)",
                )
            )
        return out

    def linked(ls: AutodocLanguageServer, uri: str, position: T.Position) -> tuple[str, Path, dict] | None:
        """(workspace, root, the stored link) for the link under the cursor, if it resolves."""
        where = ls.locate(uri)
        if where is None:
            return None
        name, rel, root = where
        line, col = _cursor(ls, uri, position)
        # a [text][label] or [label] use is a link only where the document defines label
        defs = reference_definitions(ls.workspace.get_text_document(uri).source) if "[" in line else None
        under = [k for start, end, k in link_spans(line, position.line + 1, defs) if start <= col < end]
        if not under and ("[" in line or "]" in line):  # a label wrapped onto the line before or after
            near = ls.workspace.get_text_document(uri).lines
            before = near[position.line - 1].rstrip("\r\n") if position.line > 0 else ""
            after = near[position.line + 1].rstrip("\r\n") if position.line + 1 < len(near) else ""
            at = len(before) + 1 + col
            text = f"{before}\n{line}\n{after}"
            under = [k for start, end, k in link_spans(text, position.line + 1, defs) if start <= at < end]
        if not under:
            return None
        link = under[0]
        try:
            links = ls.ws_call("document.links", [name, rel])["links"]
        except DocumentNotFound:  # a new file, not saved (so not indexed) yet
            return None
        rows = [k for k in links if k["target"] == link.target and k["kind"] == link.kind and k["target_path"]]
        if not rows:
            return None  # a broken link, or one written since the last save
        # the same link on the same line, else the same target elsewhere (lines move as the buffer is edited)
        rows.sort(key=lambda k: (k["line"] != link.line, abs(k["line"] - link.line)))
        return name, root, rows[0]

    @server.feature(T.TEXT_DOCUMENT_DEFINITION)
    @server.thread()
    def definition(ls: AutodocLanguageServer, params: T.DefinitionParams):
        found = linked(ls, params.text_document.uri, params.position)
        if found is None:
            return None
        name, root, link = found
        line = 1
        if link["anchor"]:  # [x](guide.md#next-steps), [[Guide#Next steps]]: that heading
            try:
                line = _heading_line(
                    ls.ws_call("document.outline", [name, link["target_path"]])["headings"], link["anchor"]
                )
            except DocumentNotFound:
                pass
        return FileLines(ls).document(name, root, link["target_path"], line, line)

    @server.feature(T.TEXT_DOCUMENT_HOVER)
    @server.thread()
    def hover(ls: AutodocLanguageServer, params: T.HoverParams):
        found = linked(ls, params.text_document.uri, params.position)
        if found is None:
            return None
        name, _, link = found
        head = ls.ws_call("document.read", [name, link["target_path"], {"line_start": 1, "line_end": HOVER_LINES}])
        more = "\n\n…" if head["line_end"] < head["total_lines"] else ""
        text = (
            f"**{link['target_title'] or link['target_path']}** · `{link['target_path']}`\n\n"
            f"```markdown\n{head['text'].rstrip()}\n```{more}"
        )
        return T.Hover(contents=T.MarkupContent(kind=T.MarkupKind.Markdown, value=text))

    @server.feature(T.TEXT_DOCUMENT_REFERENCES)
    @server.thread()
    def references(ls: AutodocLanguageServer, params: T.ReferenceParams):
        where = ls.locate(params.text_document.uri)
        if where is None:
            return []
        name, rel, root = where
        try:
            back = ls.ws_call("document.backlinks", [name, rel])["backlinks"]
        except DocumentNotFound:
            return []
        files = FileLines(ls)
        found = (files.document(name, root, b["source_path"], b["line"], b["line"]) for b in back)
        return [loc for loc in found if loc is not None]

    @server.feature(T.TEXT_DOCUMENT_COMPLETION, T.CompletionOptions(trigger_characters=["[", "#"]))
    @server.thread()
    def completion(ls: AutodocLanguageServer, params: T.CompletionParams):
        where = ls.locate(params.text_document.uri)
        if where is None:
            return None
        name, rel, _ = where
        uri, pos = params.text_document.uri, params.position
        line, col = _cursor(ls, uri, pos)
        before = line[:col]
        m = _OPEN_WIKI.search(before)
        t = None if m else _tag_context(before)
        if t is not None:
            tags = ls.ws_call("workspace.tags", [name, t, COMPLETION_LIMIT])["tags"]
            span = _span(ls, uri, pos, col - len(t))  # the typed part is replaced, `/` and `-` included
            return T.CompletionList(
                is_incomplete=True,
                items=[
                    T.CompletionItem(
                        label=x["tag"],
                        kind=T.CompletionItemKind.Keyword,
                        text_edit=T.TextEdit(range=span, new_text=x["tag"]),
                        detail=f"{x['documents']} document{'s' if x['documents'] != 1 else ''}",
                        sort_text=f"{i:04d}",
                    )
                    for i, x in enumerate(tags)
                ],
            )
        if m is None:
            return None
        prefix = m.group(1).strip()
        if prefix:
            opts: dict[str, Any] = {"stages": ["lexical"], "limit": 50, "scope": "files"}
            answer = ls.ws_call("search.query", [name, prefix + "*", opts])
        else:  # nothing typed: a list of the notes (a browse, in path order), filtered by the editor as you type
            answer = ls.ws_call("search.query", [name, "", {"limit": BROWSE_LIMIT + 1, "scope": "files"}])
        span = _span(ls, uri, pos, col - len(m.group(1)))
        items: list[T.CompletionItem] = []
        for h, target in link_targets(answer["hits"], prefix, rel)[: COMPLETION_LIMIT if prefix else BROWSE_LIMIT]:
            items.append(
                T.CompletionItem(
                    label=target,
                    kind=T.CompletionItemKind.File,
                    detail=h["path"],
                    documentation=h["snippet"],
                    text_edit=T.TextEdit(range=span, new_text=target),
                    sort_text=f"{len(items):04d}",
                    filter_text=f"{target.rsplit('/', 1)[-1]} {target} {h['breadcrumb']}",
                )
            )
        return T.CompletionList(is_incomplete=True, items=items)

    def publish(ls: AutodocLanguageServer, uri: str, saved: bool = False) -> None:
        where = ls.locate(uri)
        if where is None:
            return
        name, rel, root = where
        here = uri_path(uri) or root / rel  # the file itself, or a copy of the stored text
        if saved and ls.copies.locate(here.resolve()) is None and not ls.backend.index_paths(name, [rel]):
            _await_index(ls, name, rel, uri)  # a daemon, or another writer, indexes it
        try:
            problems = ls.ws_call("document.problems", [name, rel])["problems"]
        except (AutodocError, OSError) as e:  # not indexed (yet, or skipped as too large)
            log.info("no problems for %s: %s", rel, e)
            problems = []
        files = FileLines(ls)
        ls.text_document_publish_diagnostics(
            T.PublishDiagnosticsParams(
                uri=uri,
                diagnostics=[
                    T.Diagnostic(
                        range=files.range(here, max(p.get("line") or 1, 1), max(p.get("line") or 1, 1)),
                        message=p["message"],
                        severity=T.DiagnosticSeverity.Warning,
                        source="autodoc",
                        code=p.get("code"),
                    )
                    for p in problems
                    if p.get("path") in (None, rel)
                ],
            )
        )

    @server.feature(T.TEXT_DOCUMENT_DID_OPEN)
    @server.thread()
    def did_open(ls: AutodocLanguageServer, params: T.DidOpenTextDocumentParams):
        publish(ls, params.text_document.uri)

    @server.feature(T.TEXT_DOCUMENT_DID_SAVE)
    @server.thread()
    def did_save(ls: AutodocLanguageServer, params: T.DidSaveTextDocumentParams):
        publish(ls, params.text_document.uri, saved=True)

    @server.feature(T.SHUTDOWN)
    def shutdown(ls: AutodocLanguageServer, params: Any):
        if ls._backend is not None:
            ls._backend.close()

    return server


def _await_index(ls: AutodocLanguageServer, name: str, rel: str, uri: str) -> None:
    """A daemon indexes a saved file from its own watcher: wait (a little) until the
    store holds what is on disk, so the diagnostics are the saved file's."""
    path = uri_path(uri)
    if not path:
        return
    try:
        data = read_regular(path, max_bytes=SAVED_MAX_BYTES).data
    except (OSError, Refused):  # a FIFO or device is never waited on (ingest/readfile.py)
        return
    # the store holds the indexed text (bad bytes replaced, secrets masked when the workspace
    # masks them), not the file's bytes: either form means the save is in (prepared once, then masked)
    plain = prepared_text(rel, data, redact=False)[0]
    want = {plain, mask(plain)[0]}
    deadline = time.monotonic() + SAVE_WAIT
    while time.monotonic() < deadline:
        try:
            if ls.ws_call("document.read", [name, rel])["text"] in want:
                return
        except AutodocError:
            pass  # not indexed yet (a new file)
        time.sleep(0.05)
    log.info("%s: the daemon had not indexed the saved file after %.0f s", rel, SAVE_WAIT)


def link_targets(hits: list[dict[str, Any]], prefix: str, rel: str) -> list[tuple[dict[str, Any], str]]:
    """(hit, what to insert) per document, for `[[prefix`: documents whose file name or title
    starts with the prefix first, then those that contain it, then the rest in search order (the
    search matches bodies too: a trial typing `[[rec` found recommended-extensions 10th, behind
    pages that mention recipes). A file name two of these documents share is inserted as the
    path without its extension, which resolves to that one document (store/links.py); the bare
    name would not. (Only these documents are compared: the prefix search finds the ones so named.)"""
    want = prefix.casefold()
    docs: dict[str, dict[str, Any]] = {}
    for h in hits:
        if h["path"] != rel:
            docs.setdefault(h["path"], h)

    def stem(path: str) -> str:
        return path.rsplit("/", 1)[-1].rsplit(".", 1)[0]

    def rank(h: dict[str, Any]) -> int:
        names = (stem(h["path"]).casefold(), (h.get("title") or "").casefold())
        return 0 if any(n.startswith(want) for n in names) else 1 if any(want in n for n in names) else 2

    ordered = sorted(docs.values(), key=rank)  # stable: search order within each rank
    shared = Counter(stem(p).casefold() for p in docs)  # the resolver compares names without case
    return [
        (h, h["path"].rsplit(".", 1)[0] if shared[stem(h["path"]).casefold()] > 1 else stem(h["path"])) for h in ordered
    ]


def _tag_context(before: str) -> str | None:
    """The tag typed so far when the cursor ends a #tag the indexer would read, else None:
    not in a code span, not in a link's target (`](#anchor`), not a lone # opening a line
    (a heading)."""
    t = _OPEN_TAG.search(before)
    if t is None or (not t.group(1) and not before[: t.start()].strip()):
        return None
    if before.count("`") % 2:
        return None  # inside `code` (a closed span cannot end where the tag does)
    for opener, closer in (("](", ")"), ("[[", "]]")):
        at = before.rfind(opener)
        if at >= 0 and closer not in before[at:]:
            return None  # a link's destination or a wikilink's #anchor
    return t.group(1)


def _heading_line(sections: list[dict[str, Any]], anchor: str) -> int:
    """The line of the heading a #fragment names (its anchor, the slug of the fragment, or its
    title), else 1."""
    want = {anchor.lower(), slug(anchor)}
    stack = list(reversed(sections))
    while stack:
        s = stack.pop()
        if s["anchor"].lower() in want or s["title"].lower() == anchor.lower():
            return int(s["line_start"])
        stack.extend(reversed(s["children"]))
    return 1


def _span(ls: LanguageServer, uri: str, pos: T.Position, start_char: int) -> T.Range:
    """From a character column on the cursor's line to the cursor, in the client's units."""
    doc = ls.workspace.get_text_document(uri)
    start = doc.position_codec.position_to_client_units(doc.lines, T.Position(line=pos.line, character=start_char))
    return T.Range(start=start, end=pos)


def _cursor(ls: LanguageServer, uri: str, pos: T.Position) -> tuple[str, int]:
    """The cursor's line and its column in characters (the client counts in UTF-16 or UTF-8 units)."""
    doc = ls.workspace.get_text_document(uri)
    lines = doc.lines
    if not 0 <= pos.line < len(lines):
        return "", 0
    col = doc.position_codec.position_from_client_units(lines, pos).character
    return lines[pos.line].rstrip("\r\n"), col


def serve(settings: Settings, streams: tuple[BinaryIO, BinaryIO] | None = None) -> int:
    """pygls on stdio, or on `streams` (the pipes fast.py serves it on)."""
    if logging.getLogger().getEffectiveLevel() > logging.DEBUG:
        logging.getLogger("pygls").setLevel(logging.WARNING)  # each message at INFO: not a status line
    server = build_server(settings)
    server.start_io(*(streams or ()))
    return 0
