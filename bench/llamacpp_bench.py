#!/usr/bin/env python3
"""llama.cpp's prefill and decode tokens/s on a GGUF file, through llama-cpp-python.

Mirrors `moeinf bench`: a prompt of P fixed pseudo-random tokens in a fresh context, then N
single-token decodes; one warm-up run discarded, then R runs; the median is printed as
"prefill <tok/s>" and "decode <tok/s>" lines. Wall-clock timing around llama.cpp's eval
calls: the Python call overhead (tens of microseconds a call) counts against llama.cpp.
eval (logits_all off) computes the logits of the last position of every n_batch chunk and
copies them out, as `moeinf bench` does without --no-logits.

--system-info prints llama.cpp's build line (which SIMD it was compiled with) and exits.

--no-repack turns off llama.cpp's weight repacking (llama_model_params.use_extra_bufts, which
llama-cpp-python's Llama does not expose): the CPU backend copies the types it repacks (Q4_K
among them, on AVX2) into anonymous memory at load, so with --mmap such weights are not paged
from the file but held, which a memory cgroup smaller than the file cannot evict.
"""
import argparse
import statistics
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m")
    ap.add_argument("--system-info", action="store_true", help="print llama.cpp's system info")
    ap.add_argument("-p", type=int, default=64)
    ap.add_argument("-n", type=int, default=32)
    ap.add_argument("-t", type=int, default=2)
    ap.add_argument("-r", type=int, default=3)
    ap.add_argument("--mmap", action="store_true", help="page weights in through mmap (default: load)")
    ap.add_argument("--no-repack", action="store_true", help="no weight repacking (see the top)")
    a = ap.parse_args()
    import llama_cpp

    if a.system_info:
        print("system info:", llama_cpp.llama_print_system_info().decode().strip())
        return 0
    if not a.m:
        ap.error("-m is required")
    if a.no_repack:
        import llama_cpp.llama as llama_py

        low = llama_py.llama_cpp  # the ctypes module Llama takes its default params from
        defaults = low.llama_model_default_params

        def no_repack_params():
            p = defaults()
            p.use_extra_bufts = False
            return p

        low.llama_model_default_params = no_repack_params

    llm = llama_cpp.Llama(model_path=a.m, n_ctx=a.p + a.n + 8, n_batch=512, n_threads=a.t,
                          n_threads_batch=a.t, use_mmap=a.mmap, verbose=False)
    n_vocab = llm.n_vocab()
    state = 0x9E3779B97F4A7C15
    ids = []
    for _ in range(a.p + a.n + 1):
        state = (state * 6364136223846793005 + 1442695040888963407) % (1 << 64)
        ids.append((state >> 33) % n_vocab)
    pp, tg = [], []
    for r in range(-1, a.r):
        llm.reset()  # fresh context: the KV cache is overwritten from position 0
        t0 = time.perf_counter()
        if a.p:
            llm.eval(ids[: a.p])
        t1 = time.perf_counter()
        for i in range(a.n):
            llm.eval([ids[a.p + i]])
        t2 = time.perf_counter()
        if r >= 0:
            if a.p:
                pp.append(a.p / (t1 - t0))
            if a.n:
                tg.append(a.n / (t2 - t1))
    if pp:
        print(f"prefill {statistics.median(pp):.2f}")
    if tg:
        print(f"decode {statistics.median(tg):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
