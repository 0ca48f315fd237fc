"""Per-workspace settings (workspace.configure), stored in the store and
changed atomically; validated once, when they are set. Per-request options
override them for one search only (search/options.py).

Runs on: any thread (frozen values; validation runs when a workspace is added or configured).
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from ..errors import InvalidParams
from .defaults import MARKDOWN_FILES, MAX_FILE_BYTES, RRF_K, RRF_WEIGHTS, SECTION_TOKENS

log = logging.getLogger("autodoc.config")

# The options `site_roots` and `page_suffixes` (store/links.py): where a site-absolute link
# ("/docs/concepts/") is looked for after the workspace root (Hugo's content/en and content,
# Middleman's source, a GitHub Pages or Jekyll docs/), and the endings a page's file has past
# its address (Middleman's .html.md, Hugo's .md), longest first. A link only resolves where a
# document is, so a root or an ending a workspace does not use costs nothing.
SITE_ROOTS = ("content/en", "content", "source", "docs", "src/content/docs")
PAGE_SUFFIXES = (".html.md.erb", ".html.markdown", ".html.md", ".md.erb", ".markdown", ".mdown", ".mkd", ".mdx", ".md")


@dataclass(frozen=True)
class WorkspaceConfig:
    """Per-workspace options (workspace.configure). Unknown keys are refused."""

    # what the workspace holds, in a sentence, for an agent choosing among several (MCP `status`)
    description: str = ""
    section_tokens: int = SECTION_TOKENS
    abstract_chunk: bool = True
    demote_superseded: bool = True
    # how links resolve as the site renders them: see SITE_ROOTS, PAGE_SUFFIXES
    site_roots: list[str] = field(default_factory=lambda: list(SITE_ROOTS))
    page_suffixes: list[str] = field(default_factory=lambda: list(PAGE_SUFFIXES))
    max_file_bytes: int = MAX_FILE_BYTES
    # which files are Markdown: extensions (".md") or globs ("*.html.md.erb", ".github/**/*.md");
    # a hidden file or folder only through a glob that names it (ingest/scan.py)
    markdown: list[str] = field(default_factory=lambda: list(MARKDOWN_FILES))
    # mask API keys, tokens, private keys and passwords before they are indexed (ingest/secrets.py)
    redact_secrets: bool = True
    # embedding: {"provider": "onnx"|"http"|"none", ...provider options}
    embedding: dict[str, Any] = field(default_factory=lambda: {"provider": "onnx"})
    # ranker: {"provider": "none"|"onnx"|"http", "window": 40, ...}
    ranker: dict[str, Any] = field(default_factory=lambda: {"provider": "none"})
    # fusion: {"method": "rrf", "k": 10, "weights": {...}} or {"method": "convex" | "weighted", ...}
    fusion: dict[str, Any] = field(default_factory=lambda: {"method": "rrf", "k": RRF_K, "weights": dict(RRF_WEIGHTS)})
    # The options the user set. Only these are stored: a default left alone follows the
    # defaults of the AutoDoc that runs, so a better default reaches workspaces added before it.
    chosen: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    def to_json(self) -> dict[str, Any]:
        """Every option as the workspace runs it (defaults filled)."""
        out = asdict(self)
        del out["chosen"]
        return out

    def stored(self) -> dict[str, Any]:
        """What the store keeps: the options the user set."""
        full = self.to_json()
        return {k: full[k] for k in sorted(self.chosen)}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> WorkspaceConfig:
        """A stored configuration, as it was validated when it was written. Not
        checked again: a ranker folder that vanished since must fail that stage,
        not every call on the workspace."""
        given = {k: as_ints(k, v) for k, v in (data or {}).items() if k in OPTIONS}
        for key in INTEGER_OPTIONS & set(given):
            if not isinstance(given[key], int) or isinstance(given[key], bool):  # no params edge ever let it in
                log.warning("stored option %s=%r is not an integer: running the default", key, given.pop(key))
        return cls(**given, chosen=frozenset(given))

    def merged(self, options: dict[str, Any], prefix: str = "options") -> WorkspaceConfig:
        """These options over this configuration. Their types and ranges were checked by the
        method's JSON Schema (workspaceOptions); fusion's, which a schema cannot check, are checked
        here. That a provider can be built from `embedding` or `ranker` is the providers' own check,
        made above this layer before merging (workspaces.configured): config imports no provider."""
        changes = {k: as_ints(k, v) for k, v in options.items()}
        if "fusion" in changes:
            check_fusion(f"{prefix}.fusion", changes["fusion"])
        if "site_roots" in changes:
            changes["site_roots"] = check_site_roots(f"{prefix}.site_roots", changes["site_roots"])
        if "page_suffixes" in changes:
            changes["page_suffixes"] = check_page_suffixes(f"{prefix}.page_suffixes", changes["page_suffixes"])
        if "markdown" in changes:
            changes["markdown"] = check_markdown(f"{prefix}.markdown", changes["markdown"])
        return replace(self, **changes, chosen=self.chosen | set(changes))


OPTIONS = frozenset(f.name for f in fields(WorkspaceConfig)) - {"chosen"}
# The options (and options of an option) that are integers. A float with an integer value there
# (100.0: stored by AutoDoc before the params edge bound it, or written by hand) is run as the int.
INTEGER_OPTIONS = frozenset({"section_tokens", "max_file_bytes"})
INTEGER_SUBOPTIONS = {"ranker": frozenset({"window"}), "fusion": frozenset({"k"})}


def _int(value: Any) -> Any:
    return int(value) if type(value) is float and value.is_integer() else value


def as_ints(key: str, value: Any) -> Any:
    """Option `key`'s value with an integer-valued float bound to its int, where the option is an integer."""
    if key in INTEGER_OPTIONS:
        return _int(value)
    subs = INTEGER_SUBOPTIONS.get(key)
    if subs and isinstance(value, dict) and any(k in value for k in subs):
        return {k: _int(v) if k in subs else v for k, v in value.items()}
    return value


