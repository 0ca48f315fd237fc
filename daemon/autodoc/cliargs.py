"""`autodoc …` as typed, read: the commands, their options and their help (`--help`), and in
`autodoc search` the query words told from its options (`-status:Living` is a word). cli.py
carries the parsed command out; `index`, `session` and `store` declare their own options
(indexcli.py, sessioncli.py, storecli.py).

Runs on: the main thread of the CLI.
"""

from __future__ import annotations

import argparse

from . import __version__, indexcli, sessioncli, storecli


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="autodoc", description="Local knowledge-base search daemon.")
    p.add_argument("--version", action="version", version=f"autodoc {__version__}")
    p.add_argument(
        "--store",
        help="store file, or a PostgreSQL database shared by a team (postgresql://…, 'host=… dbname=…', "
        "service=NAME; README, For a team) (default: $AUTODOC_STORE or the XDG data dir)",
    )
    p.add_argument("--socket", dest="socket_path", help="daemon socket (default: $AUTODOC_SOCKET or the runtime dir)")
    p.add_argument("--call", nargs=2, metavar=("METHOD", "JSON"), help="call one RPC method and print its JSON answer")
    p.add_argument("-v", "--verbose", action="store_true")
    sub = p.add_subparsers(dest="cmd")

    s = sub.add_parser("serve", help="run the daemon (stdio by default; --socket to listen on a Unix socket)")
    s.add_argument("--socket", dest="serve_socket", nargs="?", const="", default=None, metavar="PATH")
    s.add_argument("--stdio", action="store_true", help="also serve stdio when --socket is given")

    w = sub.add_parser("workspace", help="add, list, remove, configure workspaces")
    wsub = w.add_subparsers(dest="wcmd", required=True)
    a = wsub.add_parser("add", help="name a folder to index")
    a.add_argument("name")
    a.add_argument("path")
    a.add_argument("--config", help="workspace options as JSON")
    a.add_argument("--if-missing", action="store_true", help="do nothing when the workspace exists")
    a.add_argument("--force", action="store_true", help="accept / or the home folder itself as the root")
    wsub.add_parser("list", help="the workspaces, their roots and sizes")
    r = wsub.add_parser("remove", help="forget a workspace and its index (its files stay)")
    r.add_argument("name")
    st = wsub.add_parser(
        "status", help="what is indexed, skipped and embedded, of one workspace or every one (--json: the answer as is)"
    )
    st.add_argument("name", nargs="?", help="a workspace (default: every one)")
    st.add_argument("--json", action="store_true", help="print the answer exactly as the RPC returns it")
    c = wsub.add_parser("configure", help="set a workspace's options (JSON), or move its root (--root)")
    c.add_argument("name")
    c.add_argument("options", nargs="?", help="JSON object of options")
    c.add_argument(
        "--root",
        metavar="PATH",
        help="the folder moved here (a new checkout, a copied store, a renamed folder): the next index "
        "finds unchanged files unchanged, nothing is embedded again",
    )
    c.add_argument("--force", action="store_true", help="accept / or the home folder itself as the root")

    indexcli.add_parser(sub)

    q = sub.add_parser("search", help="search a workspace")
    q.add_argument("query", nargs="+")
    q.add_argument("-w", "--workspace", help="a workspace, a comma list (kb,notes), or '*' (the default: every one)")
    q.add_argument("-n", "--limit", type=int, default=10)
    q.add_argument("--stages", help="comma-separated: lexical,semantic,graph,rerank (default: all that can run)")
    q.add_argument("--json", action="store_true", help="print the answer exactly as the RPC returns it")
    q.add_argument("--compact", action="store_true", help="citable passages, one per document (opts.answer compact)")
    q.add_argument("--budget", type=int, help="the most tokens the answer may take (300..32000); implies --compact")
    q.add_argument(
        "--min-confidence",
        type=float,
        help="the relevance floor: hits under this confidence are held back unless they hold every "
        "word (default 0.03; 0 shows every hit)",
    )

    sub.add_parser(
        "lsp",
        help="run the language server on stdio (workspace symbols as search, links, "
        "backlinks, link completion, frontmatter diagnostics)",
    )
    dr = sub.add_parser(
        "doctor",
        help="check the store, lease, socket, model files, onnxruntime and workspace "
        "roots; print what is wrong and the command that fixes it",
    )
    dr.add_argument("--json", action="store_true", help="the checks as JSON")
    dr.add_argument(
        "--build-instant",
        action="store_true",
        help="distil the instant tier's token table now (else the first large index does)",
    )
    so = sub.add_parser(
        "socket",
        help="print the socket of the daemon serving the store, found as every client finds it "
        "(the store's lease); --start starts one when none does",
    )
    so.add_argument(
        "--start",
        action="store_true",
        help="when no daemon serves the store, start one (autodoc serve --socket, detached) and wait until it answers",
    )
    so.add_argument("--wait", type=float, default=15.0, metavar="S", help="with --start: how long to wait (15 s)")
    so.add_argument(
        "--json",
        action="store_true",
        help="socket (null when none), store (its password masked), store_from, pid, started, log, why",
    )
    t = sub.add_parser("tui", help="the terminal app: search as you type, open a document, add a workspace")
    t.add_argument("-w", "--workspace")
    t.add_argument("--in-process", action="store_true", help="do not start a daemon when none runs")
    m = sub.add_parser(
        "mcp",
        help="serve the knowledge base to AI agents over MCP (stdio; --http for localhost)",
        description="An MCP server with the tools search, read, outline, links, similar, list, "
        "changes, status, reindex, save_session and sessions, and every document as a resource "
        "(autodoc://WORKSPACE/PATH). It uses the daemon that holds the store when one "
        "runs, else starts one (autodoc serve --socket), so any number of agents share one index.",
    )
    m.add_argument(
        "--http",
        metavar="HOST:PORT",
        help="serve streamable HTTP on a loopback address (e.g. 127.0.0.1:8765; the endpoint is /mcp) instead of stdio",
    )
    m.add_argument(
        "--in-process",
        action="store_true",
        help="do not start a daemon when none runs: serve the store in this process (one agent at a time writes)",
    )
    m.add_argument("--spawn-daemon", action="store_true", help=argparse.SUPPRESS)  # the default now; old configs
    rd = sub.add_parser(
        "read",
        help="print a document or a line span of it: a ref as search prints it (WS:PATH#L10-15), or NAME PATH",
    )
    rd.add_argument("name", metavar="REF|NAME")
    rd.add_argument("path", nargs="?")
    rd.add_argument("--lines", help="START-END or START:END (1-based, inclusive), or one line")
    sessioncli.add_parser(sub)
    storecli.add_parser(sub)
    return p


