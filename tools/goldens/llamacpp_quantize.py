"""llamacpp_quantize.py - a GGUF quantized by llama.cpp's own quantizer (llama-cpp-python).

Usage: python3 tools/goldens/llamacpp_quantize.py IN.gguf OUT.gguf [FTYPE]
FTYPE is a llama_ftype name without its prefix, default MOSTLY_Q4_K_M (what llama-quantize
calls Q4_K_M). Default parameters otherwise (no imatrix, 2 threads), as
`llama-quantize IN OUT Q4_K_M 2` would quantize it.
"""

import sys

import llama_cpp.llama_cpp as L


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit(__doc__)
    name = "LLAMA_FTYPE_" + (sys.argv[3] if len(sys.argv) == 4 else "MOSTLY_Q4_K_M")
    ftype = getattr(L, name, None)
    if ftype is None:
        sys.exit(f"{name}: not a llama_ftype of this llama-cpp-python")
    p = L.llama_model_quantize_default_params()
    p.ftype = ftype
    p.nthread = 2
    rc = L.llama_model_quantize(sys.argv[1].encode(), sys.argv[2].encode(), p)
    if rc != 0:
        sys.exit(f"llama_model_quantize failed ({rc})")


if __name__ == "__main__":
    main()
