"""Stage 1–2: markdown files → parsed documents → chunks (pure, no I/O except scan)."""
