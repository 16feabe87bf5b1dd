#!/usr/bin/env bash
# Prefill and decode tokens/s of moeinf next to llama.cpp (llama-cpp-python) on the same GGUF
# files and thread counts, and each engine's decode rate as a fraction of the memory-bandwidth
# limit (weight bytes read per token / streaming-read bandwidth measured here, same threads).
#
#   bench/compare_llamacpp.sh [-t "2 1"] [-p 64] [-n 32] [-r 3] [--rounds 3]
#                             [--models "mixtral-q8_0 mixtral-q4_0 olmoe-q8_0"] [--olmoe-layers 16]
#                             [--qwen3-layers 8] [--qwen36-layers 8] [--gptoss-layers 24]
#                             [--dsv2lite-layers 8]
#
# Equal work: llama-cpp-python's eval computes the last position's logits of every batch, so
# `moeinf bench` does too (final norm and lm_head after every prefill micro-batch and every
# decoded token). Each engine runs `rounds` times, alternating moeinf, llama.cpp and the
# bandwidth measurement so that a noisy spell on a shared machine hits all three; each round
# is one warm-up plus -r repetitions (median). The table keeps each engine's best round and
# the best bandwidth; the noise columns give the range of the per-round ratios. The fraction
# of the bandwidth limit is paired in time: bench_bandwidth runs before and after each
# engine's run, each round's decode GB/s is divided by the better of those two, and the table
# shows the median over rounds (the best decode over the best bandwidth of any round would
# pair two unrelated lucky spells: a shared machine's bandwidth moves by a sixth within
# minutes, docs/PERFORMANCE.md). The streaming read covers a buffer of one token's weight
# bytes, not more: a large last-level cache shared by the host holds part of a small model
# between tokens, and streaming a larger buffer would miss it, so decode could beat that
# "limit" (it did, on the cut models: docs/PERFORMANCE.md). A stream over one token's bytes
# is the like-sized workload, not a strict bound: decode reuses the attention weights and
# some experts from token to token and can still get more from the cache than the stream.
#
# Models, written once by `moeinf gen-model` into bench/models/ (llama SentencePiece vocabulary,
# 32000 tokens, when ../shared has it):
#   mixtral-*   Mixtral-shaped: 8 layers, 8 experts, top-2, n_embd 2048, expert FFN 5632,
#               16 heads, 4 KV heads (Q8_0 2.6 GB, Q4_0 1.4 GB)
#   olmoe-*     OLMoE-1B-7B-shaped (--preset olmoe-1b-7b): 16 layers, 64 experts, top-8,
#               n_embd 2048, expert FFN 1024, 16 heads and KV heads (Q8_0 7.3 GB;
#               --olmoe-layers shrinks it for small disks)
#   qwen3-*     Qwen3-30B-A3B-shaped (--preset qwen3-30b-a3b, arch qwen3moe): 128 experts,
#               top-8, n_embd 2048, expert FFN 768, 32 heads, 4 KV heads, head dim 128; the
#               real model's 48 layers cut to --qwen3-layers (default 8), and the llama
#               vocabulary (32000 tokens) instead of Qwen's 151936, which leaves the lm_head
#               a fifth of the real one's
#   qwen36-*    Qwen3.6-35B-A3B-shaped (--preset qwen3.6-35b-a3b, arch qwen35moe): 256 experts,
#               top-8, expert FFN 512 plus a shared expert of 512, n_embd 2048, Gated DeltaNet
#               layers (16 key / 32 value heads of 128) with a gated full-attention layer (16
#               heads, 2 KV heads, head dim 256) every 4th; the real model's 40 layers cut to
#               --qwen36-layers (default 8), and gen-model's own vocabulary padded to the real
#               248320 tokens (not the llama one: the lm_head, 0.42 GB of Q6_K, is about a
#               fifth of a token's 2.0 GB of weights in the full model, and over half of the
#               8-layer cut's 0.73 GB); the Done-when row of issue 25 is qwen36-q4_k_m
#               (Q4_K_M, 4.8 GB at 8 layers)
#   gptoss20b-* gpt-oss-20b-shaped (--preset gpt-oss-20b, arch gpt-oss): 24 layers (cut with
#               --gptoss-layers), 32 experts, top-4, n_embd and expert FFN 2880, 64 heads of
#               64, 8 KV heads, sliding window 128 on every other layer, biases and sinks;
#               gen-model's own vocabulary padded to the real 201088 tokens. The published
#               files' types are gptoss20b-mxfp4_moe (experts MXFP4, the rest Q8_0: 12.1 GB,
#               of which a decoded token reads about 2.6 GB), the row of issue 26
#   dsv2lite-*  DeepSeek-V2-Lite-shaped (--preset deepseek-v2-lite, arch deepseek2): multi-head
#               latent attention (16 heads, no query compression, a 512-wide latent and a
#               64-dim rotary key cached per token, the split attn_k_b/attn_v_b layout), one
#               leading dense layer (FFN 10944), then 64 experts top-6 of width 1408 plus 2
#               shared; the real model's 27 layers cut to --dsv2lite-layers (default 8: 2.9 GB
#               at Q4_K_M; 27 is the whole 10.4 GB file), gen-model's own vocabulary padded to
#               the real 102400 tokens; the Done-when row of issue 27 is dsv2lite-q4_k_m
# Installs the pinned llama-cpp-python when needed (bench/lib/llamacpp.sh; bench/README.md
# says how long each step takes). Ratios are measured in one run: these
# machines are shared and noisy, so compare ratios, not absolute figures across runs.
set -euo pipefail
cd "$(dirname "$0")/.."
threads=$(nproc) prompt=64 gen=32 reps=3 rounds=3 olmoe_layers=16 qwen3_layers=8 qwen36_layers=8
gptoss_layers=24 dsv2lite_layers=8
models="mixtral-q8_0 mixtral-q4_0 olmoe-q8_0"
usage() {
  echo "usage: $0 [-t \"THREADS...\"] [-p N] [-n N] [-r N] [--rounds N] [--models \"...\"]" \
       "[--olmoe-layers N] [--qwen3-layers N] [--qwen36-layers N] [--gptoss-layers N]" \
       "[--dsv2lite-layers N]" >&2
  exit 2
}
while [ $# -gt 0 ]; do
  [ $# -ge 2 ] || usage
  case "$1" in
    -t) threads=$2 ;;
    -p) prompt=$2 ;;
    -n) gen=$2 ;;
    -r) reps=$2 ;;
    --rounds) rounds=$2 ;;
    --models) models=$2 ;;
    --olmoe-layers) olmoe_layers=$2 ;;
    --qwen3-layers) qwen3_layers=$2 ;;
    --qwen36-layers) qwen36_layers=$2 ;;
    --gptoss-layers) gptoss_layers=$2 ;;
    --dsv2lite-layers) dsv2lite_layers=$2 ;;
    *) usage ;;
  esac
  shift 2
