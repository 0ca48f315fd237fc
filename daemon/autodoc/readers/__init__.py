"""The reader processes: searches run in processes of their own, one per core, so that
several clients use several cores (a search is mostly Python under the GIL).

- pool.py           the daemon's side: starts, feeds and replaces the readers (event loop)
- channel.py        the daemon's end of one reader's socket (frames in asyncio's callback)
- reader.py         one reader process: the method table on a read-only Service
- invalidations.py  what a reader is told of the daemon's cache changes, compacted
- shared_vectors.py the vector bases the daemon shares with them in /dev/shm

The RPC layer (rpc/route.py) decides which calls come here; it sees the pool only as
the ``Offload`` it is handed in its constructor (daemon.py builds both).
"""
