#!/usr/bin/env python3
"""Writes the dequantization fixtures of tests/test_quant_dequant.c from the reference
dequantizers of the `gguf` PyPI package (gguf.quants.dequantize, a numpy port of ggml's
dequantize_row_* functions), so the tests need no Python at run time.

  python3 tools/quant/make_dequant_fixtures.py SHARED_DIR OUT_DIR

tests/data/dequant_tiny.txt: for every quantized tensor of the two tiny Q4_K_M models, the
  FNV-1a 64 hash of its dequantized float32 bytes (little-endian, row-major).
tests/data/dequant_blocks.txt: per type, random blocks (random quant bytes, finite random F16
  scales; MXFP4: E8M0 scales from the subnormal 2^-128 to 2^127) and their dequantized floats,
  both in hex; this covers the types no tiny model holds (Q4_1, Q5_1, Q2_K, Q3_K, IQ4_NL,
  IQ4_XS, MXFP4) and every other block type as well.
tests/data/quantize_blocks.txt: per type gguf.quants.quantize() can write that moeinf
  quantizes the same way (MXFP4), random float blocks (normal values at random scales, an
  all-zero block, a block of exact ties between codes, an amax just below a power of two)
  and the blocks gguf-py writes for them, both in hex.

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
    T.IQ4_NL: [0], T.IQ4_XS: [0], T.MXFP4: [],
}

# MXFP4's E8M0 byte: the first blocks take the edge exponents (subnormal halves, overflow to
# inf with the largest codes), the others random ones.
E8M0_EDGES = [0, 1, 2, 127, 128, 253, 254, 255]


def random_blocks(rng, qtype, n_blocks):
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(n_blocks, size), dtype=np.uint8)
    for off in HALF_FIELDS[qtype]:
        # finite halves in [2^-10, 2^3), either sign
        h = rng.integers(0, 1 << 10, size=n_blocks) | (rng.integers(5, 18, size=n_blocks) << 10)
        h |= rng.integers(0, 2, size=n_blocks) << 15
        raw[:, off] = (h & 0xFF).astype(np.uint8)
        raw[:, off + 1] = (h >> 8).astype(np.uint8)
    if qtype == T.MXFP4:
        raw[:len(E8M0_EDGES), 0] = E8M0_EDGES
    return raw.reshape(-1), n_blocks * block


def mxfp4_float_blocks(rng):
    """Float blocks for the MXFP4 quantizer: random, zero, ties, an amax below 2^k."""
    blocks = [rng.standard_normal(32) * 10.0 ** rng.uniform(-4, 4) for _ in range(20)]
    blocks.append(np.zeros(32))
    # amax 8 gives the half scale 1: codes are worth 0, 1, 2, 3, 4, 6, 8, 12; x halfway
    # between two of them is a tie, which both quantizers give to the first code.
    ties = [8.0, 0.5, -0.5, 1.5, -1.5, 2.5, 3.5, 5.0, -5.0, 7.0, -7.0, 10.0, -10.0, 0.25, 0.0]
    blocks.append(np.array(ties + [0.0] * (32 - len(ties))))
    below = np.nextafter(np.float32(8.0), np.float32(0.0))  # amax just below 2^3
    blocks.append(np.array([below, 3.0, -6.5] + [1.0] * 29))
    return np.concatenate(blocks).astype(np.float32)


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

    lines = [f"# float blocks and gguf.quants.quantize() of them ({version})",
             "# type n_elements, then the float32 values in hex, then the blocks in hex"]
    x = mxfp4_float_blocks(rng)
    q = gguf.quants.quantize(x.reshape(1, -1), T.MXFP4).reshape(-1)
    lines += [f"mxfp4 {x.size}", x.astype("<f4").tobytes().hex(), q.tobytes().hex()]
    (out / "quantize_blocks.txt").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
