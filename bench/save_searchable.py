"""Save → searchable through a daemon, the speed benchmark's loop alone (issue 19):
five saves, the first in a folder that does not exist yet, each polled with a
lexical search for its unique word until it answers.

Writes into the corpus: run it on a copy of a speed store and its corpus
(`speed-<n>-<fp>/` and `speed-corpus-<n>`, the workspace's root pointed at the
copy), never on the cached ones.

    python -m bench.save_searchable STORE CORPUS [--folder bench-live] [--settle 75]
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from pathlib import Path

from .speed import WORKSPACE, SocketClient, rss_mb, start_daemon, stop_daemon


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("corpus", type=Path, help="the workspace's root (a copy)")
    ap.add_argument("--folder", default="bench-live", help="a new folder for the saves (removed after)")
    ap.add_argument(
        "--settle",
        type=float,
        default=75.0,
        help="seconds to wait after start: the daemon's catch-up index holds the writer until done",
    )
    a = ap.parse_args(argv)
    sock = Path(tempfile.mkdtemp(prefix="adsave-")) / "d.sock"
    p, why = start_daemon(a.store, sock, timeout=600)
    if p is None:
        print(why)
        return 1
    c = SocketClient(sock)
    try:
        time.sleep(a.settle)
        lat: list[float | None] = []
        for i in range(5):
            word = f"zqx{random.getrandbits(40):x}"
            path = a.corpus / a.folder / f"live-{i}.md"
            path.parent.mkdir(exist_ok=True)
            t0 = time.perf_counter()
            path.write_text(f"# Live note {i}\n\nThe marker {word} appears here.\n")
            found = None
            while time.perf_counter() - t0 < 30:
                if c.call("search.query", [WORKSPACE, word, {"stages": ["lexical"], "limit": 1}])["hits"]:
                    found = time.perf_counter() - t0
                    break
                time.sleep(0.005)
            lat.append(None if found is None else round(found * 1000, 1))
            path.unlink()
            time.sleep(0.3)
        print(f"save → searchable ms: {lat}; daemon RSS {rss_mb(p.pid)} MB; log {sock.parent / 'daemon.log'}")
    finally:
        shutil.rmtree(a.corpus / a.folder, ignore_errors=True)
        c.close()
        stop_daemon(p)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
