"""Docs that cannot drift: the generated blocks of docs/dev/THREADS.md and protocol/PROTOCOL.md are
fresh (tools/gen_docs.py), every module says where it runs, every method's params table is there,
and every file or module the developer docs name exists. All read at test time, so a module
moved, added or renamed is found wherever it lands."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "tools" / "gen_docs.py")
assert _spec is not None and _spec.loader is not None
gen_docs = importlib.util.module_from_spec(_spec)
sys.modules["gen_docs"] = gen_docs
_spec.loader.exec_module(gen_docs)

REFRESH = f"run `{gen_docs.COMMAND}` and commit the result"
PACKAGE = gen_docs.PACKAGE
DOCS = [
    *sorted((ROOT / "docs" / "dev").glob("*.md")),
    ROOT / "docs" / "architecture.md",
    *sorted((ROOT / "protocol").glob("*.md")),
]


def test_every_module_says_where_it_runs():
    missing = gen_docs.missing_runs_on()
    assert not missing, f"modules without a 'Runs on:' docstring line (docs/dev/THREADS.md): {missing}"


@pytest.mark.parametrize("doc", [gen_docs.THREADS, gen_docs.PROTOCOL], ids=lambda p: p.name)
def test_generated_blocks_are_fresh(doc):
    text = doc.read_text(encoding="utf-8")
    assert gen_docs.regenerate(doc) == text, f"{doc.relative_to(ROOT)}: generated blocks are stale; {REFRESH}"


def test_the_thread_map_has_its_generated_block():
    assert len(gen_docs.RUNS_ON_BLOCK.findall(gen_docs.THREADS.read_text(encoding="utf-8"))) == 1


def test_every_method_has_one_params_table_in_its_section():
    text = gen_docs.PROTOCOL.read_text(encoding="utf-8")
    blocks = gen_docs.params_blocks(text)
    schemas = sorted(p.name for p in gen_docs.SCHEMAS.glob("*.params.json"))
    assert sorted(gen_docs.schema_file(m).name for m in blocks) == schemas, (
        "protocol/PROTOCOL.md needs one `<!-- params: METHOD -->` … `<!-- /params -->` block per "
        f"schemas/*.params.json; then {REFRESH}"
    )
    for method in blocks:  # each under its own heading
        heading = text.rfind("\n### ", 0, text.index(f"<!-- params: {method} -->"))
        assert text.startswith(f"\n### `{method}`", heading), method


def test_a_params_table_says_what_the_schema_says():
    table = gen_docs.render_params("search.query")
    assert "| `opts.limit` | integer |  | 10 | 1..200 |" in table
    assert "| `workspace` | string | yes |" in table
    assert "| `opts.fusion.method` | rrf \\| convex \\| weighted |" in table
    assert gen_docs.render_params("server.info").startswith("No params.")


def test_runs_on_reads_the_whole_paragraph():
    source = '"""Thing.\n\nInput: x. Runs on: the event loop; the\nslow part on a thread.\n\nMore."""\n'
    assert gen_docs.runs_on(source) == "the event loop; the slow part on a thread."
    assert gen_docs.runs_on('"""No line here."""') is None


# --- names in the docs that must exist ----------------------------------------------------------

_PY_PATH = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w-]+\.py)\b")
_BACKTICKED = re.compile(r"`([^`\n]+)`")
_MODULE = re.compile(r"\bautodoc(?:\.\w+)+")
_FILE_SUFFIXES = {"db", "sock", "log", "json", "md", "txt", "toml", "yaml"}
_BASENAMES = {p.name for p in PACKAGE.rglob("*.py")} | {p.name for p in ROOT.glob("*/*.py")}


def _path_exists(token: str) -> bool:
    if "/" not in token:  # a bare file name: some module of that name
        return token in _BASENAMES
    candidates = [ROOT / token, PACKAGE / token]
    for prefix in ("daemon/autodoc/", "autodoc/"):
        if token.startswith(prefix):
            candidates.append(PACKAGE / token[len(prefix) :])
    return any(c.exists() for c in candidates)


def _module_exists(dotted: str) -> bool:
    parts = dotted.split(".")[1:]
    if parts[-1] in _FILE_SUFFIXES:
        return True  # autodoc.db: a file name, not a module

    def module(segs: list[str]) -> Path | None:
        base = PACKAGE.joinpath(*segs)
        for cand in (base.with_suffix(".py"), base / "__init__.py"):
            if cand.exists():
                return cand
        return None

    if module(parts):
        return True
    parent = module(parts[:-1]) if parts[:-1] else PACKAGE / "__init__.py"
    return parent is not None and re.search(rf"\b{re.escape(parts[-1])}\b", parent.read_text()) is not None


def named_in(doc: Path) -> tuple[list[str], list[str]]:
    """The .py paths and the backticked autodoc.x.y modules a doc names."""
    text = doc.read_text(encoding="utf-8")
    paths = sorted(set(_PY_PATH.findall(text)))
    modules = sorted({m for span in _BACKTICKED.findall(text) for m in _MODULE.findall(span)})
    return paths, modules


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_files_and_modules_a_doc_names_exist(doc):
    paths, modules = named_in(doc)
    gone = [p for p in paths if not _path_exists(p)] + [m for m in modules if not _module_exists(m)]
    assert not gone, f"{doc.relative_to(ROOT)} names files or modules that do not exist: {gone}"


# --- workspaceConfig's provider shapes are the validators' ---------------------------------------


def _config_errors(config: dict) -> list[str]:
    resources = []
    for path in gen_docs.SCHEMAS.glob("*.json"):
        schema = json.loads(path.read_text(encoding="utf-8"))
        resources.append((schema.get("$id", path.name), Resource.from_contents(schema)))
    registry = Registry().with_resources(resources)
    v = Draft202012Validator(
        {"$ref": "https://autodoc.invalid/schemas/defs.json#/$defs/workspaceConfig"}, registry=registry
    )
    return [e.message for e in v.iter_errors(config)]


EMBEDDINGS = [
    {},
    {"provider": "none"},
    {"provider": "onnx", "max_tokens": 128, "batch_size": None, "threads": 2},
    {"provider": "http", "url": "http://localhost:8080", "model": "m", "timeout": 5, "api_key_env": None, "dim": 384},
]
FUSIONS = [
    {"method": "rrf", "k": 10, "weights": {"lexical": 1.0, "semantic": 0.6}},
    {"method": "weighted", "threshold": 0.3},
    {"method": "convex", "weights": None},
    {},
]


@pytest.mark.parametrize("embedding", EMBEDDINGS)
@pytest.mark.parametrize("fusion", FUSIONS)
def test_a_config_the_validators_take_fits_the_schema(embedding, fusion):
    from autodoc.config import WorkspaceConfig, check_fusion
    from autodoc.embed.factory import validate_config

    validate_config(embedding)
    check_fusion("fusion", fusion)
    for ranker in ({}, {"provider": "none", "window": 20}, {"provider": "http", "url": "http://h", "api": "tei"}):
        config = {**WorkspaceConfig().to_json(), "embedding": embedding, "ranker": ranker, "fusion": fusion}
        assert _config_errors(config) == [], (embedding, ranker, fusion)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("embedding", {"provider": "http", "url": "http://h"}),  # no model
        ("embedding", {"provider": "onnx", "url": "http://h"}),  # an http option
        ("embedding", {"provider": "onnx", "max_tokens": 4}),
        ("ranker", {"provider": "onnx"}),  # no path
        ("ranker", {"provider": "http", "url": "ftp://h"}),
        ("fusion", {"method": "rrf", "k": 0}),
        ("fusion", {"weights": {"graph": 1.0}}),
    ],
)
def test_a_config_the_validators_refuse_does_not_fit(key, value):
    from autodoc.config import WorkspaceConfig

    assert _config_errors({**WorkspaceConfig().to_json(), key: value})
