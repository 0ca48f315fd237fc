"""Hostile-but-real input for the ingest layer (issue 16): text cases and a tree of odd files.

text_cases(): documents as str, each with the problem codes parsing must
report and the line the first names. Cases meant to catch super-linear
parsing (repeated=True) repeat one line of LONG characters k times, k chosen
from what the paths this replaced cost on such a line (measured: 2 to over
300 s per line for most, about 7 s for "a.a.a…:" and 2 s for backtick runs of
every length), so that the old code would run past pytest's 120 s timeout
while linear parsing takes about a second. No test is timed; the timeout is
the bound. Chunking, linear in the same way but slower per character, is
checked on the first line of those cases, cut to SAMPLE characters.

write_tree(root): odd files on disk (encodings, BOMs, line endings, NUL, a
3 MB file, FIFO, socket, device, names that are not UTF-8, symlink loops,
unreadable files) and, for each, what a scan-read-parse must conclude.
"""

from __future__ import annotations

import os
import socket
import stat
from dataclasses import dataclass
from pathlib import Path

from autodoc.ingest.frontmatter import MAX_FRONTMATTER_CHARS, MAX_FRONTMATTER_DEPTH
from autodoc.ingest.markdown import MAX_HEADINGS, MAX_LINE_CHARS

LONG = 90_000  # under MAX_LINE_CHARS, so the line is really parsed
SAMPLE = 20_000
assert LONG < MAX_LINE_CHARS


@dataclass(frozen=True)
class TextCase:
    name: str
    text: str
    codes: tuple[str, ...] = ()  # problem codes that must be among the reported ones
    line: int | None = None  # the line the first problem with codes[0] names
    frontmatter: dict | None = None  # expected frontmatter items (a subset)
    repeated: bool = False  # one long line k times: parse it all, chunk a sample


def sample(case: TextCase) -> str:
    """What to chunk of a case: all of it, or the start of the first line of a repeated one."""
    return case.text.split("\n", 1)[0][:SAMPLE] + "\n" if case.repeated else case.text


def _fm(body: str) -> str:
    return f"---\n{body}---\n# Title\n\nSome body text.\n"


def _repeat(name: str, line: str, k: int = 2) -> TextCase:
    return TextCase(name, "\n".join([line] * k) + "\n", repeated=True)


def alias_bomb() -> str:
    """The 'billion laughs' frontmatter: 9 levels of 9 aliases, 9^9 strings once expanded."""
    rows = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for k in "bcdefghi":
        prev = chr(ord(k) - 1)
        rows.append(f"{k}: &{k} [" + ",".join([f"*{prev}"] * 9) + "]")
    return "\n".join(rows) + "\n"


