"""The bundled model as a faster graph of the same weights, built once and cached.

The shipped ``model.onnx`` is a torch-dynamo export: its attention is a chain of
Reshape/Transpose/MatMul/Where/IsNaN that onnxruntime cannot fuse, and its int8
weights are cast back to float32 before every MatMul. This module rebuilds the
same network from the same weights on onnxruntime's fused contrib ops
(EmbedLayerNormalization, MultiHeadAttention, SkipLayerNormalization, BiasGelu)
with the dense layers as DynamicQuantizeMatMul over per-column int8 weights,
but for each block's down-projection (1536 → 384), which stays float32: its
input is the GELU's output, whose outliers set the one scale a tensor that
DynamicQuantizeMatMul quantizes activations with.

Measured (issue 37, a loaded machine, one text a run, 150 SciFact abstracts and
150 claims against the shipped graph's vectors): every dense layer int8: cosine
mean 0.9921 (min 0.9870), the claims' top 10 among the abstracts 91.3% the
same, 24.8 texts/s; down-projections float32 (this recipe): 0.9962 (0.9929),
93.8%, 23.7/s; QKV float32 instead: 0.9939, 92.3%, 20.5/s. With every layer
int8, SciFact test semantic nDCG@10 fell 0.6585 → 0.6533. The shipped graph
ran 5.7-7.1 chunks/s beside 13.3-19.5 for the fused one (batches of 32, 256
tokens); bench/speed.py's ``embed`` case measures the product against it.

Why at run time and not in the wheel: the graph is a pure function of the
shipped weights (fixed by their sha256) and this recipe, built in a few seconds
with numpy and onnxruntime alone (the ONNX protobuf is written here by hand:
neither `onnx` nor `sympy` is a runtime dependency), whereas shipping it would
add 23 MB to every wheel and a build step that needs onnx. The file lives in
the user's cache dir, named by the model's sha256, the recipe and the
onnxruntime version; it is written atomically and checked against the shipped
graph on probe texts before it is used. Any failure leaves the shipped graph in
use, and the provider's fingerprint names the graph it runs (a store never
mixes the vectors of the two).

Weights are 7-bit (-63..63, a scale per output column): u8 x s8 products of a
CPU without VNNI then cannot saturate their 16-bit sums, so every machine
computes the same vectors from the same file.

Runs on: the thread that loads the embedding model (under Providers' lock).
"""

from __future__ import annotations

import logging
import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

log = logging.getLogger("autodoc.embed")

# Names the recipe: change it whenever the graph built here would compute other vectors.
RECIPE = "fused-int8-v2"
HEADS = 12
HIDDEN = 384
LAYERS = 6
EPSILON = 1e-12
QMAX = 63  # 7-bit weights: see the module docstring
# Probe texts of different lengths (padding and the mask index are exercised), and how close the
# built graph must come to the shipped one on them (measured: min 0.992 over 200 abstracts).
PROBES = (
    "reset my password",
    "Mean pooling over the attention mask, then L2 normalisation of the sentence vector.",
    "# Lease recovery\nWhen a lease holder dies, the namenode starts lease recovery after the hard limit.",
)
MIN_COSINE = 0.98


def cache_dir() -> Path | None:
    """Where built graphs live: $AUTODOC_MODEL_CACHE, else the XDG cache dir; "off": never built."""
    env = os.environ.get("AUTODOC_MODEL_CACHE")
    if env == "off":
        return None
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "autodoc" / "models"


def graph_path(directory: Path, model_sha256: str) -> Path:
    import onnxruntime as ort

    return directory / f"all-MiniLM-L6-v2.{RECIPE}.{model_sha256[:16]}.ort{ort.__version__}.onnx"


def fused_graph(model_path: Path, model_sha256: str, directory: Path | None, tokenizer_path: Path) -> Path | None:
    """The fused graph for the shipped model (built now if missing), or None: use the shipped graph."""
    if directory is None:
        return None
    path = graph_path(directory, model_sha256)
    if path.is_file():
        return path
    started = time.monotonic()
    try:
        build(model_path, path, tokenizer_path)
    except Exception as e:  # any failure: the shipped graph serves, and the fingerprint says so
        log.warning("could not build the fused embedding graph (the shipped graph serves): %s", e)
        return None
    log.info("built the fused embedding graph %s in %.1f s", path, time.monotonic() - started)
    return path


