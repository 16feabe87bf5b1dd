#!/usr/bin/env python3
"""The independent loader check of tests/test_gen_model.c: llama.cpp (through llama-cpp-python)
loads the GGUF named by argv[1], which fails unless every tensor its architecture's loader
requires is there with the shape it wants, and evaluates argv[2] tokens (ids 3 + (37 i mod 1000),
after BOS). Prints "loaded N_VOCAB finite|nonfinite". Exit code 77 when llama_cpp or numpy is not
installed, 1 when the model does not load."""
import sys

try:
    import numpy as np
    import llama_cpp
except ImportError as e:
    print(f"llama_cpp unavailable: {e}", file=sys.stderr)
    sys.exit(77)

n = int(sys.argv[2])
try:
    m = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=max(64, n + 8), n_batch=n + 8,
                        logits_all=True, verbose=False, n_threads=2)
except Exception as e:  # llama-cpp-python raises ValueError for a model that does not load
    print(f"load failed: {e}", file=sys.stderr)
    sys.exit(1)
toks = [1] + [3 + (37 * i) % 1000 for i in range(n - 1)]
m.eval(toks)
scores = np.array(m.scores[: len(toks)])
print(f"loaded {m.n_vocab()} {'finite' if np.isfinite(scores).all() and scores.std() > 0 else 'nonfinite'}")
