"""`autodoc mcp`: the store's tools and documents for AI agents, over the Model
Context Protocol (the official `mcp` SDK), on stdio or localhost HTTP.

- backend.py: where a call runs (the daemon's socket, a daemon started on
  demand, or a service in this process) and the forgiving name matching;
- args.py: tool arguments read the way a model writes them;
- specs.py: the tool list (names, descriptions and input schemas, for a model);
- tools.py, browse.py, answers.py: what each tool does and how its answer reads
  (toolkit.py: what the tools share);
- resources.py: documents as `autodoc://workspace/path` resources and the
  change feed as resource-updated notifications;
- server.py: the SDK server, its transports and the CLI's entry.

Runs on: the MCP server's event loop; store work on worker threads.
"""