def build(model_path: Path, dest: Path, tokenizer_path: Path) -> None:
    """Fold the shipped model's constants with onnxruntime, rebuild it on fused ops, check it
    against the shipped graph on PROBES, then move it into place."""
    import onnxruntime as ort

    dest.parent.mkdir(parents=True, exist_ok=True)
    tag = f"{os.getpid()}.{time.monotonic_ns()}"
    folded = dest.with_name(f".{dest.name}.{tag}.folded")
    tmp = dest.with_name(f".{dest.name}.{tag}.tmp")
    try:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC  # folds int8 → float32
        so.optimized_model_filepath = str(folded)
        so.log_severity_level = 3
        shipped = ort.InferenceSession(str(model_path), sess_options=so, providers=["CPUExecutionProvider"])
        weights = bert_weights(folded.read_bytes())
        tmp.write_bytes(model_bytes(weights))
        so = ort.SessionOptions()
        so.log_severity_level = 3
        fused = ort.InferenceSession(str(tmp), sess_options=so, providers=["CPUExecutionProvider"])
        worst = _agreement(shipped, fused, tokenizer_path)
        if worst < MIN_COSINE:
            raise ValueError(f"the fused graph's vectors differ from the shipped graph's (cosine {worst:.4f})")
        os.replace(tmp, dest)
    finally:
        for p in (folded, tmp):
            p.unlink(missing_ok=True)


