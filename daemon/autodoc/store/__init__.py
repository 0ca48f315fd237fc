"""Stage 3: the store — one SQLite file (apsw, WAL) for every workspace."""
