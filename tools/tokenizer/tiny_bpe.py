"""tiny_bpe.py - the byte-level BPE that the synthetic vocabularies of moeinf's test models are
learned with (tools/goldens/make_tiny_qwen35.py, make_tiny_gptoss.py,
tools/tokenizer/o200k_synthetic.py): GPT-2's byte-to-character map, and merges learned from
pre-tokenized words, the most frequent pair first (ties: the smaller pair).
"""

import collections


def gpt2_bytes():
    """GPT-2's printable stand-in for each byte, as {byte: character}."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def learn_merges(words, n_merges):
    """Up to n_merges merges (pairs of symbols) learned from `words`, a Counter of tuples of
    symbols (a pre-tokenized word's characters) to their counts."""
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        merges.append(best)
        joined = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and (w[i], w[i + 1]) == best:
                    out.append(w[i] + w[i + 1])
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            joined[tuple(out)] += c
        words = joined
    return merges
