#!/usr/bin/env python3
"""Expected pre-tokenizer splits for the BPE families without llama.cpp test vectors.

Applies each family's published split patterns (tokenizer.json's pre_tokenizer; llama.cpp's
src/llama-vocab.cpp quotes them per tokenizer.ggml.pre name) with Python's `regex` module to
hand-written texts, the way HF tokenizers' Split(behavior="Isolated") and llama.cpp do: the
patterns apply in order, each one cutting every piece the previous ones left into its matches
and the stretches between them; a pattern sees one piece at a time.

Writes tests/data/pretok/cases.tsv: one line per (name, text):
    <pre name> TAB <text as hex> TAB <word as hex>,<word as hex>,...
tests/test_tokenizer_bpe.c holds moeinf's pre-tokenizers (PCRE2) to these splits.

    pip install regex   # 2026.5.9 made the committed file
    python3 tools/tokenizer/pretok_cases.py > tests/data/pretok/cases.tsv
"""
import sys

import regex

CONTRACTIONS_I = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"

PATTERNS = {
    # Qwen2 / Qwen2-MoE / Qwen3-MoE (tokenizer.json of Qwen/Qwen1.5-MoE-A2.7B, Qwen3-30B-A3B)
    "qwen2": [CONTRACTIONS_I + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
              r"|\s*[\r\n]+|\s+(?!\S)|\s+"],
    # Qwen3.5 / Qwen3.6 (llama.cpp's "qwen35", from Qwen3.5's tokenizer.json): qwen2's with
    # combining marks (\p{M}) inside letter runs and out of symbol runs
    "qwen35": [CONTRACTIONS_I + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
               r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    # Llama 3 (tokenizer.json of meta-llama/Meta-Llama-3-8B)
    "llama3": [CONTRACTIONS_I + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+"],
    # OLMo / OLMoE: GPT-2's (tokenizer.json of allenai/OLMoE-1B-7B-0924, GPT-NeoX based)
    "olmo": [r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"],
    # DeepSeek-V3 (tokenizer.json of deepseek-ai/DeepSeek-V3: a Sequence of three Splits)
    "deepseek-v3": [
        r"\p{N}{1,3}",
        r"[一-龥぀-ゟ゠-ヿ]+",
        r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"
        r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ],
}

TEXTS = [
    # digits: grouping by one or three, in words, with separators
    "1", "12", "123", "1234", "1234567", "3.14159", "x=12345;", "v2.0.10", "٣٤٥ ५६", "10,000,000",
    # contractions, both cases
    "I'm here", "DON'T", "we'Ve", "it's they'll she'd", "'s", "rock 'n' roll", "O'Neil's",
    # letters: accents (composed and combining), Cyrillic, Greek
    "Café naïve", "Cafe\u0301 nai\u0308ve", "нещо на Български", "Ελληνικά", "Äpfel",
    # combining marks: Thai, Vietnamese, Arabic harakat, Devanagari; after a space, a digit,
    # punctuation; at the start
    "สวัสดี", "tie\u0302\u0301ng Vie\u0323\u0302t", "لُغَة", "नमस्ते", "x \u0301y", "1\u0301",
    "!\u0301?", "\u0301abc", "ti\u00ea\u0301ng Vi\u00ea\u0323t",
    # CJK, kana, Hangul
    "我想在apple工作1314151天", "こんにちは世界", "カタカナとひらがな", "안녕하세요 세계",
    "日本語テキスト123", "中文，标点。",
    # emoji, ZWJ sequences, variation selectors
    "🚀🔥!", "😶\u200d🌫️ ok", "👍🏽 done", "a🦙b",
    # whitespace runs, tabs, trailing space, non-breaking and ideographic spaces
    " ", "   ", "a   b", "a \t b", "\t\t x", "end   ", "  lead", "no\u00a0break", "全\u3000角",
    # newlines
    "\n", "a\nb", "a\n\nb", "line\r\nnext", "  \n  x", "x\n\n\n", "};\n\n  return",
    # punctuation and symbols
    "Hello, world!!!", "--==>>", "a!~b", "(normal)", "...?!", "$100 + 5% = ~$105", "`code`",
    "#include <stdio.h>", "<|im_start|>user",
    # mixed
    "def add(a, b):\n    return a + b\n", "Hello world", " Hello World!",
]


def split(patterns, text):
    pieces = [text] if text else []
    for pat in patterns:
        rx = regex.compile(pat)
        out = []
        for piece in pieces:
            done = 0
            for m in rx.finditer(piece):
                if m.end() == m.start():
                    continue
                if m.start() > done:
                    out.append(piece[done:m.start()])
                out.append(m.group())
                done = m.end()
            if done < len(piece):
                out.append(piece[done:])
        pieces = out
    return pieces


def main():
    for name, pats in PATTERNS.items():
        for text in TEXTS:
            words = split(pats, text)
            assert "".join(words) == text
            hexwords = ",".join(w.encode("utf-8").hex() for w in words)
            sys.stdout.write("%s\t%s\t%s\n" % (name, text.encode("utf-8").hex(), hexwords))


if __name__ == "__main__":
    main()
