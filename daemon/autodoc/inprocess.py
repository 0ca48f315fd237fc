"""Run one RPC method in this process, on the same store, when no daemon serves it."""

from __future__ import annotations

import sys
from typing import Any

from .config import Settings
from .errors import InvalidParams, MethodNotFound


class RemoteError(Exception):
    def __init__(self, error: dict):
        super().__init__(error.get("message", "error"))
        self.error = error


# method → (Service attribute, parameter names in positional order)
METHODS: dict[str, tuple[str, tuple[str, ...]]] = {
    "server.info": ("info", ()),
    "workspace.add": ("workspace_add", ("name", "root", "config")),
    "workspace.remove": ("workspace_remove", ("name",)),
    "workspace.list": ("workspace_list", ()),
    "workspace.configure": ("workspace_configure", ("workspace", "options")),
    "workspace.section_size": ("workspace_section_size", ("workspace", "tokens")),
    "workspace.status": ("workspace_status", ("workspace",)),
    "workspace.index": ("index", ("workspace",)),
    "workspace.reindex": ("index", ("workspace",)),
    "search.query": ("search", ("workspace", "query", "opts")),
    "document.read": ("document_read", ("workspace", "path", "opts")),
    "document.links": ("document_links", ("workspace", "path")),
    "document.backlinks": ("document_backlinks", ("workspace", "path")),
    "document.problems": ("document_problems", ("workspace", "path")),
    "changes.since": ("changes_since", ("workspace", "cursor", "limit")),
}


def bind(method: str, params: Any) -> tuple[str, list[Any]]:
    if method not in METHODS:
        raise MethodNotFound(f"no method {method!r}")
    attr, names = METHODS[method]
    if params is None:
        params = []
    if isinstance(params, list):
        if len(params) > len(names):
            raise InvalidParams("params", f"{method} takes at most {len(names)} parameters")
        return attr, list(params)
    if isinstance(params, dict):
        for k in params:
            if k not in names:
                raise InvalidParams(k, "unknown parameter")
        args = [params.get(n) for n in names]
        while args and args[-1] is None and names[len(args) - 1] not in params:
            args.pop()
        return attr, args
    raise InvalidParams("params", "must be an array or an object")


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
