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

gpt-4o's pattern is the one llama.cpp runs, which parts from o200k's published one on
non-ASCII case changes and combining marks; `--published` prints the texts where the two split
differently. On every text here, these gpt-4o splits are the ones llama.cpp's own
unicode_regex_split gives (checked by linking its src/unicode.cpp, 0.3.36).

    pip install regex   # 2026.5.9 made the committed file
    python3 tools/tokenizer/pretok_cases.py > tests/data/pretok/cases.tsv
    python3 tools/tokenizer/pretok_cases.py --published

kimi-k2's pattern is likewise the split llama.cpp's own code makes (the same check: on every
text here it gives unicode_regex_split's words); --published lists where tokenization_kimi.py's
pattern differs (case changes and combining marks inside words).
"""
import sys

import regex

CONTRACTIONS_I = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"

# llama.cpp's Han (unicode_cpt_is_han): CJK Unified Ideographs, Extensions A to F, the
# Compatibility Ideographs and their Supplement
KIMI_HAN = (r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002a6df"
            r"\U0002a700-\U0002ebef\U0002f800-\U0002fa1f]")

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
    # gpt-oss's o200k_harmony, Llama 4 (llama.cpp's "gpt-4o"): the pattern as llama.cpp's
    # llama-vocab.cpp runs it, which spells the published o200k classes as "a letter but not
    # a-z" for the upper-case runs and "a letter but not A-Z" for the lower-case ones, and
    # leaves out \p{M}; PUBLISHED_O200K below is the pattern of the tokenizer.json
    "gpt-4o": [r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+"
               r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
               r"|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*"
               r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?"
               r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
    # GLM-4.5 / 4.6 / 4.7 (llama.cpp's "glm4"; tokenizer.json of zai-org/GLM-4.5): llama3's
    "glm4": [CONTRACTIONS_I + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+"],
    # Kimi-K2 (llama.cpp's "kimi-k2"): the split llama.cpp's own code for it makes
    # (unicode_regex_split_custom_kimi_k2), as a pattern: Han runs (llama.cpp's Han ranges, not
    # Unicode's Han script), then any run of other letters with an optional non-letter before
    # it and a contraction after it; it does not split at case changes or keep combining marks
    # in words as the published pattern (PUBLISHED_KIMI_K2) does
    "kimi-k2": [KIMI_HAN + r"+|[^\r\n\p{L}\p{N}]?(?:(?!" + KIMI_HAN + r")\p{L})+"
                r"(?:'[sS]|'[tT]|'[mM]|'[dD]|'[rR][eE]|'[vV][eE]|'[lL][lL])?"
                r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"],
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

# The pattern of o200k's tokenizer.json (and tiktoken's), for --published: where it and
# llama.cpp's spelling part (a non-ASCII letter next to one of the other case, combining
# marks), the cases follow llama.cpp.
PUBLISHED_O200K = [
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
]

# Kimi-K2's tokenization_kimi.py pattern (tiktoken; needs the regex module's V1 for its
# class intersections), for --published
PUBLISHED_KIMI_K2 = [
    r"[\p{Han}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*"
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+"
    r"[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    r"|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
]

# More texts, for every name (qwen_vectors.py uses TEXTS only): what tells gpt-4o from llama3
# and qwen35 (case changes inside words, contractions kept on their word, '/' and newlines
# after punctuation, digit runs beside letters), and non-ASCII case runs.
EXTRA_TEXTS = [
    "camelCaseWord", "HTTPServer", "getHTTPResponse", "iPhone", "ABC", "ABCdef", "abcDEF",
    "I'm", "DON'T stop", "you'RE we've", "Bob's", "x's'", "'ll", "l'été", "it’s",
    "path/to/file", "a/b/", "https://example.com/a?b=1", "</div>\n", "x,\n\ny", "1/2",
    "a //b", "-->\r\n/x", "?!\n/", "abc123def", "v1.2.3-rc4", "12345678901", "x 123 456",
    "ÄpfelBaum", "ПриветМир", "straßeSTRASSE", "ΑθήναΑΘΗΝΑ", "aÉ", "éA", "ǅemal", "ǈ",
    "Ωmega ωMEGA", "éAb", "ñAndú", "ÉCOLEs", "xÀy", "ⅫⅣ", "ʰello", "日本Japan語", "한국Korean", "אבגABC", "ﬁne",
    "Cafe\u0301s", "A\u0301B", "\u0301A", "e\u0301\u0301\u0301", "ক্ষমা", "తెలుగు",
    "😀Smile", "🇫🇷France", "a\u200bb", "a\u00a0\u00a0b", "\t\n \n", "  \n\n  ", "x  \t",
    "<|start|>assistant<|channel|>final<|message|>Hi<|end|>",
]

# More texts for the names added with Kimi-K2 and GLM (the older names' cases stay as they
# were): Han beside kana, Hangul, Latin and digits; Han Extensions, compatibility ideographs
# and CJK marks outside llama.cpp's Han ranges; Han before a contraction; letters after
# punctuation; marks after Han.
HAN_TEXTS = [
    "\u6f22\u5b57\u3072\u3089\u304c\u306a\u30ab\u30bf\u30ab\u30ca", "\u4e2d\u6587English\u6df7\u5408",
    "\u4f60\u597d'll", "it\u4e2d's", "\u3400\u4e00\u9fff\uf900\ufaff",
    "\U00020000\U0002a6df\U0002f800", "\u3005\u3007\u2e80\u2f00\u31c0", "\u6587\u0301\u5b57",
    "\u4e00 \u4e8c  \u4e09\n\u56db", "\"\u5f15\u7528\"", "(\u62ec\u53f7)abc",
    "\uff08\u5168\u89d2\uff09", "\uac00\u4e00a1", "123\u4e07456", "\u4e00'S", " 'll", "x'RE",
    "Hello\u4e16\u754cWorld", "\u00e9\u4e16", "\u4e16\u00e9", "don't\u4e2d", "\u4e2d\u3002\u6587",
]


def split(patterns, text, flags=0):
    pieces = [text] if text else []
    for pat in patterns:
        rx = regex.compile(pat, flags)
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
    if sys.argv[1:] == ["--published"]:
        # texts on which llama.cpp's spelling of the gpt-4o pattern and o200k's published
        # one split differently
        for name, published, flags, texts in (
                ("gpt-4o", PUBLISHED_O200K, 0, TEXTS + EXTRA_TEXTS),
                ("kimi-k2", PUBLISHED_KIMI_K2, regex.V1, TEXTS + EXTRA_TEXTS + HAN_TEXTS)):
            for text in texts:
                a = split(PATTERNS[name], text)
                b = split(published, text, flags)
                if a != b:
                    sys.stdout.write("%s %r\n  llama.cpp %r\n  published %r\n"
                                     % (name, text, a, b))
        return
    for name, pats in PATTERNS.items():
        more = HAN_TEXTS if name in ("glm4", "kimi-k2") else []
        for text in TEXTS + EXTRA_TEXTS + more:
            words = split(pats, text)
            assert "".join(words) == text
            hexwords = ",".join(w.encode("utf-8").hex() for w in words)
            sys.stdout.write("%s\t%s\t%s\n" % (name, text.encode("utf-8").hex(), hexwords))


if __name__ == "__main__":
    main()
