"""The rerank stage's local provider: a cross-encoder run by onnxruntime.

Input: a query and the window's passages. Each (query, passage) pair is
tokenised together with the model's own tokenizer.json (truncated to
``max_length`` on the passage side only, padded to the longest pair of the
batch), fed as input_ids / attention_mask / token_type_ids (the real segment
ids, when the graph has that input), and scored as ``logits[:, 0]``.
Output: one float per passage, in input order (higher = more relevant).

One InferenceSession serves every caller (session.run is thread-safe). Work is
done in batches; a deadline or a cancel event stops it between batches, and a
watcher also aborts the batch in flight (RunOptions.terminate) so a cancelled
search-as-you-type query frees the two cores at once instead of finishing a
batch nobody will read.

Runs on: the search's thread; a watcher thread per call interrupts the session when its deadline passes or the search is cancelled.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from ..errors import InvalidParams
from .base import Deadline, Meter, RankerCancelled, RankerDown, find_model_files, metered

__all__ = ["OnnxRanker"]

_INT_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}
_WATCH_POLL_S = 0.02


def _short(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Stopper:
    """Stops a score() call when its deadline passes or its cancel event fires.

    Checked before every batch; when there is a deadline or an event, a small
    watcher thread also sets ``terminate`` on the RunOptions of the batch in
    flight, which onnxruntime honours between graph nodes.
    """

    def __init__(self, deadline: Deadline, cancel: threading.Event | None):
        self.deadline = deadline
        self.cancel = cancel
        self.reason: RankerDown | None = None
        self._lock = threading.Lock()
        self._ro: ort.RunOptions | None = None
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        if deadline.at is not None or cancel is not None:
            self._thread = threading.Thread(target=self._watch, name="autodoc-rank-watch", daemon=True)
            self._thread.start()

    def _due(self) -> RankerDown | None:
        if self.cancel is not None and self.cancel.is_set():
            return RankerCancelled("ranking was cancelled")
        if self.deadline.passed():
            return self.deadline.down()
        return None

    def _watch(self) -> None:
        while True:
            wait = _WATCH_POLL_S
            rem = self.deadline.remaining()
            if rem is not None:
                wait = min(wait, max(rem, 0.0))
            if self._done.wait(wait):
                return
            due = self._due()
            if due is not None:
                with self._lock:
                    if self.reason is None:
                        self.reason = due
                    if self._ro is not None:
                        self._ro.terminate = True
                return

    def run_options(self) -> ort.RunOptions:
        ro = ort.RunOptions()
        with self._lock:
            self._ro = ro
            # The watcher may have fired just before this batch's options existed.
            if self.reason is not None:
                ro.terminate = True
        return ro

    def check(self) -> None:
        if self.reason is None:
            due = self._due()
            if due is not None:
                with self._lock:
                    if self.reason is None:
                        self.reason = due
        if self.reason is not None:
            raise self.reason

    def close(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join()


class OnnxRanker:
    """A cross-encoder from a folder holding model.onnx and tokenizer.json."""

    def __init__(
        self,
        model_path: str | Path,
        tokenizer_path: str | Path,
        *,
        name: str | None = None,
        max_length: int = 512,
        batch: int = 16,
        threads: int = 0,
        timeout: float | None = None,
    ):
        self.model_path = Path(model_path)
        self.tokenizer_path = Path(tokenizer_path)
        self.name = name or self.tokenizer_path.parent.name
        self.max_length = max_length
        self.batch = batch
        self.threads = threads
        self.timeout = timeout  # used when score() gets no timeout of its own
        self.meter = Meter()

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads  # 0 = onnxruntime's choice (the physical cores)
        opts.inter_op_num_threads = 1  # the graph is a chain: parallel nodes buy nothing
        opts.log_severity_level = 3  # keep ORT's warnings out of the daemon's stderr
        self._session = ort.InferenceSession(
            str(self.model_path), sess_options=opts, providers=["CPUExecutionProvider"]
        )
        inputs = {i.name: i for i in self._session.get_inputs()}
        for needed in ("input_ids", "attention_mask"):
            if needed not in inputs:
                raise ValueError(f"model has no {needed!r} input (inputs: {', '.join(inputs)})")
        extra = set(inputs) - {"input_ids", "attention_mask", "token_type_ids"}
        if extra:
            raise ValueError(f"model wants inputs this ranker cannot fill: {', '.join(sorted(extra))}")
        self._dtypes: dict[str, Any] = {}
        for key, info in inputs.items():
            if info.type not in _INT_TYPES:
                raise ValueError(f"input {key!r} has type {info.type}, expected int64 or int32")
            self._dtypes[key] = _INT_TYPES[info.type]
        self._has_type_ids = "token_type_ids" in inputs
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = "logits" if "logits" in outputs else outputs[0]

        self._tok = self._load_tokenizer(self.tokenizer_path, max_length)
        # A second, unconfigured copy measures queries: the pair tokenizer's
        # 'only_second' truncation refuses a lone text longer than max_length.
        self._qtok = Tokenizer.from_file(str(self.tokenizer_path))
        self._qtok.no_padding()
        self._qtok.no_truncation()
        self._type_ids_kind = self._probe_type_ids()

    # -- construction ----------------------------------------------------------

    @classmethod
    def from_config(cls, cfg: dict[str, Any], field: str = "ranker") -> OnnxRanker:
        """Build from a validated config (base.validate_config); load failures
        become InvalidParams on ``field.path`` so the user sees what to fix."""
        found = find_model_files(Path(cfg["path"]))
        if isinstance(found, str):  # raced with a delete since validation
            raise InvalidParams(f"{field}.path", found)
        model, tok = found
        folder = tok.parent
        try:
            return cls(
                model,
                tok,
                name=cfg.get("model"),
                max_length=cfg["max_length"],
                batch=cfg["batch"],
                threads=cfg.get("threads", 0),
                timeout=cfg.get("timeout"),
            )
        except Exception as exc:  # onnxruntime/tokenizers raise assorted types
            raise InvalidParams(f"{field}.path", f"cannot load the ranker in {folder}: {_short(exc)}") from exc

    @staticmethod
    def _load_tokenizer(path: Path, max_length: int) -> Tokenizer:
        tok = Tokenizer.from_file(str(path))
        # Shipped tokenizer.json files often fix padding/truncation (e.g. 128);
        # replace both: pairs truncate on the passage side only (the query must
        # survive whole), and a batch pads to its longest pair, not a fixed length.
        pad = tok.padding or {}
        pad_token = pad.get("pad_token")
        pad_id = pad.get("pad_id")
        if pad_token is None or tok.token_to_id(pad_token) is None:
            for cand in ("[PAD]", "<pad>", "<PAD>"):
                if tok.token_to_id(cand) is not None:
                    pad_token, pad_id = cand, tok.token_to_id(cand)
                    break
            else:
                pad_token, pad_id = pad_token or "[PAD]", pad_id or 0
        else:
            pad_id = tok.token_to_id(pad_token)
        tok.no_padding()
        tok.no_truncation()
        tok.enable_truncation(max_length, strategy="only_second")
        tok.enable_padding(pad_id=pad_id, pad_token=pad_token, pad_type_id=0, direction="right")
        return tok

    def _probe_type_ids(self) -> str:
        """'pair' when the tokenizer marks the passage segment, 'all-zero' when it
        does not (RoBERTa-style tokenizers), 'unused' when the graph has no input."""
        if not self._has_type_ids:
            return "unused"
        enc = self._tok.encode("a", "b")
        return "pair" if any(enc.type_ids) else "all-zero"

    # -- the provider ----------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        return {
            "provider": "onnx",
            "model": self.name,
            "path": str(self.tokenizer_path.parent),
            "model_file": str(self.model_path),
            "max_length": self.max_length,
            "batch": self.batch,
            "threads": self.threads,
            "inputs": sorted(self._dtypes),
            "output": self._output,
            "type_ids": self._type_ids_kind,
            "meter": self.meter.snapshot(),
        }

    def close(self) -> None:
        """Nothing to release explicitly; the session goes with the object."""

    def score(
        self,
        query: str,
        passages: Sequence[str],
        *,
        timeout: float | None = None,
        cancel: threading.Event | None = None,
    ) -> list[float]:
        """Scores for ``passages`` against ``query``, in input order.

        ``timeout`` (seconds, default: the config's ``timeout``, else none) is a
        deadline for the whole call; ``cancel`` stops it as soon as it is set.
        Either raises (RankerDown / RankerCancelled) rather than returning a
        partial list: a window scored in part cannot be re-sorted honestly.
        """
        started = time.monotonic()
        deadline = Deadline(self.timeout if timeout is None else timeout)
        stopper = _Stopper(deadline, cancel)
        try:
            scores, tokens = metered(
                self.meter,
                lambda exc: f"ranker {self.name} failed: {_short(exc)}",
                lambda: self._score(query, list(passages), stopper),
            )
        finally:
            stopper.close()
        self.meter.record(len(scores), tokens, time.monotonic() - started)
        return scores

    def _score(self, query: str, passages: list[str], stopper: _Stopper) -> tuple[list[float], int]:
        """(scores, real tokens fed) for the meter."""
        if not isinstance(query, str) or not all(isinstance(p, str) for p in passages):
            raise RankerDown("query and passages must be strings")
        if not passages:
            return [], 0
        query = self._fit_query(query)
        out: list[float] = []
        tokens = 0
        for start in range(0, len(passages), self.batch):
            stopper.check()
            chunk = passages[start : start + self.batch]
            encs = self._tok.encode_batch([(query, p) for p in chunk])
            feeds = {
                "input_ids": np.asarray([e.ids for e in encs], dtype=self._dtypes["input_ids"]),
                "attention_mask": np.asarray([e.attention_mask for e in encs], dtype=self._dtypes["attention_mask"]),
            }
            tokens += int(feeds["attention_mask"].sum())
            if self._has_type_ids:
                feeds["token_type_ids"] = np.asarray([e.type_ids for e in encs], dtype=self._dtypes["token_type_ids"])
            ro = stopper.run_options()
            try:
                result = self._infer(feeds, ro)
            except Exception as exc:
                stopper.check()  # terminated on purpose: report why, not ORT's words
                raise RankerDown(f"ranker {self.name} failed: {_short(exc)}") from exc
            logits = np.asarray(result)
            if logits.ndim == 2:
                col = logits[:, 0]  # single-logit cross-encoders: [batch, 1]
            elif logits.ndim == 1:
                col = logits
            else:
                raise RankerDown(
                    f"ranker {self.name} returned {self._output} of shape {logits.shape}, expected [batch, 1]"
                )
            if col.shape[0] != len(chunk):
                raise RankerDown(f"ranker {self.name} returned {col.shape[0]} scores for {len(chunk)} passages")
            if not np.all(np.isfinite(col)):
                raise RankerDown(f"ranker {self.name} returned non-finite scores")
            out.extend(float(x) for x in col)
        return out, tokens

    def _infer(self, feeds: dict[str, np.ndarray], run_options: ort.RunOptions) -> np.ndarray:
        return self._session.run([self._output], feeds, run_options)[0]

    def _fit_query(self, query: str) -> str:
        """Cut a query longer than half of max_length (at a token boundary).

        'only_second' truncation cannot shorten the query, and tokenizers
        refuses a pair whose query alone overflows; such a query is pasted
        text, not a question, and its head carries the intent.
        """
        cap = self.max_length // 2
        enc = self._qtok.encode(query, add_special_tokens=False)
        if len(enc.ids) <= cap:
            return query
        end = enc.offsets[cap - 1][1]
        return query[:end]
