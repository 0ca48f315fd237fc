"""The RPC stage: JSON-RPC 2.0 over stdio and a Unix socket.

Layers, each readable alone:

- framing.py   bytes ↔ frames (Content-Length or newline-delimited), pure
- schemas.py   the contract in schemas/: params binding (schema defaults filled) and checking
- dispatch.py  JSON-RPC semantics (batches, notifications, ids, errors: ``error_for``)
- route.py     where each call runs, from its row in api.py's table (the one decision)
- inline.py    the rule for running a quick read on the event loop, and its counters
- quick.py     the quick lane and the thread lane: a lone quick read without a task
- methods.py   the table's rows as handlers; the few the daemon answers itself
- connection.py one peer: read, dispatch concurrently, write, cancel
- outbox.py    one connection's writes, from the loop or a lane thread
- transport.py stdio streams, the socket path's rules
- server.py    transports, connections, the change feed, shutdown
- bridge.py    a stdio daemon that forwards to another daemon's socket

The reader processes a search may run in are a package of their own (readers/),
handed to the server as its ``pool``; rpc/ imports neither store/ nor search/.
"""