def text_cases() -> list[TextCase]:
    deep_flow = "a: " + "[" * 500 + "]" * 500 + "\n"
    deep_block = "".join(" " * i + f"k{i}:\n" for i in range(200))
    return [
        # --- frontmatter values YAML cannot construct: kept as text, with the line
        TextCase(
            "impossible-date",
            _fm("title: T\ndate: 2020-01-45\n"),
            ("frontmatter",),
            3,
            {"title": "T", "date": "2020-01-45"},
        ),
        TextCase(
            "feb-30", _fm("date: 2020-02-30\ntags: [a]\n"), ("frontmatter",), 2, {"date": "2020-02-30", "tags": ["a"]}
        ),
        TextCase(
            "giant-int", _fm("title: T\nn: " + "7" * 5000 + "\n"), ("frontmatter",), 3, {"title": "T", "n": "7" * 5000}
        ),
        TextCase(
            "int-past-64-bit",
            _fm("n: 123456789012345678901234567890\n"),
            ("frontmatter",),
            2,
            {"n": "123456789012345678901234567890"},
        ),
        TextCase("bad-explicit-int", _fm("n: !!int twelve\nok: 1\n"), ("frontmatter",), 2, {"n": "twelve", "ok": 1}),
        TextCase("bell-character", _fm("title: T\nnote: ring\x07 ring\n"), ("frontmatter",), 3, {"title": "T"}),
        TextCase("nul-in-frontmatter", _fm("title: T\x00\n"), ("frontmatter",), 2),
        TextCase("list-as-key", _fm("? [a, b]\n: 1\ntitle: T\n"), ("frontmatter",), 2, {"[a, b]": 1, "title": "T"}),
        TextCase("mapping-as-key", _fm("? {a: 1}\n: x\n"), ("frontmatter",), 2, {"{a: 1}": "x"}),
        TextCase(
            "scalar-keys",
            _fm("404: page\nnull: n\ntrue: t\n2020-01-01: d\n"),
            (),
            None,
            {"404": "page", "null": "n", "true": "t", "2020-01-01": "d"},
        ),
        TextCase(
            "unknown-tag",
            _fm("a: !ruby/object x\nb: !!python/object:os.system y\n"),
            ("frontmatter",),
            2,
            {"a": "x", "b": "y"},
        ),
        TextCase("duplicate-key", _fm("title: A\ntitle: B\n"), ("frontmatter",), 3, {"title": "B"}),
        TextCase("bad-merge", _fm("<<: 5\nx: 1\n"), ("frontmatter",), 2, {"x": 1}),
        TextCase("broken-yaml", _fm("bad yaml: [\n"), ("frontmatter",), 3),
        TextCase("frontmatter-is-a-list", _fm("- a\n- b\n"), ("frontmatter",), 2),
        TextCase("unclosed-frontmatter", "---\ntitle: T\n# Heading\n\nbody\n", ("frontmatter",), 1),
        # --- resource limits in frontmatter
        TextCase("alias-bomb", _fm(alias_bomb()), ("limit",), None, {"a": ["lol"] * 9}),
        TextCase("recursive-alias", _fm("a: &a [*a]\nb: 1\n"), ("limit",), 2, {"a": None, "b": 1}),
        TextCase("deep-flow-yaml", _fm(deep_flow), ("limit",), 2),
        TextCase("deep-block-yaml", _fm(deep_block), ("limit",), MAX_FRONTMATTER_DEPTH + 1),
        TextCase("deep-flow-yaml-huge", _fm("a: " + "[" * 60_000 + "\n"), ("limit",), 2),
        TextCase("frontmatter-too-big", _fm("k: v\n" * (MAX_FRONTMATTER_CHARS // 5 + 1)), ("limit",), 2),
        # --- lines and structure
        TextCase("heading-of-spaces", "# " + " " * 200_000 + "\nbody\n", ("limit",), 1),
        _repeat("heading-spaces-then-word", "# a" + " " * LONG + "x"),
        _repeat("heading-spaces-then-brace", "# a" + " " * LONG + "{x"),
        _repeat("heading-of-backticks", "# " + "`" * LONG),
        _repeat("backtick-runs-of-every-length", " ".join("`" * k for k in range(1, 420)), 48),
        _repeat("heading-of-underscores", "# " + "_" * LONG + "a"),
        _repeat("heading-closing-hashes", "# a" + "#" * LONG + "x"),
        _repeat("thematic-then-spaces", "- " * (LONG // 4) + " " * (LONG // 2) + "x"),
        _repeat("open-brackets", "[" * LONG),
        _repeat("link-then-spaces", "see [a](" + " " * LONG + "x"),
        _repeat("heading-link-then-spaces", "# [a](" + " " * LONG + "x"),
        _repeat("dotted-words-and-colon", "a." * (LONG // 2) + ":", 24),
        _repeat("dashed-words-after-colon", "x: " + "a-" * (LONG // 2), 24),
        _repeat("many-wikilinks", "[[a]] " * (LONG // 6)),
        _repeat("many-links", "[a](b.md) " * (LONG // 10)),
        _repeat("many-tags", "#a " * (LONG // 3)),
        _repeat("reference-definition-spaces", "[a]:" + " " * LONG),
        _repeat("html-openers", "# " + "<a " * (LONG // 3)),
        _repeat("escapes", "# " + "\\*" * (LONG // 2)),
        TextCase("dots-without-space", "Words " * 500 + "." * 200_000 + "x end.\n"),
        TextCase("one-huge-line", ("word " * 60_000) + "\n", ("limit",), 1),
        TextCase("long-heading", "# " + "word " * 400 + "\n\nbody\n", ("limit",), 1),
        TextCase("many-headings", "# h\n\ntext\n" * (MAX_HEADINGS + 5000), ("limit",), 3 * MAX_HEADINGS + 1),
        TextCase("many-setext-headings", "title\n-----\n" * 12_000, ("limit",), 2 * MAX_HEADINGS + 1),
        TextCase("unclosed-fence", "# T\n\n```python\n" + "x = 1\n" * 5000),
        TextCase("fences-only", "```\n```\n" * 20_000),
        TextCase("many-sections", ("## Section\n\nA paragraph with a [link](x.md) and #tag. " * 4 + "\n\n") * 2_000),
        # --- encodings and line ends, as text
        TextCase("bom-then-heading", "\ufeff# Title\n\nbody\n"),
        TextCase("bom-then-frontmatter", "\ufeff---\ntitle: T\n---\nbody\n", (), None, {"title": "T"}),
        TextCase("crlf", "---\r\ntitle: T\r\n---\r\n# H\r\n\r\nbody\r\n", (), None, {"title": "T"}),
        TextCase("mixed-line-ends", "# A\r\ntext\n## B\r\nmore\n"),
        TextCase("cr-only", "# A\rtext\r## B\rmore\r", ("encoding",), 1),
        TextCase("nul-in-body", "# A\n\nbefore\x00after\n", ("encoding",), 3),
        TextCase("lone-surrogate", "# A\n\ntext \ud800 more\n", ("encoding",), 3),
        TextCase("empty", ""),
        TextCase("only-whitespace", " \n\t\n\n"),
        TextCase("only-frontmatter", "---\ntitle: T\n---\n", (), None, {"title": "T"}),
    ]


@dataclass(frozen=True)
class FileCase:
    relpath: str  # as the scan reports it (non-UTF-8 bytes shown as \xNN)
    reason: str | None  # substring of the skip reason; None: read and indexed


def write_tree(root: Path, *, max_bytes: int) -> list[FileCase]:
    """Write the odd files under root (a fresh folder); what a scan-read-parse must make of each."""
    root.mkdir(parents=True, exist_ok=True)
    cases: list[FileCase] = []

    def put(rel: str, data: bytes, reason: str | None = None) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
        cases.append(FileCase(rel, reason))

    put("good.md", b"# Good\n\nA findable paragraph about lighthouses.\n")
    # a byte-order mark says how to read the file: indexed, with an encoding problem (issue 35)
    put("utf16le.md", "\ufeff---\ntitle: T\n---\n# x\r\n".encode("utf-16-le"))
    put("utf16be.md", "\ufeff# x\n".encode("utf-16-be"))
    put("utf32.md", "\ufeff# x\n".encode("utf-32-le"))
    put("utf8-bom.md", "\ufeff---\ntitle: BOM\n---\n# x\n".encode())
    put("crlf.md", b"# A\r\n\r\ntext\r\n")
    put("cr-only.md", b"# A\rtext\r")
    put("nul-early.md", b"# A\n\0\n", "NUL byte")
    put("nul-late.md", b"# A\n\n" + b"x" * 9000 + b"\0\n")
    put("latin1.md", "# caf\u00e9\n".encode("latin-1"))  # its bad byte replaced by U+FFFD (issue 35)
    put("empty.md", b"")
    put("big-3mb.md", (b"## S\n\n" + b"A sentence of prose. " * 20 + b"\n\n") * 6900)
    put("too-big.md", b"x" * (max_bytes + 1), "larger than")
    put("bad-date.md", b"---\ndate: 2020-02-30\n---\n# D\n")
    put("alias-bomb.md", f"---\n{alias_bomb()}---\n# B\n".encode())
    put("deep-yaml.md", b"---\na: " + b"[" * 500 + b"]" * 500 + b"\n---\n# D\n")
    put("bell.md", b"---\ntitle: a\x07b\n---\n# B\n")
    put("heading-spaces.md", b"# " + b" " * 200_000 + b"x\n")
    for odd in (
        "+/%# +.md",
        "escape-+ #%20[].md",
        "sp ace.md",
        "trailing-dots....md",
        "caf\u00e9-\u6587.md",
        "new\nline.md",
        "-dash.md",
        "tab\there.md",
    ):
        put(odd, b"# odd name\n")
    d = root
    for _ in range(300):  # deeper than the old recursive walk would care for, well within PATH_MAX
        d = d / "d"
    d.mkdir(parents=True)
    (d / "deep.md").write_bytes(b"# deep\n")
    cases.append(FileCase(str((d / "deep.md").relative_to(root)), None))

    bad_name = os.fsencode(str(root)) + b"/bad-\xff\xfe.md"
    with open(bad_name, "wb") as fh:
        fh.write(b"# bad name\n")
    cases.append(FileCase("bad-\\xff\\xfe.md", "not valid UTF-8"))

    os.mkfifo(root / "fifo.md")
    cases.append(FileCase("fifo.md", "FIFO"))
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(str(root / "socket.md"))
        cases.append(FileCase("socket.md", "socket"))
    finally:
        sock.close()  # the file stays: what matters is its type
    try:
        os.mknod(root / "device.md", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # /dev/null's numbers
        cases.append(FileCase("device.md", "character device"))
    except (PermissionError, OSError):
        pass  # needs CAP_MKNOD: covered where the tests run as root

    os.symlink("loop-b.md", root / "loop-a.md")
    os.symlink("loop-a.md", root / "loop-b.md")
    os.symlink("self.md", root / "self.md")
    os.symlink("fifo.md", root / "to-fifo.md")
    os.symlink("good.md", root / "to-good.md")
    os.symlink("/etc/hostname", root / "to-outside.md")
    os.symlink("/", root / "to-root")  # a linked folder is never walked
    cases += [
        FileCase("loop-a.md", "loops"),
        FileCase("loop-b.md", "loops"),
        FileCase("self.md", "loops"),
        FileCase("to-fifo.md", "FIFO"),
        FileCase("to-good.md", None),
        FileCase("to-outside.md", "outside"),
        FileCase("to-root/", "folder outside the workspace"),
    ]

    if os.geteuid() != 0:  # root reads a chmod 000 file anyway
        put("unreadable.md", b"# secret\n", "unreadable")
        os.chmod(root / "unreadable.md", 0)
        (root / "locked").mkdir()
        (root / "locked" / "in.md").write_bytes(b"# in\n")
        os.chmod(root / "locked", 0)
        cases.append(FileCase("locked/", "folder is unreadable"))
    return cases


def restore_permissions(root: Path) -> None:
    """Let pytest's tmp_path clean-up delete what write_tree locked."""
    for p in (root / "unreadable.md", root / "locked"):
        if p.exists() and not p.is_symlink():
            os.chmod(p, 0o700)
