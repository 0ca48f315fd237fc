"""float16 → float32, exactly and fast: what the vector index's float16 rows go
through before each search rescores its shortlist in float32 (search/semantic/vectors.py).

numpy converts float16 in software on the x86-64-v2 build it ships (no F16C in
its baseline): 3 ms for the 4,000 × 384 shortlist a search rescores at 100k rows
and above, a third of the semantic leg. ONNX Runtime's Cast converts with F16C:
0.2 ms for the same block. Every finite float16 is exactly a float32, so both
give the same values bit for bit (a test compares every finite float16), and
the float32 dot product that follows, hence every cosine, is unchanged. Without
onnxruntime, or for a small block where a session call costs more than it
saves, numpy converts.

The one-node model is written here as protobuf bytes (the `onnx` package is a
test dependency only); the session runs on the caller's thread
(intra_op_num_threads 1: no pool to wake) and releases the GIL while it runs.

Runs on: any thread (one session, made on first use under a lock; InferenceSession.run is thread-safe).
"""

from __future__ import annotations

import logging
import threading

import numpy as np

log = logging.getLogger("autodoc.search")

MIN_ELEMENTS = 16_384  # below this numpy's cast beats a session call (≈ 20 µs)
_FLOAT, _FLOAT16 = 1, 10  # onnx TensorProto.DataType


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(num: int, value: bytes | str | int) -> bytes:
    """A protobuf field: an int as a varint (wire type 0), bytes or a str length-delimited (2)."""
    if isinstance(value, int):
        return _varint(num << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(num << 3 | 2) + _varint(len(data)) + data


def _tensor(name: str, elem_type: int) -> bytes:
    # ValueInfoProto{name, type: TypeProto{tensor_type: {elem_type, shape: [n]}}}: a flat array of any length
    shape = _field(1, _field(2, "n"))  # TensorShapeProto{dim: Dimension{dim_param}}
    return _field(1, name) + _field(2, _field(1, _field(1, elem_type) + _field(2, shape)))


def cast_model() -> bytes:
    """ModelProto: y = Cast(x: float16, to=float), opset 17, IR version 8."""
    attr = _field(1, "to") + _field(3, _FLOAT) + _field(20, 2)  # AttributeProto, type INT
    node = _field(1, "x") + _field(2, "y") + _field(4, "Cast") + _field(5, attr)
    graph = (
        _field(1, node)
        + _field(2, "half_to_float")
        + _field(11, _tensor("x", _FLOAT16))
        + _field(12, _tensor("y", _FLOAT))
    )
    return _field(1, 8) + _field(8, _field(1, "") + _field(2, 17)) + _field(7, graph)


_lock = threading.Lock()
_session = None
_tried = False


def _get_session():
    global _session, _tried
    if _tried:
        return _session
    with _lock:
        if not _tried:
            try:
                import onnxruntime as ort

                so = ort.SessionOptions()
                so.intra_op_num_threads = 1
                so.inter_op_num_threads = 1
                so.log_severity_level = 3
                _session = ort.InferenceSession(cast_model(), so, providers=["CPUExecutionProvider"])
            except Exception as e:  # no runtime, or it refused the model: numpy's cast is the same, only slower
                log.warning("float16 rows will be converted by numpy (slower): %s", e)
                _session = None
            _tried = True
    return _session


def to_float32(block: np.ndarray) -> np.ndarray:
    """A float32 copy of a float16 array, the values exactly numpy's astype gives."""
    if block.size >= MIN_ELEMENTS:
        session = _get_session()
        if session is not None:
            flat = np.ascontiguousarray(block).reshape(-1)
            return session.run(None, {"x": flat})[0].reshape(block.shape)
    return block.astype(np.float32)
