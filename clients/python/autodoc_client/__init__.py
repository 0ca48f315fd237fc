"""Python client for the AutoDoc daemon's JSON-RPC (see protocol/PROTOCOL.md)."""

from .client import (
    Client,
    ConnectionClosed,
    Notification,
    RemoteError,
    call_socket,
)

__all__ = ["Client", "ConnectionClosed", "Notification", "RemoteError", "call_socket"]
