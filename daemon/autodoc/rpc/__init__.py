"""The RPC stage: JSON-RPC 2.0 over stdio and a Unix socket.

Layers, each readable alone:

- framing.py   bytes ↔ frames (Content-Length or newline-delimited), pure
- schemas.py   the contract in schemas/: params binding and checking
- dispatch.py  JSON-RPC semantics (batches, notifications, ids, errors)
- methods.py   thin adapters over Service, behind named capacity limiters
- connection.py one peer: read, dispatch concurrently, write, cancel
- transport.py stdio streams, the socket path's rules
- server.py    transports, connections, the change feed, shutdown
"""
