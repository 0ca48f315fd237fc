"""The 1-bit sign code stored beside every vector (pure): the semantic leg's
Hamming prefilter reads it (search/semantic/vectors.py).

Runs on: any thread.
"""

from __future__ import annotations

import numpy as np


def sign_codes(vecs: np.ndarray) -> np.ndarray:
    """1-bit codes: bit j of row i is set when vecs[i, j] > 0; packed with
    np.packbits (big-endian bit order), uint8 [n, ceil(dim/8)]."""
    v = np.asarray(vecs)
    if v.ndim == 1:
        v = v[None, :]
    if v.ndim != 2:
        raise ValueError("vecs must be 2-D [n, dim]")
    return np.packbits(v > 0, axis=1)
