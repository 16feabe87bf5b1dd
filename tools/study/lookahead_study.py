#!/usr/bin/env python3
"""Gate lookahead on a trained model (default: the trained default model): precision, recall,
the precision on the experts that had to be read, demand misses and stall per token at 50 % and
25 % cache for --lookahead 0, 1, 2, summed over ten sampled runs of
`moeinf run -p "The module" -n 64 --seed 1..10 --prefetch 0` (no policy prefetch beside the
lookahead; run from the repository root after a release build). Prints one line per setting.

    tools/study/lookahead_study.py [MODEL]"""
import json, subprocess, sys
model = sys.argv[1] if len(sys.argv) > 1 else "models/trained-moe-Q8_0.gguf"
for c in (50, 25):
    for la in (0, 1, 2):
        P = C = A = T = R = U = 0; ST = 0.0; MISS = 0
        for s in range(1, 11):
            subprocess.run(["build/release/moeinf", "run", "-m", model, "-p", "The module",
                            "-n", "64", "--seed", str(s), "--expert-cache", f"{c}%", "--lookahead", str(la),
                            "--prefetch", "0", "--stats-json", "/tmp/la.json"], capture_output=True, check=True)
            d = json.load(open("/tmp/la.json")); l = d["lookahead_prediction"]
            P += l["predicted"]; C += l["correct"]; A += l["actual"]; R += l["reads"]; U += l["reads_used"]; ST += d["stall_seconds"]; T += d["tokens"]; MISS += d["misses"]
        prec = C / P if P else 0; rec = C / A if A else 0
        print(f"cache {c}% lookahead {la}: precision {prec:.3f} recall {rec:.3f} ({P} named), "
              f"on the experts that had to be read {U / R if R else 0:.3f} ({R} reads); "
              f"demand misses/token {MISS/T:.2f}; stall {1000*ST/T:.3f} ms/token over {T} tokens")
