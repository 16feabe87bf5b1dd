#!/usr/bin/env python3
"""Writes the dequantization fixtures of tests/test_quant_dequant.c from the reference
dequantizers of the `gguf` PyPI package (gguf.quants.dequantize, a numpy port of ggml's
dequantize_row_* functions), so the tests need no Python at run time.

  python3 tools/quant/make_dequant_fixtures.py SHARED_DIR OUT_DIR

tests/data/dequant_tiny.txt: for every quantized tensor of the two tiny Q4_K_M models, the
  FNV-1a 64 hash of its dequantized float32 bytes (little-endian, row-major).
tests/data/dequant_blocks.txt: per type, random blocks (random quant bytes, finite random F16
  scales) and their dequantized floats, both in hex; this covers the types no tiny model
  holds (Q4_1, Q5_1, Q2_K, Q3_K) and every other block type as well.

Made with gguf 0.19.0 and numpy 2.4.6 (the versions are written into the files).
"""
import importlib.metadata
import sys
from pathlib import Path

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3


def fnv1a64(data: bytes) -> int:
    # Vectorised FNV-1a is not possible; tensors here are small (a few MB).
    h = FNV_OFFSET
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


# Byte offsets of the F16 scale fields in each block (the other bytes are quants).
HALF_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def random_blocks(rng, qtype, n_blocks):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        # finite halves in [2^-10, 2^3), either sign
        h = rng.integers(0, 1 << 10, size=n_blocks) | (rng.integers(5, 18, size=n_blocks) << 10)
        h |= rng.integers(0, 2, size=n_blocks) << 15
        raw[:, off] = (h & 0xFF).astype(np.uint8)
        raw[:, off + 1] = (h >> 8).astype(np.uint8)
    return raw.reshape(-1), n_blocks * block


def main():
    shared, out = Path(sys.argv[1]), Path(sys.argv[2])
    version = f"gguf {importlib.metadata.version('gguf')} numpy {np.__version__}"
    lines = [f"# FNV-1a 64 of gguf.quants.dequantize() float32 bytes ({version})",
             "# file tensor type n_elements hash"]
    for name in ["tiny-mixtral-Q4_K_M.gguf", "tiny-qwen2moe-Q4_K_M.gguf"]:
        r = gguf.GGUFReader(shared / "testdata" / "models" / name)
        for t in r.tensors:
            if t.tensor_type in (T.F32, T.F16, T.BF16):
                continue
            f = gguf.quants.dequantize(np.asarray(t.data), t.tensor_type).astype("<f4")
            lines.append(f"{name} {t.name} {t.tensor_type.name.lower()} {f.size} "
                         f"{fnv1a64(f.tobytes()):016x}")
    (out / "dequant_tiny.txt").write_text("\n".join(lines) + "\n")

    rng = np.random.default_rng(20261201)
    lines = [f"# random blocks and gguf.quants.dequantize() of them ({version})",
             "# type n_elements, then the block bytes in hex, then the float32 values in hex"]
    for qtype in HALF_FIELDS:
        n_blocks = 3 if gguf.GGML_QUANT_SIZES[qtype][0] == 256 else 24
        raw, n = random_blocks(rng, qtype, n_blocks)
        f = gguf.quants.dequantize(raw, qtype).astype("<f4").reshape(-1)
        assert f.size == n
        lines += [f"{qtype.name.lower()} {n}", raw.tobytes().hex(), f.tobytes().hex()]
    (out / "dequant_blocks.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
