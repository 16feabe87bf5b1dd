#!/usr/bin/env python3
"""Widen the trained default model's experts without changing what it computes.

    tools/train/widen_experts.py [--ff 6400] [--in models/trained-moe-Q8_0.gguf] OUT.gguf

Each expert's SwiGLU gets hidden units up to --ff (a multiple of 32) whose gate, up and down
weights are all zero: a unit's silu(0) * 0 is 0 and its down column is 0, so the units add
exact zeros and the model routes and predicts as the trained one does (the routers, attention
and norms are copied byte for byte). What grows is each expert's size: 39 KB in the trained
file, 3.9 MB at --ff 6400, which makes an expert read from the disk take longer than a layer's
compute, the regime where reading ahead can pay (docs/OFFLOAD.md). Only Q8_0 expert tensors
are widened (the trained file's type); the Q8_0 blocks are copied, not requantised, and a
zero block is 34 zero bytes (scale 0, quants 0).

Needs the `gguf` package (tools/train/requirements.txt pins it).
"""
import argparse
import sys

import numpy as np
import gguf

Q8_0_BLOCK = 32          # weights per Q8_0 block
Q8_0_BYTES = 34          # an f16 scale and 32 int8 quants


def widen(data: np.ndarray, name: str, ff_old: int, ff_new: int) -> np.ndarray:
    """The raw Q8_0 bytes of one expert tensor, with its ff dimension padded by zeros."""
    if name.endswith("ffn_down_exps.weight"):
        # [n_expert, n_embd, ff bytes]: each row of ff weights gains zero blocks at its end
        extra = (ff_new - ff_old) // Q8_0_BLOCK * Q8_0_BYTES
        return np.pad(data, ((0, 0), (0, 0), (0, extra)))
    # gate and up: [n_expert, ff, n_embd bytes]: zero rows after the trained ones
    return np.pad(data, ((0, 0), (0, ff_new - ff_old), (0, 0)))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("--in", dest="src", default="models/trained-moe-Q8_0.gguf")
    ap.add_argument("--ff", type=int, default=6400)
    args = ap.parse_args()

    reader = gguf.GGUFReader(args.src)
    arch = reader.fields["general.architecture"].contents()
    ff_key = f"{arch}.feed_forward_length"
    ff_old = int(reader.fields[ff_key].contents())
    if args.ff % Q8_0_BLOCK or args.ff < ff_old:
        print(f"widen_experts: --ff {args.ff} must be a multiple of {Q8_0_BLOCK} and at least "
              f"the file's {ff_old}", file=sys.stderr)
        return 2

    writer = gguf.GGUFWriter(args.out, arch)
    for field in reader.fields.values():
        if field.name == "general.architecture" or field.name.startswith("GGUF."):
            continue  # the writer writes these itself
        vtype = field.types[0]
        sub = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        value = field.contents()
        if field.name == ff_key:
            value = args.ff
        elif field.name == "general.name":
            value = f"{value}, experts widened to {args.ff} with zero units"
        writer.add_key_value(field.name, value, vtype, sub_type=sub)

    for t in reader.tensors:
        data = np.asarray(t.data)
        if "_exps." in t.name and t.name.split(".")[-2] in ("ffn_gate_exps", "ffn_up_exps",
                                                            "ffn_down_exps"):
            if t.tensor_type != gguf.GGMLQuantizationType.Q8_0:
                print(f"widen_experts: {t.name} is {t.tensor_type.name}, only Q8_0 experts are "
                      "widened", file=sys.stderr)
                return 1
            data = widen(data, t.name, ff_old, args.ff)
        if t.tensor_type in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16):
            writer.add_tensor(t.name, data)
        else:
            writer.add_tensor(t.name, data, raw_dtype=t.tensor_type)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