def check_markdown(name: str, value: list[str]) -> list[str]:
    """The `markdown` entries as stored: trimmed, duplicates dropped; an entry that could never
    match a file inside the workspace is refused (the schema bounds their number and length)."""
    out: list[str] = []
    for i, raw in enumerate(value):
        entry = raw.strip()
        parts = entry.replace("\\", "/").split("/")
        if not entry or entry in (".", "/") or ".." in parts or "\0" in entry:
            raise InvalidParams(f"{name}[{i}]", "must be an extension such as .md or a glob such as *.html.md.erb")
        if entry not in out:
            out.append(entry)
    return out


def check_site_roots(name: str, value: list[str]) -> list[str]:
    """Site roots as stored: workspace-relative folders without leading or trailing slashes,
    in the order given, duplicates dropped; one outside the workspace is refused."""
    out: list[str] = []
    for i, raw in enumerate(value):
        root = raw.replace("\\", "/").strip().strip("/")
        if ".." in root.split("/") or "\0" in root:
            raise InvalidParams(f"{name}[{i}]", "must be a folder inside the workspace, such as content/en")
        if root and root != "." and root not in out:
            out.append(root)
    return out


def check_page_suffixes(name: str, value: list[str]) -> list[str]:
    """Page suffixes as stored: lowercased, each starting with a dot, longest first (".html.md"
    is tried before ".md"), duplicates dropped."""
    out: set[str] = set()
    for i, raw in enumerate(value):
        suffix = raw.strip().lower()
        if not suffix.startswith(".") or len(suffix) < 2 or "/" in suffix or "\0" in suffix:
            raise InvalidParams(f"{name}[{i}]", "must be a file ending such as .md or .html.md")
        out.add(suffix)
    return sorted(out, key=lambda s: (-len(s), s))


FUSION_METHODS = ("rrf", "convex", "weighted")


def check_fusion(name: str, value: dict[str, Any]) -> None:
    """A stored fusion is checked when it is set: the workspaceOptions schema names only its method."""
    method = value.get("method", "rrf")
    if method not in FUSION_METHODS:
        raise InvalidParams(f"{name}.method", 'must be "rrf", "convex" or "weighted"')
    k = value.get("k", RRF_K)
    if not isinstance(k, int) or isinstance(k, bool) or not (1 <= k <= 1000):
        raise InvalidParams(f"{name}.k", "must be an integer in 1..1000")
    weights = value.get("weights")
    if weights is not None and (
        not isinstance(weights, dict)
        or not all(
            w in ("lexical", "semantic") and isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 10
            for w, v in weights.items()
        )
    ):
        raise InvalidParams(f"{name}.weights", "must map lexical/semantic to numbers in 0..10")
    t = value.get("threshold", 0.2)
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not (0 <= t <= 1):
        raise InvalidParams(f"{name}.threshold", "must be a number in 0..1")
    unknown = set(value) - {"method", "k", "weights", "threshold"}
    if unknown:
        raise InvalidParams(f"{name}.{sorted(unknown)[0]}", "unknown fusion option")


def normalise_fusion(value: dict[str, Any]) -> dict[str, Any]:
    """A checked fusion with its defaults filled: what the search runs."""
    method = value.get("method", "rrf")
    out: dict[str, Any] = {"method": method}
    if method == "rrf":
        out["k"] = value.get("k", RRF_K)
    if value.get("weights") is not None:
        out["weights"] = {k: float(v) for k, v in value["weights"].items()}
    if method == "weighted":
        out["threshold"] = float(value.get("threshold", 0.2))
    return out
