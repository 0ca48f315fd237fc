"""The service: one object that composes the pipeline for every adapter.

It owns the Store (store/), the index job (index/), the embed queue
(embed/queue.py), the semantic leg and its vector cache (search/), and the
loaded models (embed/providers.py, rerank/rankers.py). RPC, LSP, CLI and the
other adapters reach it through the method table (api.py). Each public method
takes params its method's JSON Schema has checked (the binding in rpc/ and
connect.py does it, once; the checks here are the ones a schema cannot
make: a root that is a folder, a path inside the workspace, a field some
document has) and returns JSON-safe data shaped as schemas/<method>.result.json.

The class holds the pieces and their lifetimes; the answers are composed by stage:
workspaces.py (finding a workspace by name, checking a root and options, the list and
status shapes), documents.py (paths, spans, the document.* shapes), index/ (index and
sessions), embed/status.py (semantic coverage), search/ (the search and its answer). The
store is reached through its seam (store/interface.py), never a database driver.

Runs on: any thread. Reads use the calling thread's read connection, one
snapshot per method; writes are serialised by the store's write lock and
exist only while this process holds the store's lease. The semantic leg's
model and vector scan run on a small pool beside the lexical leg.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from . import PROTOCOL_VERSION, __version__
from . import documents as docs
from . import workspaces as wss
from .config import Settings, WorkspaceConfig
from .embed.instant import InstantTiers
from .embed.providers import Providers
from .embed.queue import EmbedQueue
from .embed.status import embedding_status, index_embedding, summary
from .fmschema import SCHEMA_RELPATH
from .index.job import IndexJob, Progress
from .index.session import SessionIndex
from .peers import ChangeListener, Peers
from .rerank.rankers import Rankers
from .search import compact, engine
from .search.lexical import legproc
from .search.lexical.legproc import LexicalHelper
from .search.options import parse_options
from .search.rerank import rank_step
from .search.semantic.leg import SemanticLeg
from .search.semantic.vector_cache import VectorCache
from .search.similar import SimilarOptions, similar
from .store import changes as changelog
from .store import documents as stored_docs
from .store import hits as stored_hits
from .store import open_store, reads
from .store import workspaces as wsrows
from .store.facets import active_schema
from .store.interface import Snapshot, StoreInterface
from .store.lease import Lease
from .store.links import LinkResolver
from .store.workspaces import Workspace

LEG_THREADS = 4


def _config(ws: Workspace) -> WorkspaceConfig:
    return wss.config_of(ws)


class Service:
    def __init__(
        self, settings: Settings, *, writer: bool = True, holder: dict[str, Any] | None = None, feed: bool = True
    ):
        self.settings = settings
        self.store_path = settings.store
        # a database has no file beside it for the store to lease: a writer here takes the lease this
        # machine's clients find its daemon by (config/settings.py lease_file); the database itself
        # keeps its writers apart (store/pg/indexlock.py)
        self._lease = Lease(settings.store, holder) if writer and settings.postgres else None
        try:
            self.store: StoreInterface = open_store(settings.store, writer=writer, holder=holder)
        except BaseException:
            if self._lease is not None:
                self._lease.release()
            raise
        self.closed = False
        # (what, workspace) → (store generation, value): facts readers derive once per generation
        self._per_generation: dict[tuple[str, int], tuple[int, Any]] = {}
        self.providers = Providers()
        self.rankers = Rankers()
        self.vectors = VectorCache()
        self.on_invalidate: Callable[..., None] = lambda *item: None  # the daemon's reader processes (readers/pool.py)
        self.searches_elsewhere = 0  # searches running in the reader processes now (readers/pool.py)
        self.links = LinkResolver()
        # answers by meaning while a model's vectors fill (embed/instant.py)
        self.instant = InstantTiers(settings.instant_dir) if settings.instant_dir else None
        self.embed_queue = EmbedQueue(
            self.store,
            self.providers,
            lambda ws: _config(ws).embedding,
            on_vectors=self._vectors_changed,
            busy=self._searching,
            instant=self.instant,
            on_dropped=self._model_dropped,
        )
        self.semantic = SemanticLeg(self.providers, self.vectors, self.embed_queue.pending, self.instant)
        counter = lambda ws: self.providers.token_counter(_config(ws).embedding)  # noqa: E731
        self.indexer = IndexJob(
            self.store,
            self.links,
            token_counter=counter,
            written=self._written,
            tokenizer_id=self.providers.tokenizer_id,
        )
        self.sessions = SessionIndex(self.store, counter, self._written)
        self._pool = ThreadPoolExecutor(max_workers=LEG_THREADS, thread_name_prefix="autodoc-leg")
        # the listeners here, and the change feed of the daemons sharing a PostgreSQL store (peers.py)
        self.peers = Peers(self.store, self.links, self._vectors_changed, self._forget, feed=feed)
        self.lexical_helper = LexicalHelper(settings.store) if legproc.enabled() else None  # search/lexical/legproc.py

    # -- plumbing ------------------------------------------------------------

    @property
    def writable(self) -> bool:
        return self.store.writable

    def set_holder(self, holder: dict[str, Any]) -> None:
        self.store.set_holder(holder)
        if self._lease is not None:
            self._lease.update(holder)

    def add_change_listener(self, fn: ChangeListener) -> None:
        self.peers.listen(fn)

    def remove_change_listener(self, fn: ChangeListener) -> None:
        self.peers.unlisten(fn)

    def _written(self, ws: Workspace, changes: list[dict], documents: list[int]) -> None:
        """After an index transaction commits: vectors to refresh, listeners to tell."""
        if not changes:
            return
        self._vectors_changed(ws.id, documents)
        self.peers.tell(ws.name, changes)

    def _searching(self) -> bool:
        """A search is using a core now, here or in a reader: the embed queue yields to it."""
        return self.semantic.busy or self.searches_elsewhere > 0

    def _vectors_changed(self, ws_id: int, documents: list[int] | None) -> None:
        self.vectors.mark_dirty(ws_id, documents)
        self.embed_queue.changed(ws_id)
        self.on_invalidate("vectors", ws_id, documents)

    def _forget(self, ws_id: int) -> None:
        self.vectors.forget(ws_id)
        self.embed_queue.forget(ws_id)  # nothing settled survives a removal
        self.on_invalidate("forget", ws_id)

    def _model_dropped(self, ws_id: int, fp: str) -> None:
        self.vectors.forget_model(ws_id, fp)
        self.on_invalidate("model", ws_id, fp)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.peers.stop()
        self.embed_queue.stop()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self.lexical_helper is not None:
            self.lexical_helper.close()
        self.rankers.close()
        self.store.close()
        if self._lease is not None:
            self._lease.release()

    def _ws(self, name: Any, field: str = "workspace") -> Workspace:
        with self.store.read() as db:
            return wss.find(db, name, field)

    # -- workspaces ------------------------------------------------------------

    def workspace_add(
        self, name: str, root: str, config: dict[str, Any] | None = None, force: bool = False
    ) -> dict[str, Any]:
        path = wss.check_root(root, force)
        cfg = wss.configured(WorkspaceConfig(), config or {}, prefix="config")
        with self.store.write() as db:
            ws = wsrows.add_workspace(db, name, str(path), cfg.stored())
            self.peers.announce(db, ws.id, "added")  # the other daemons sharing the store watch it, tell their clients
            return wss.describe(db, ws)

    def workspace_remove(self, name: Any) -> dict[str, Any]:
        with self.store.write() as db:
            ws = wss.find(db, name, "name")
            documents = wsrows.remove_workspace(db, ws)
            self.peers.announce(db, ws.id, "removed")  # the other daemons sharing the store drop what they keep of it
        self._forget(ws.id)
        self.links.forget(ws.id)
        return {"removed": ws.name, "documents": documents}

    def workspace_list(self) -> dict[str, Any]:
        with self.store.read() as db:
            return {"workspaces": [wss.describe(db, wsrows.get_workspace(db, n)) for n in wsrows.workspace_names(db)]}

    def workspace_configure(
        self, name: str, options: dict[str, Any] | None = None, root: str | None = None, force: bool = False
    ) -> dict[str, Any]:
        # a new root is only stored: documents keep their workspace-relative paths, so the next index
        # finds the files that kept theirs and their bytes unchanged (nothing re-cut or re-embedded)
        moved = str(wss.check_root(root, force)) if root is not None else None
        with self.store.locked():
            with self.store.write() as db:
                ws = wss.find(db, name)
                old = _config(ws)
                new = wss.configured(old, options or {})
                if moved is not None and moved != ws.root:
                    wsrows.set_root(db, ws, moved)
                elif new.stored() == ws.config:
                    # nothing changes (CI's configure --root of the same checkout): the daemons
                    # sharing the store are not woken to look at the roots again for it
                    return wss.describe(db, ws)
                wsrows.set_config(db, ws, new.stored())
                self.peers.announce(db, ws.id, "configured")
                if (new.site_roots, new.page_suffixes) != (old.site_roots, old.page_suffixes):
                    self.links.reconfigure(db, ws.id)  # the name tables hold the old site layout
            if new.embedding != old.embedding:
                self._forget(ws.id)
            if self.indexer.chunking(new) != self.indexer.chunking(old):
                self.index(ws.name)  # it re-chunks files and sessions (unchanged chunks keep their rows)
            elif new.markdown != old.markdown:
                self.index(ws.name)  # files the new rule takes in are added, those it leaves out removed
            with self.store.read() as db:
                return wss.describe(db, wsrows.get_workspace(db, ws.name))

    def workspace_section_size(self, name: Any, tokens: Any) -> dict[str, Any]:
        return self.workspace_configure(name, {"section_tokens": tokens})

    def workspace_tags(self, name: str, prefix: str | None = None, limit: int = 1000) -> dict[str, Any]:
        """{workspace, tags: [{tag, documents}]}: every tag (frontmatter and inline, lowercased)
        with how many documents carry it, most used first; `prefix` keeps those beginning with it."""
        with self.store.read() as db:
            ws = wss.find(db, name)
            rows = wsrows.tag_counts(db, ws, (prefix or "").lower(), limit)
        return {"workspace": ws.name, "tags": [{"tag": t, "documents": n} for t, n in rows]}

    def workspace_status(self, name: Any) -> dict[str, Any]:
        with self.store.read() as db:  # one snapshot for every count
            ws = wss.find(db, name)
            stored = wss.stored_status(db, ws, self._embedding_status)
        return wss.status(ws, stored, self.rankers.status, writable=self.store.writable)

    def workspaces(self) -> list[str]:
        with self.store.read() as db:
            return wsrows.workspace_names(db)

    def workspace_roots(self) -> dict[str, str]:
        """Each workspace's root, without workspace_list's counts (0.7 s at 1M chunks)."""
        with self.store.read() as db:
            return dict(wsrows.workspace_roots(db))

    def workspace_indexed(self, name: Any) -> bool:
        """Whether an index run of the workspace has ended (it records what its chunks were cut with)."""
        with self.store.read() as db:
            return wsrows.chunking(db, self._ws(name).id) is not None

    def stored_under(self, name: Any, folders: list[str]) -> list[str]:
        """The files indexed under these folders (a folder that appears may replace one that held them)."""
        with self.store.read() as db:
            return stored_docs.paths_under(db, self._ws(name).id, folders)

    def stale_in(self, name: Any, folders: list[str]) -> list[str]:
        """What a whole index would read again in these folders (job.py `stale`): saved in a restart."""
        return self.indexer.stale(self._ws(name), folders)

    def workspace_markdown(self) -> dict[str, list[str]]:
        """Each workspace's `markdown` option (which files are Markdown), for the live index."""
        with self.store.read() as db:
            return {n: _config(wsrows.get_workspace(db, n)).markdown for n in wsrows.workspace_names(db)}

    # -- indexing ----------------------------------------------------------------

    def index(
        self, name: Any, *, full: bool = False, progress: Progress | None = None, embed: bool = False
    ) -> dict[str, Any]:
        """Scan the workspace and bring the store in line with the disk (index/job.py);
        with `embed`, embed what is pending before answering (the CLI's in-process run)."""
        self.store.check_writable()  # a read-only service cannot index: say so before scanning
        ws = self._ws(name)
        with self.store.read() as db:
            recorded = wsrows.chunking(db, ws.id)
        report = self.indexer.run(ws, full=full, progress=progress).to_json()
        if recorded != self.indexer.chunking(_config(ws)):
            # the run re-cut every file (a new tokenizer or section size, or a configure a crash cut
            # short): sessions are cut again too, by the config the run just recorded
            self.sessions.rechunk(self._ws(name))
        if embed:
            report["embedding"] = self.embed_pending(report["workspace"], progress)
        else:
            st = self.embedding_status_by_name(report["workspace"])
            report["embedding"] = index_embedding(st, st["embedded"])
        return report

    def index_paths(self, name: Any, relpaths: list[str]) -> dict[str, Any]:
        """Live index: bring just these workspace-relative paths up to date."""
        return self.indexer.paths(self._ws(name), relpaths).to_json()

    def session_append(self, name: Any, session_id: str, events: list[dict], title: str | None = None) -> dict:
        """Index a session's conversation events (index/session.py)."""
        return self.sessions.append(self._ws(name), session_id, events, title)

    def session_remove(self, name: Any, session_id: str) -> dict[str, Any]:
        return self.sessions.remove(self._ws(name), session_id)

    def session_list(self, name: Any, after: str | None = None, limit: int = 100) -> dict[str, Any]:
        return self.sessions.list(self._ws(name), after, limit)

    # -- embeddings ----------------------------------------------------------------

    def _embedding_status(self, db: Snapshot, ws: Workspace, load: bool = True) -> dict[str, Any]:
        """What semantic coverage really is, and what is coming (embed/status.py); a team
        database's reader never embeds."""
        embeds = self.writable or not self.settings.postgres
        cfg = _config(ws).embedding
        return embedding_status(db, ws, cfg, self.providers, self.embed_queue, load=load, embeds=embeds)

    def embedding_status_by_name(self, name: Any) -> dict[str, Any]:
        with self.store.read() as db:
            return self._embedding_status(db, wss.find(db, name))

    def embed_step(self, name: Any, batch: int = 16) -> dict[str, Any]:
        """One batch of the embed queue for a workspace."""
        return self.embed_queue.step(self._ws(name), batch)

    def embed_pending(self, name: Any, progress: Progress | None = None) -> dict[str, Any]:
        """Embed everything pending for a workspace now (the CLI's in-process path)."""
        total = self.embedding_status_by_name(name)["pending"]
        done = [0]

        def advanced(n: int) -> None:
            done[0] += n
            if progress and total:
                progress(min(done[0], total), total, "embedding")

        # large steps: the provider sorts each by length into batches, so less padding
        self.embed_queue.work([name], until_idle=True, batch=256, progress=advanced)
        return index_embedding(self.embedding_status_by_name(name), done[0])

    # -- search ---------------------------------------------------------------------

    def _cached(self, what: str, ws: Workspace, gen: int, compute: Callable[[], Any]) -> Any:
        """A fact derived from the store, computed once per store generation."""
        hit = self._per_generation.get((what, ws.id))
        if hit and hit[0] == gen:
            return hit[1]
        value = compute()
        self._per_generation[(what, ws.id)] = (gen, value)
        return value

    def _fields(self, db: Snapshot, ws: Workspace, gen: int) -> tuple[set[str], dict[str, str] | None]:
        """The fields a facet may name, and their kinds (None: no workspace schema types them)."""
        schema = active_schema(db, ws.id)
        if schema:
            return schema.declared, schema.kinds
        return self._cached("fields", ws, gen, lambda: wsrows.known_fields(db, ws.id)), None

    def search(
        self, name: str, query: str, opts: dict[str, Any] | None = None, *, cancel: threading.Event | None = None
    ) -> dict[str, Any]:
        since = self.vectors.marker()  # before the snapshot: what is marked after may postdate it
        with self.store.read() as db:  # one read snapshot for the whole search
            ws = wss.find(db, name)
            cfg = _config(ws)
            shape = compact.request(opts)  # the answer's shape; the engine gets enough hits for it
            options = parse_options(compact.engine_opts(opts, shape), cfg)
            rank, rank_model = rank_step(self.rankers, cfg.ranker, cancel)
            gen = wsrows.store_generation(db)
            known, kinds = self._fields(db, ws, gen)
            ctx = engine.Context(
                db=db,
                ws=ws,
                known_fields=known,
                semantic=lambda filt: self.semantic.prepare(db, ws, cfg.embedding, filt, since),
                pool=self._pool,
                lexical_helper=self.lexical_helper,
                rank=rank,
                rank_model=rank_model,
                facet_kinds=kinds,
                successors=lambda: self._cached("successors", ws, gen, lambda: stored_hits.successors(db, ws.id)),
            )
            return compact.finish(db, ws, engine.search(ctx, query, options), shape)

    def search_similar(self, name: Any, path: Any, opts: dict[str, Any] | None = None) -> dict[str, Any]:
        since = self.vectors.marker()
        with self.store.read() as db:
            ws = wss.find(db, name)
            doc_id, rel = docs.document_id(db, ws, path)
            return similar(
                db,
                ws,
                _config(ws).embedding,
                self.vectors,
                doc_id,
                rel,
                SimilarOptions.parse(opts),
                lambda fp: self.embed_queue.pending(db, ws.id, fp),
                since,
            )

    # -- documents -------------------------------------------------------------------

    def _content(self, name: Any, path: Any) -> tuple[Workspace, str, reads.Content]:
        with self.store.read() as db:
            ws = wss.find(db, name)
            rel, doc = docs.content(db, ws, path)
        return ws, rel, doc

    def document_read(self, name: str, path: str, opts: dict[str, Any] | None = None) -> dict[str, Any]:
        return docs.read_answer(*self._content(name, path), opts)

    def document_find(self, name: str, pattern: str, limit: int, facets: str = "") -> dict[str, Any]:
        """The documents whose title or path the pattern fuzzy-matches, over every one of the
        workspace (their names read once per store generation) or every one `facets` admits."""
        with self.store.read() as db:
            ws = wss.find(db, name)
            gen = wsrows.store_generation(db)
            names = self._cached("names", ws, gen, lambda: docs.names_of(db, ws))
            if facets.strip():
                known, kinds = self._fields(db, ws, gen)
                names = docs.only(names, engine.facet_paths(db, ws.id, facets, known, kinds, len(names.rows)))
        return docs.find_answer(ws, names, pattern, limit)

    def document_problems(self, name: str, path: str | None = None) -> dict[str, Any]:
        """{workspace, path, problems: [{path, line, message, code}]}: why a document (or every
        document, and the schema file) breaks the parser or the workspace schema."""
        with self.store.read() as db:
            ws = wss.find(db, name)
            rel = None
            if path is not None:
                rel = docs.relpath(db, ws, path)
                if rel != SCHEMA_RELPATH and reads.document_id(db, ws.id, rel) is None:
                    raise docs.not_found(db, ws, rel)
            return {"workspace": ws.name, "path": rel, "problems": wss.problems(db, ws, rel)}

    def document_links(self, name: Any, path: Any) -> dict[str, Any]:
        """Outgoing links of one document, in file order: {workspace, path, links: [{target, kind,
        line, label, anchor, target_path, target_title}]}; target_path is null for a broken link."""
        with self.store.read() as db:
            ws = wss.find(db, name)
            doc_id, rel = docs.document_id(db, ws, path)
            return {"workspace": ws.name, "path": rel, "links": reads.links_of(db, doc_id)}

    def document_backlinks(self, name: Any, path: Any) -> dict[str, Any]:
        """Links to one document from the others (and itself): {workspace, path, backlinks:
        [{source_path, source_title, target, kind, line, label, anchor}]}, by source path and line."""
        with self.store.read() as db:
            ws = wss.find(db, name)
            _, rel = docs.document_id(db, ws, path)
            return {"workspace": ws.name, "path": rel, "backlinks": reads.backlinks_of(db, ws.id, rel)}

    def document_outline(self, name: Any, path: Any) -> dict[str, Any]:
        return docs.outline_answer(*self._content(name, path))

    # -- changes and the server ------------------------------------------------------------

    def changes_since(self, name: str, cursor: int, limit: int = 1000) -> dict[str, Any]:
        with self.store.read() as db:
            ws = wss.find(db, name)
            return changelog.since(db, ws.name, cursor, limit)

    def info(self) -> dict[str, Any]:
        """What this server is and what it can do now: a stage is on when some workspace
        is configured for it, and its models are the loaded ones those workspaces use."""
        with self.store.read() as db:
            rows = [wsrows.get_workspace(db, n) for n in wsrows.workspace_names(db)]
            configs = [_config(ws) for ws in rows]
            coming = [
                self._embedding_status(db, ws, load=False)
                for ws, c in zip(rows, configs)
                if c.embedding.get("provider", "onnx") != "none"
            ]
        embedding = self.providers.describe_loaded([c.embedding for c in configs])
        rankers = self.rankers.describe_loaded([c.ranker for c in configs])
        return {
            "name": "autodoc",
            "version": __version__,
            "protocol_version": PROTOCOL_VERSION,
            "store": self.settings.store_shown,  # a connection string without its password
            "pid": os.getpid(),
            "writable": self.writable,
            "stages": {
                "lexical": True,
                "semantic": any(c.embedding.get("provider", "onnx") != "none" for c in configs),
                "rerank": any(c.ranker.get("provider", "none") != "none" for c in configs),
            },
            "models": {"embedding": embedding, "ranker": rankers},
            "semantic": summary(coming, [st["rate"] for st in coming if st["rate"]]),
            "workspaces": self.workspaces(),
        }
