"""The ingest stage: markdown files → parsed documents → chunks (pure, no I/O except scan)."""

from .chunk import chunk_document
from .markdown import parse_markdown
from .scan import ScanEntry, SkipFile, entry_for, is_ignored, is_markdown_path, read_document, scan_workspace
from .tokens import wordpiece_tokens

__all__ = [
    "ScanEntry",
    "SkipFile",
    "chunk_document",
    "entry_for",
    "is_ignored",
    "is_markdown_path",
    "parse_markdown",
    "read_document",
    "scan_workspace",
    "wordpiece_tokens",
]