done

. bench/lib/llamacpp.sh
. bench/lib/report.sh
llamacpp_install
cmake --preset release >/dev/null && cmake --build build/release -j"$(nproc)" >/dev/null
bin=build/release/moeinf
vocab=../shared/testdata/tokenizer/ggml-vocab-llama-spm.gguf
[ -f "$vocab" ] || vocab=""
mkdir -p bench/models

model_file() { # name -> path, generating the file on first use
  local name=$1 shape=${1%-*} type=${1##*-} path voc=$vocab
  case "$shape" in
    mixtral) path=bench/models/mixtral-shape-$type.gguf
             set -- --layers 8 --experts 8 --top-k 2 --embd 2048 --ff 5632 --heads 16 \
                    --kv-heads 4 ;;
    olmoe) path=bench/models/olmoe-shape-L$olmoe_layers-$type.gguf
           set -- --preset olmoe-1b-7b --layers "$olmoe_layers" ;;
    qwen3) path=bench/models/qwen3-shape-L$qwen3_layers-$type.gguf
           set -- --preset qwen3-30b-a3b --layers "$qwen3_layers" ;;
    qwen36) path=bench/models/qwen36-shape-L$qwen36_layers-$type.gguf voc=""
            set -- --preset qwen3.6-35b-a3b --layers "$qwen36_layers" ;;
    gptoss20b) path=bench/models/gptoss20b-shape-L$gptoss_layers-$type.gguf voc=""
               set -- --preset gpt-oss-20b --layers "$gptoss_layers" ;;
    dsv2lite) path=bench/models/dsv2lite-shape-L$dsv2lite_layers-$type.gguf voc=""
              set -- --preset deepseek-v2-lite --layers "$dsv2lite_layers" ;;
    *) echo "unknown model '$name' (mixtral-TYPE, olmoe-TYPE, qwen3-TYPE, qwen36-TYPE," \
            "gptoss20b-TYPE or dsv2lite-TYPE)" >&2
       exit 2 ;;
  esac
  if [ ! -f "$path" ]; then
    "$bin" gen-model -o "$path" "$@" --type "$type" --seed 7 ${voc:+--vocab-from "$voc"} \
      >/dev/null
  fi
  echo "$path"
}

best() { awk -v a="$1" -v b="$2" 'BEGIN { print (b > a ? b : a) }'; }
# field KEY COLUMN <<< text: that column of the first line starting with KEY
field() { awk -v k="$1" -v c="$2" '$1 == k { print $c; exit }'; }

echo "llama.cpp: llama-cpp-python $LLAMA_CPP_PYTHON_VERSION, $(python3 bench/llamacpp_bench.py \
  --system-info)"
# the CPU: its name (a virtual machine's may be as generic as "Intel(R) Xeon(R) Processor"), and
# family / model / stepping and the widest vector extension, which tell the generations apart
cpu_simd=$(grep -qw avx512f /proc/cpuinfo && echo AVX-512 ||
           { grep -qw avx2 /proc/cpuinfo && echo AVX2 || echo "no AVX2"; })
