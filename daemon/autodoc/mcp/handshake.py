"""What `autodoc mcp` says before any tool runs: its name, title and instructions, and the
answers to `initialize` and `tools/list` as the SDK gives them (fast.py sends them before the SDK
is imported; server.py hands the same name, title and instructions to the SDK).

Runs on: any thread (pure).
"""

from __future__ import annotations

from typing import Any

from .. import __version__
from .specs import TOOLS

TITLE = "AutoDoc knowledge base"
INSTRUCTIONS = (
    "AutoDoc searches the user's local Markdown knowledge base (notes, ADRs, runbooks, design docs). "
    "Use `search` first; cite hits by their `ref` (workspace:path#Lstart-end); `read` a ref for more context. "
    "When `answerable` is false, say the knowledge base does not cover it. After writing a note, `reindex` it; "
    "`save_session` keeps this conversation searchable for later sessions."
)
# mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS; the last is the SDK's answer to any other offer
HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
# server.py's create_initialization_options(NotificationOptions(resources_changed=True)), as sent
CAPABILITIES = {"resources": {"listChanged": True, "subscribe": True}, "tools": {"listChanged": False}}


def initialize_result(params: Any) -> dict[str, Any] | None:
    """The SDK's answer to `initialize` with these params (pure); None when they are not a plain
    offer (a wrong type, a missing field): the SDK answers those itself, with its own error."""
    if not isinstance(params, dict):
        return None
    version, caps, client = params.get("protocolVersion"), params.get("capabilities"), params.get("clientInfo")
    if not (isinstance(version, str) and isinstance(caps, dict) and isinstance(client, dict)):
        return None
    if not (isinstance(client.get("name"), str) and isinstance(client.get("version"), str)):
        return None
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": version if version in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
        "serverInfo": {"name": "autodoc", "title": TITLE, "version": __version__},
    }


def tools_list_result() -> dict[str, Any]:
    return {"tools": TOOLS}
