"""The embedding providers hand the C heap's freed pages back to the OS after it
loads a model and after each embed batch: glibc otherwise keeps the ONNX
load's ~60 MB of freed parse and constant-folding buffers resident."""

from __future__ import annotations

import platform
import sys

from autodoc.embed import memory, providers

HTTP = {"provider": "http", "url": "http://127.0.0.1:9/v1/embeddings", "model": "m", "dim": 8}


def test_release_free_heap_runs_where_glibc_does():
    ran = memory.release_free_heap()
    glibc = sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc"
    assert ran is glibc  # elsewhere (macOS, musl) a no-op, never an error
    assert memory.release_free_heap() is ran  # looked up once, same answer


def test_loading_a_provider_releases_the_heap_once(monkeypatch):
    calls = []
    monkeypatch.setattr(providers, "release_free_heap", lambda: calls.append(1) or True)
    rt = providers.Providers()
    p = rt.get(HTTP)
    assert p is not None and calls == [1]
    assert rt.get(dict(HTTP)) is p and calls == [1]  # cached provider: no second trim