def words_last(p: argparse.ArgumentParser, argv: list[str]) -> list[str]:
    """In `autodoc search`, a word that begins with one dash and is none of search's options is a
    query word (`-status:Living` negates a facet), not an unknown option: the words go after `--`,
    in their order, so argparse takes them as they are. Other commands are left as typed."""
    i = 0
    while i < len(argv) and argv[i] != "search":
        if argv[i] in ("--store", "--socket"):
            i += 1
        elif not argv[i].startswith("-") or argv[i] == "--call":
            return argv
        i += 1
    if i == len(argv):
        return argv
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    takes = {o: a.nargs != 0 for o, a in sub.choices["search"]._option_string_actions.items()}
    opts, words, j = [], [], i + 1
    while j < len(argv):
        t = argv[j]
        if t == "--":
            words += argv[j + 1 :]
            break
        name = t.split("=", 1)[0]
        if t.startswith("--"):  # a long option, maybe abbreviated (argparse resolves it)
            name = next((o for o in takes if o.startswith(name)), name) if name not in takes else name
        elif not (name in takes or (t[:2] in takes and takes[t[:2]] and t[2:].isdigit())):  # -n5
            words.append(t)
            j += 1
            continue
        opts.append(t)
        if takes.get(name) and "=" not in t and j + 1 < len(argv):
            opts.append(argv[j + 1])
            j += 1
        j += 1
    return argv[: i + 1] + opts + (["--", *words] if words else [])
