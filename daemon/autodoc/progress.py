"""Progress of an in-process index run on stderr: a tqdm bar on a terminal, plain lines elsewhere.

Input: an index run's progress callback (done, total, message). Output: stderr only.

Runs on: the thread the index run reports from (the CLI's main thread).
"""

from __future__ import annotations

import sys
import time


class ProgressLines:
    """Where stderr is not a terminal (a script, CI, an agent's log): a plain line when a phase
    starts and at most every EVERY_S within it, so a long run (minutes of embedding) does not
    look hung; tqdm's bar turns itself off there."""

    EVERY_S = 10.0

    def __init__(self) -> None:
        self._phase: str | None = None
        self._said = 0.0
        self._ended = False  # this phase's last line (done = total) is out

    def __call__(self, done: int, total: int, message: str) -> None:
        phase = "embedding" if message == "embedding" else "indexing"
        now = time.monotonic()
        starts = phase != self._phase
        if starts:
            self._phase, self._ended = phase, False
        ends = bool(total) and done >= total and not self._ended
        if starts or ends or now - self._said >= self.EVERY_S:
            self._said, self._ended = now, self._ended or ends
            unit = "chunks" if phase == "embedding" else "files"
            print(f"autodoc: {phase} {done}/{total} {unit}", file=sys.stderr, flush=True)

    def close(self) -> None:
        pass


class ProgressBar:
    """tqdm on stderr, fed by an index run's progress callback."""

    def __init__(self) -> None:
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
