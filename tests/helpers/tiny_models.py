"""Tiny models built at test time (no downloads, no torch).

build_tiny_cross_encoder() writes a BERT-shaped cross-encoder folder:

    model.onnx      inputs input_ids, attention_mask[, token_type_ids] (int64 [batch, seq])
                    output logits (float32 [batch, 1])
    tokenizer.json  a small WordPiece vocabulary, BERT normalizer and
                    pre-tokenizer, and a pair template that marks the second
                    segment with type id 1 ("[CLS] A [SEP] B [SEP]")

The weights are random with a fixed seed, except for one designed feature so
that tests can assert a known order honestly: the token MAGIC ("lease") has a
large value on embedding dimension 0, the output weight of that dimension is
large, and a per-segment gate zeroes dimension 0 in segment 0 (the query). So
a passage containing "lease" scores far above passages without it, *only* when
the real token_type_ids are fed (with all-zero type ids the boost vanishes),
and a "lease" in the query earns nothing. Pooling is a masked mean, so padding
does not change a pair's score (batch-size invariance is testable).

heavy_layers > 0 adds a side branch of square MatMul+Tanh layers over the
token states whose result is scaled by 1e-30 before being added to the
logits: the scores stay the same while a batch takes long enough to test
timeouts and cancellation that interrupt a batch in flight.

The shipped tokenizer.json deliberately fixes padding and truncation at 128
(like real model folders do) so the ranker's override is exercised.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

MAGIC = "lease"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
WORDS = sorted(
    set(
        """
