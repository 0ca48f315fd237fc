"""The store stage: one SQLite file (apsw, WAL) behind the Store (store.py);
each module here owns the SQL of one kind of row."""

from .store import Store

__all__ = ["Store"]
