"""AutoDoc: a local knowledge-base search daemon.

The package is laid out by pipeline stage: ingest (markdown → document →
chunks), store (SQLite via apsw), embed (providers + queue), search (query,
legs, fusion), rank (cross-encoders), rpc (JSON-RPC transports), lsp.
"""

__version__ = "0.1.0"
PROTOCOL_VERSION = "1.3"