def _agreement(shipped, fused, tokenizer_path: Path) -> float:
    """The lowest cosine between the two graphs' mean-pooled vectors of PROBES, one padded batch."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_path))
    tok.no_padding()
    tok.enable_truncation(max_length=256)
    encs = tok.encode_batch(list(PROBES))
    width = max(len(e.ids) for e in encs)
    ids = np.zeros((len(encs), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for r, e in enumerate(encs):
        ids[r, : len(e.ids)] = e.ids
        mask[r, : len(e.ids)] = 1
    feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    a, b = (_pooled(sess.run(None, feed)[0], mask) for sess in (shipped, fused))
    return float((a * b).sum(axis=1).min())


def _pooled(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    v = (hidden * mask[:, :, None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


# -- the weights -------------------------------------------------------------------------


def bert_weights(folded: bytes) -> dict[str, np.ndarray]:
    """The BERT parameters of the folded export, by their Hugging Face names (without the
    export's "inner." prefix). The folded MatMul weights are anonymous ("val_57"): each is
    named after the bias its MatMul's output is added to ("….query.bias" → "….query.weight")."""
    tensors, nodes = read_graph(folded)
    consumers: dict[str, list[tuple[str, list[str]]]] = {}
    for op, inputs, _ in nodes:
        for x in inputs:
            consumers.setdefault(x, []).append((op, inputs))
    out: dict[str, np.ndarray] = {}
    for name, arr in tensors.items():
        if name.startswith("inner."):
            out[name[len("inner.") :]] = arr
    for op, inputs, outputs in nodes:
        if op != "MatMul" or len(inputs) != 2 or inputs[1] not in tensors:
            continue
        for cop, cin in consumers.get(outputs[0], []):
            bias = [x for x in cin if x.endswith(".bias")] if cop == "Add" else []
            if bias:
                out[bias[0][len("inner.") : -len(".bias")] + ".weight"] = tensors[inputs[1]]
    missing = [k for k in expected_names() if k not in out]
    if missing:
        raise ValueError(f"the model is not the expected BERT export: missing {', '.join(missing[:4])}")
    return out


def expected_names() -> list[str]:
    names = [f"embeddings.{n}" for n in ("word_embeddings.weight", "position_embeddings.weight")]
    names += ["embeddings.token_type_embeddings.weight", "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias"]
    for i in range(LAYERS):
        p = f"encoder.layer.{i}."
        for d in ("attention.self.query", "attention.self.key", "attention.self.value"):
            names += [p + d + ".weight", p + d + ".bias"]
        for d in ("attention.output.dense", "intermediate.dense", "output.dense"):
            names += [p + d + ".weight", p + d + ".bias"]
        for d in ("attention.output.LayerNorm", "output.LayerNorm"):
            names += [p + d + ".weight", p + d + ".bias"]
    return names


def quantize(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-column int8 of a float32 [in, out] weight: (int8 values, float32 scales)."""
    scale = np.abs(w).max(axis=0) / QMAX
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(w / scale), -QMAX, QMAX).astype(np.int8)
    return q, scale.astype(np.float32)


# -- the graph ---------------------------------------------------------------------------------


class _Graph:
    def __init__(self) -> None:
        self.nodes: list[bytes] = []
        self.inits: list[bytes] = []

    def init(self, name: str, arr: np.ndarray) -> str:
        self.inits.append(tensor(name, np.ascontiguousarray(arr)))
        return name

    def node(self, op: str, inputs: list[str], outputs: list[str], ms: bool = True, **attrs) -> None:
        self.nodes.append(node(op, inputs, outputs, "com.microsoft" if ms else "", attrs))

    def dense(self, x: str, w: np.ndarray, name: str, out: str, bias: np.ndarray | None = None) -> None:
        """x @ w (+ bias) with w int8 per column, x quantized on the fly."""
        q, s = quantize(w)
        inputs = [
            x,
            self.init(name + ".q", q),
            self.init(name + ".s", s),
            self.init(name + ".z", np.zeros_like(s, np.int8)),
        ]
        if bias is not None:
            inputs.append(self.init(name + ".b", bias.astype(np.float32)))
        self.node("DynamicQuantizeMatMul", inputs, [out])


def model_bytes(p: dict[str, np.ndarray]) -> bytes:
    """The fused graph as a serialised ONNX ModelProto (inputs and output as the shipped model's)."""
    g = _Graph()
    for src, dst in (("input_ids", "ids32"), ("token_type_ids", "types32"), ("attention_mask", "mask32")):
        g.node("Cast", [src], [dst], ms=False, to=6)  # int32: what EmbedLayerNormalization takes
    e = "embeddings."
    g.node(
        "EmbedLayerNormalization",
        [
            "ids32",
            "types32",
            g.init("word", p[e + "word_embeddings.weight"]),
            g.init("position", p[e + "position_embeddings.weight"]),
            g.init("segment", p[e + "token_type_embeddings.weight"]),
            g.init("embed.gamma", p[e + "LayerNorm.weight"]),
            g.init("embed.beta", p[e + "LayerNorm.bias"]),
            "mask32",
        ],
        ["h0", "mask_index"],
        epsilon=EPSILON,
    )
    h = "h0"
    for i in range(LAYERS):
        a, n = f"encoder.layer.{i}.attention.", f"l{i}."
        qkv = np.concatenate([p[a + f"self.{x}.weight"] for x in ("query", "key", "value")], axis=1)
        qkv_bias = np.concatenate([p[a + f"self.{x}.bias"] for x in ("query", "key", "value")])
        g.dense(h, qkv, n + "qkv", n + "qkv", qkv_bias)
        g.node(
            "Split",
            [n + "qkv", g.init(n + "split", np.array([HIDDEN] * 3, np.int64))],
            [n + "q", n + "k", n + "v"],
            ms=False,
            axis=2,
        )
        g.node("MultiHeadAttention", [n + "q", n + "k", n + "v", "", "mask_index"], [n + "att"], num_heads=HEADS)
        g.dense(n + "att", p[a + "output.dense.weight"], n + "ao", n + "ao")
        g.node(
            "SkipLayerNormalization",
            [
                n + "ao",
                h,
                g.init(n + "g1", p[a + "output.LayerNorm.weight"]),
                g.init(n + "b1", p[a + "output.LayerNorm.bias"]),
                g.init(n + "ob1", p[a + "output.dense.bias"]),
            ],
            [n + "ln"],
            epsilon=EPSILON,
        )
        f = f"encoder.layer.{i}."
        g.dense(n + "ln", p[f + "intermediate.dense.weight"], n + "up", n + "up")
        g.node("BiasGelu", [n + "up", g.init(n + "ib", p[f + "intermediate.dense.bias"])], [n + "gelu"])
        g.node("MatMul", [n + "gelu", g.init(n + "down.w", p[f + "output.dense.weight"])], [n + "down"], ms=False)
        out = "last_hidden_state" if i == LAYERS - 1 else f"h{i + 1}"
        g.node(
            "SkipLayerNormalization",
            [
                n + "down",
                n + "ln",
                g.init(n + "g2", p[f + "output.LayerNorm.weight"]),
                g.init(n + "b2", p[f + "output.LayerNorm.bias"]),
                g.init(n + "ob2", p[f + "output.dense.bias"]),
            ],
            [out],
            epsilon=EPSILON,
        )
        h = out
    graph = b"".join(_ld(1, x) for x in g.nodes) + _ld(2, b"autodoc-minilm") + b"".join(_ld(5, x) for x in g.inits)
    graph += b"".join(
        _ld(11, value_info(x, 7, ["batch", "sequence"])) for x in ("input_ids", "attention_mask", "token_type_ids")
    )
    graph += _ld(12, value_info("last_hidden_state", 1, ["batch", "sequence", HIDDEN]))
    opsets = _ld(8, _ld(1, b"") + _vi(2, 17)) + _ld(8, _ld(1, b"com.microsoft") + _vi(2, 1))
    return _vi(1, 8) + _ld(2, b"autodoc") + _ld(3, RECIPE.encode()) + _ld(7, graph) + opsets


# -- the ONNX protobuf, by hand (field numbers from onnx.proto) ----------------------------------

_DTYPES: dict[np.dtype, int] = {
    np.dtype(np.float32): 1,
    np.dtype(np.int8): 3,
    np.dtype(np.int32): 6,
    np.dtype(np.int64): 7,
}
_NP: dict[int, np.dtype] = {v: k for k, v in _DTYPES.items()}


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64 fields: two's complement, ten bytes
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _vi(field: int, n: int) -> bytes:
    return _varint(field << 3) + _varint(n)


def _ld(field: int, data: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(data)) + data


def tensor(name: str, arr: np.ndarray) -> bytes:
    dims = b"".join(_vi(1, d) for d in arr.shape)
    return (
        dims
        + _vi(2, _DTYPES[arr.dtype])
        + _ld(8, name.encode())
        + _ld(9, arr.astype(arr.dtype.newbyteorder("<")).tobytes())
    )


def node(op: str, inputs: list[str], outputs: list[str], domain: str, attrs: dict) -> bytes:
    out = b"".join(_ld(1, x.encode()) for x in inputs) + b"".join(_ld(2, x.encode()) for x in outputs)
    out += _ld(3, outputs[0].encode()) + _ld(4, op.encode())
    for key, value in sorted(attrs.items()):
        if isinstance(value, float):
            attr = _ld(1, key.encode()) + _varint(2 << 3 | 5) + struct.pack("<f", value) + _vi(20, 1)
        else:
            attr = _ld(1, key.encode()) + _vi(3, int(value)) + _vi(20, 2)
        out += _ld(5, attr)
    return out + (_ld(7, domain.encode()) if domain else b"")


def value_info(name: str, elem_type: int, dims: list) -> bytes:
    shape = b"".join(_ld(1, _vi(1, d) if isinstance(d, int) else _ld(2, d.encode())) for d in dims)
    return _ld(1, name.encode()) + _ld(2, _ld(1, _vi(1, elem_type) + _ld(2, shape)))


def _fields(buf: memoryview) -> Iterator[tuple[int, int, int | memoryview]]:
    """(field number, wire type, value) of one message: an int, or a view of the bytes."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _read_varint(buf, pos)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(buf, pos)
            yield field, wire, value
        elif wire == 2:
            size, pos = _read_varint(buf, pos)
            yield field, wire, buf[pos : pos + size]
            pos += size
        elif wire == 5:
            yield field, wire, buf[pos : pos + 4]
            pos += 4
        elif wire == 1:
            yield field, wire, buf[pos : pos + 8]
            pos += 8
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")


def _read_varint(buf: memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def read_graph(model: bytes) -> tuple[dict[str, np.ndarray], list[tuple[str, list[str], list[str]]]]:
    """A ModelProto's initializers (name → array) and nodes ((op, inputs, outputs)): enough of
    ONNX to read the folded export (raw_data or float_data tensors, no external data)."""
    graph = next((v for f, w, v in _fields(memoryview(model)) if f == 7 and w == 2), None)
    if not isinstance(graph, memoryview):
        raise ValueError("no graph in the model")
    tensors: dict[str, np.ndarray] = {}
    nodes: list[tuple[str, list[str], list[str]]] = []
    for f, w, v in _fields(graph):
        if w != 2 or not isinstance(v, memoryview):
            continue
        if f == 1:
            op, ins, outs = "", [], []
            for nf, _, nv in _fields(v):
                if nf == 1 and isinstance(nv, memoryview):
                    ins.append(bytes(nv).decode())
                elif nf == 2 and isinstance(nv, memoryview):
                    outs.append(bytes(nv).decode())
                elif nf == 4 and isinstance(nv, memoryview):
                    op = bytes(nv).decode()
            nodes.append((op, ins, outs))
        elif f == 5:
            name, arr = _read_tensor(v)
            tensors[name] = arr
    return tensors, nodes


def _read_tensor(buf: memoryview) -> tuple[str, np.ndarray]:
    dims: list[int] = []
    dtype, name, raw = 1, "", None
    floats: list[bytes] = []
    for f, w, v in _fields(buf):
        if f == 1 and w == 0 and isinstance(v, int):
            dims.append(v)
        elif f == 1 and w == 2 and isinstance(v, memoryview):  # packed dims
            pos = 0
            while pos < len(v):
                d, pos = _read_varint(v, pos)
                dims.append(d)
        elif f == 2 and isinstance(v, int):
            dtype = v
        elif f == 8 and isinstance(v, memoryview):
            name = bytes(v).decode()
        elif f == 9 and isinstance(v, memoryview):
            raw = bytes(v)
        elif f == 4 and isinstance(v, memoryview):
            floats.append(bytes(v))  # packed float_data
        elif f == 14 and v == 1:
            raise ValueError(f"tensor {name} keeps its data outside the model")
    if dtype not in _NP:
        return name, np.zeros(0, np.float32)  # not a weight this builder reads
    if raw is None:
        raw = b"".join(floats) if dtype == 1 else b""
    arr = np.frombuffer(raw, dtype=_NP[dtype].newbyteorder("<")).astype(_NP[dtype])
    return name, arr.reshape(dims) if arr.size == int(np.prod(dims)) else arr
