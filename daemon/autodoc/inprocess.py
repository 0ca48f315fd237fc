"""Run one RPC method in this process, on the same store, when no daemon serves it."""

from __future__ import annotations

import sys
from typing import Any

from .config import Settings
from .errors import MethodNotFound


# method → Service attribute; parameters are bound and checked by the method's
# JSON Schema (rpc.schemas), exactly as the daemon does, then passed in schema order.
METHODS: dict[str, str] = {
    "server.info": "info",
    "workspace.add": "workspace_add",
    "workspace.remove": "workspace_remove",
    "workspace.list": "workspace_list",
    "workspace.configure": "workspace_configure",
    "workspace.section_size": "workspace_section_size",
    "workspace.status": "workspace_status",
    "workspace.tags": "workspace_tags",
    "workspace.index": "index",
    "workspace.reindex": "index",
    "search.query": "search",
    "document.read": "document_read",
    "document.links": "document_links",
    "document.backlinks": "document_backlinks",
    "document.problems": "document_problems",
    "changes.since": "changes_since",
}


def bind(method: str, params: Any) -> tuple[str, list[Any]]:
    from .rpc.schemas import bind_params, param_names

    if method not in METHODS:
        raise MethodNotFound(f"no method {method!r} runs without the daemon (start one: autodoc serve --socket)")
    bound = bind_params(method, params)
    names = param_names(method)
    args = [bound.get(n) for n in names]
    while args and args[-1] is None and names[len(args) - 1] not in bound:
        args.pop()
    return METHODS[method], args


def call_in_process(settings: Settings, method: str, params: Any, *, writer: bool, progress: bool = False) -> Any:
    from .service import Service

    attr, args = bind(method, params)
    svc = Service(settings, writer=writer)
    try:
        fn = getattr(svc, attr)
        if method in ("workspace.index", "workspace.reindex"):
            bar = _progress_bar() if progress else None
            try:
                return fn(*args, full=method == "workspace.reindex", progress=bar, embed=True)
            finally:
                if bar:
                    bar.close()
        return fn(*args)
    finally:
        svc.close()


class _progress_bar:
    def __init__(self):
        from tqdm import tqdm

        self._bar = tqdm(total=0, unit="file", file=sys.stderr, disable=None, leave=False)

    def __call__(self, done: int, total: int, message: str) -> None:
        if self._bar.total != total:
            self._bar.total = total
        self._bar.n = done
        self._bar.set_postfix_str(message[-40:], refresh=False)
        self._bar.refresh()

    def close(self) -> None:
        self._bar.close()