cpu_line "$cpu_simd"
echo "prompt $prompt tokens, $gen decoded tokens, $rounds alternating rounds of 1 + $reps runs"
echo "bw: bench_bandwidth over a buffer of one token's weight bytes (the model's 'decode reads')"
for t in $threads; do
  for name in $models; do
    model=$(model_file "$name")
    size=$(stat -L -c %s "$model")
    pp_o=0 tg_o=0 pp_l=0 tg_l=0 bw=0 ratios=""
    # one token's weight bytes, as the buffer of the streaming read (see the top)
    gbtok=$("$bin" bench -m "$model" -t "$t" -p 1 -n 1 -r 1 |
            sed -n 's/.*decode reads \([0-9.]*\) GB.*/\1/p')
    mib=$(awk -v g="$gbtok" 'BEGIN { m = int(g * 1e9 / 1048576 + 0.5); print (m < 16 ? 16 : m) }')
    bw_a=$(build/release/bench_bandwidth -t "$t" -s "$mib" 2>/dev/null)
    for ((round = 0; round < rounds; round++)); do
      ours=$("$bin" bench -m "$model" -t "$t" -p "$prompt" -n "$gen" -r "$reps")
      bw_b=$(build/release/bench_bandwidth -t "$t" -s "$mib" 2>/dev/null)
      peer=$(python3 bench/llamacpp_bench.py -m "$model" -t "$t" -p "$prompt" -n "$gen" -r "$reps")
      bw_c=$(build/release/bench_bandwidth -t "$t" -s "$mib" 2>/dev/null)
      bw=$(best "$bw" "$(best "$bw_a" "$(best "$bw_b" "$bw_c")")")
      po=$(field prefill 4 <<<"$ours") to=$(field decode 4 <<<"$ours")
      pl=$(field prefill 2 <<<"$peer") tl=$(field decode 2 <<<"$peer")
      pp_o=$(best "$pp_o" "$po") tg_o=$(best "$tg_o" "$to")
      pp_l=$(best "$pp_l" "$pl") tg_l=$(best "$tg_l" "$tl")
      # each engine's decode against the better of the two bandwidths measured just before
      # and just after it
      ratios+="$po $pl $to $tl $(best "$bw_a" "$bw_b") $(best "$bw_b" "$bw_c")"$'\n'
      bw_a=$bw_c
    done
    kern=$(sed -n 's/.*kernels \([a-z0-9]*\),.*/\1/p' <<<"$ours")
    if [ "$t" = "${threads%% *}" ] && [ "$name" = "${models%% *}" ]; then
      printf "moeinf kernels: %s\n\n" "$kern"
      printf "%-3s %-13s %5s | %7s %7s %5s %11s | %7s %7s %5s %11s | %5s | %-11s %-11s\n" \
        thr model GB "pp ours" "pp llama" ratio "(rounds)" "tg ours" "tg llama" ratio \
        "(rounds)" "bw" "tg ours GB/s" "tg llama GB/s"
    fi
    awk -v t="$t" -v n="$name" -v s="$size" -v po="$pp_o" -v pl="$pp_l" -v to="$tg_o" \
        -v tl="$tg_l" -v g="$gbtok" -v bw="$bw" -v r="$ratios" '
    # the median of a[1..n] (sorts a; insertion sort: a few rounds)
    function median(a, n,    i, j, x) {
      for (i = 2; i <= n; i++)
        for (j = i; j > 1 && a[j] < a[j - 1]; j--) { x = a[j]; a[j] = a[j - 1]; a[j - 1] = x }
      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    }
    BEGIN {
      k = split(r, rows, "\n"); pmin = tmin = 1e9; pmax = tmax = 0; nr = 0
      for (i = 1; i <= k; i++) {
        if (split(rows[i], f, " ") < 6) continue
        p = f[1] / f[2]; d = f[3] / f[4]
        pmin = p < pmin ? p : pmin; pmax = p > pmax ? p : pmax
        tmin = d < tmin ? d : tmin; tmax = d > tmax ? d : tmax
        nr++; fo[nr] = f[3] * g / f[5]; fl[nr] = f[4] * g / f[6]
      }
      mo = median(fo, nr); ml = median(fl, nr) # the per-round fractions of the bandwidth
      printf "%-3s %-13s %5.2f | %7.1f %7.1f %4.2fx (%.2f-%.2f) | %7.2f %7.2f %4.2fx (%.2f-%.2f)" \
             " | %5.1f | %4.1f (%3.0f%%) %4.1f (%3.0f%%)\n",
        t, n, s / 1e9, po, pl, po / pl, pmin, pmax, to, tl, to / tl, tmin, tmax, bw,
        to * g, 100 * mo, tl * g, 100 * ml }'
  done
done