the a an of to in on for and or is are was be by with as at from that this it its not no
store stores storage lock locks locked lease leases recover recovery recovered expired expiry
writer reader process pid crash crashed holder take takes taking over after before when
how what why does do did can may must should search index indexes query queries ranker rank
model models embedding embeddings section sections chunk chunks file files document documents
workspace workspaces config option options timeout deadline cancel cancelled batch batches
markdown heading headings title tag tags link links note notes daemon server client socket
banana bananas apple potassium fruit rich weather sunny rain
""".split()
    )
)
LETTERS = list("abcdefghijklmnopqrstuvwxyz0123456789")
DIM = 16


def _vocab() -> dict[str, int]:
    tokens = list(dict.fromkeys(SPECIALS + WORDS + LETTERS + ["##" + c for c in LETTERS]))  # "a" is a word and a letter
    return {t: i for i, t in enumerate(tokens)}


def build_tokenizer(path: Path) -> Tokenizer:
    vocab = _vocab()
    tok = Tokenizer(models.WordPiece(vocab=vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece()
    tok.add_special_tokens(SPECIALS)
    # Like shipped model folders: fixed 128 padding/truncation the ranker must override.
    tok.enable_truncation(128)
    tok.enable_padding(length=128, pad_id=vocab["[PAD]"], pad_token="[PAD]")
    tok.save(str(path))
    return tok


def build_model(
    path: Path,
    vocab_size: int,
    magic_id: int,
    *,
    with_token_type_ids: bool = True,
    heavy_layers: int = 0,
    heavy_dim: int = 256,
    seed: int = 1234,
) -> None:
    rng = np.random.default_rng(seed)
    emb = rng.normal(0.0, 0.5, size=(vocab_size, DIM)).astype(np.float32)
    emb[:, 0] = 0.0
    emb[magic_id, 0] = 4.0  # the designed feature
    gate = np.ones((2, DIM), dtype=np.float32)
    gate[0, 0] = 0.0  # dimension 0 counts only in segment 1 (the passage)
    w = rng.normal(0.0, 0.3, size=(DIM, 1)).astype(np.float32)
    w[0, 0] = 10.0
    b = np.array([0.1], dtype=np.float32)

    inits = [
        numpy_helper.from_array(emb, "emb"),
        numpy_helper.from_array(w, "w_out"),
        numpy_helper.from_array(b, "b_out"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "ax2"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "ax1"),
    ]
    nodes = [helper.make_node("Gather", ["emb", "input_ids"], ["tok_emb"], axis=0)]
    if with_token_type_ids:
        inits.append(numpy_helper.from_array(gate, "gate"))
        nodes += [
            helper.make_node("Gather", ["gate", "token_type_ids"], ["seg_gate"], axis=0),
            helper.make_node("Mul", ["tok_emb", "seg_gate"], ["h"]),
        ]
    else:
        nodes.append(helper.make_node("Identity", ["tok_emb"], ["h"]))
    nodes += [
        helper.make_node("Cast", ["attention_mask"], ["mask_f"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["mask_f", "ax2"], ["mask3"]),
        helper.make_node("Mul", ["h", "mask3"], ["hm"]),
        helper.make_node("ReduceSum", ["hm", "ax1"], ["summed"], keepdims=0),  # [B, D]
        helper.make_node("ReduceSum", ["mask3", "ax1"], ["count"], keepdims=0),  # [B, 1]
        helper.make_node("Div", ["summed", "count"], ["pooled"]),
        helper.make_node("MatMul", ["pooled", "w_out"], ["proj"]),
        helper.make_node("Add", ["proj", "b_out"], ["base_logits"]),
    ]
    out = "base_logits"
    if heavy_layers > 0:
        hemb = rng.normal(0.0, 0.5, size=(vocab_size, heavy_dim)).astype(np.float32)
        hw = (rng.normal(0.0, 1.0, size=(heavy_dim, heavy_dim)) / np.sqrt(heavy_dim)).astype(np.float32)
        inits += [
            numpy_helper.from_array(hemb, "heavy_emb"),
            numpy_helper.from_array(hw, "heavy_w"),
            numpy_helper.from_array(np.array([1, 2], dtype=np.int64), "ax12"),
            numpy_helper.from_array(np.array([1e-30], dtype=np.float32), "tiny"),
        ]
        nodes.append(helper.make_node("Gather", ["heavy_emb", "input_ids"], ["x0"], axis=0))
        prev = "x0"
        for i in range(heavy_layers):
            nodes += [
                helper.make_node("MatMul", [prev, "heavy_w"], [f"xm{i}"]),
                helper.make_node("Tanh", [f"xm{i}"], [f"x{i + 1}"]),
            ]
            prev = f"x{i + 1}"
        nodes += [
            helper.make_node("ReduceSum", [prev, "ax12"], ["side"], keepdims=0),  # [B]
            helper.make_node("Unsqueeze", ["side", "ax1"], ["side2"]),  # [B, 1]
            helper.make_node("Mul", ["side2", "tiny"], ["side_small"]),
            helper.make_node("Add", ["base_logits", "side_small"], ["logits_sum"]),
        ]
        out = "logits_sum"
    nodes.append(helper.make_node("Identity", [out], ["logits"]))

    seq = ["batch", "seq"]
    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, seq),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, seq),
    ]
    if with_token_type_ids:
        inputs.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, seq))
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", 1])]
    graph = helper.make_graph(nodes, "tiny_cross_encoder", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="autodoc-tests")
    model.ir_version = 8  # onnxruntime 1.32 reads IR ≤ 11; 8 keeps older runtimes happy too
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def build_tiny_cross_encoder(
    folder: str | Path,
    *,
    with_token_type_ids: bool = True,
    heavy_layers: int = 0,
    heavy_dim: int = 256,
    seed: int = 1234,
    onnx_subdir: bool = False,
) -> Path:
    """Write model.onnx (or onnx/model.onnx) and tokenizer.json into ``folder``; returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    vocab = _vocab()
    build_tokenizer(folder / "tokenizer.json")
    model_dir = folder / "onnx" if onnx_subdir else folder
    model_dir.mkdir(exist_ok=True)
    build_model(
        model_dir / "model.onnx",
        len(vocab),
        vocab[MAGIC],
        with_token_type_ids=with_token_type_ids,
        heavy_layers=heavy_layers,
        heavy_dim=heavy_dim,
        seed=seed,
    )
    return folder
