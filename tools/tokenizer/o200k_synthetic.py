#!/usr/bin/env python3
"""A synthetic o200k_harmony-style vocabulary and llama.cpp's ids and rules for it.

No real o200k vocabulary can be fetched here, so this makes a small one of the same kind: a
gpt-oss-style GGUF (tokenizer.ggml.model "gpt2", pre "gpt-4o", no tensors) whose 256 byte
tokens and merges come from a tiny byte-level BPE trained on a fixed corpus (pre-split with
pretok_cases.py's gpt-4o pattern), followed by the harmony special tokens in o200k_harmony's
order (<|startoftext|>, <|endoftext|>, <|reserved_200000|>, ..., <|return|>, <|constrain|>,
<|channel|>, <|start|>, <|end|>, <|message|>, <|call|>, all of type control, as the published
GGUFs have them) with BOS <|startoftext|>, EOS <|return|> and padding <|endoftext|>.

llama.cpp (llama-cpp-python 0.3.36, vocab only) then gives the expectations:
  o200k-synthetic.gguf.inp/.out           ids of each text, parse_special off (llama.cpp's
                                          test-tokenizer-0 format)
  o200k-synthetic-special.gguf.inp/.out   the same texts with parse_special on
  o200k-synthetic.gguf.special            per special token: id, text, attributes, whether it
                                          ends generation, its piece with special off and on

    pip install llama-cpp-python==0.3.36 regex gguf
    python3 tools/tokenizer/o200k_synthetic.py tests/data/tokenizer
"""
import collections
import os
import sys

import gguf
import llama_cpp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pretok_cases import EXTRA_TEXTS, PATTERNS, TEXTS, split  # noqa: E402
from tiny_bpe import gpt2_bytes, learn_merges  # noqa: E402

SEP = "\n__ggml_vocab_test__\n"
N_MERGES = 800

CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.",
    "I'm sure they'll say it's fine, but we've seen what they'd do. Don't worry, you're OK.",
    "def tokenize(text):\n    return [t for t in text.split(' ') if t]\n\nprint(tokenize('a b'))\n",
    "for (int i = 0; i < n; i++) {\n    sum += x[i] * y[i];\n}\nreturn sum;\n",
    "The year 2025 had 365 days; 1,234,567 people read https://example.com/docs/index.html today.",
    "HTTPServer getHTTPResponse camelCaseWord iPhone JSONDecoder XMLHttpRequest",
    "Café, naïve, résumé, Ärger, Straße, Ελληνικά, Привет мир, 日本語のテキスト, 한국어 문장.",
    "analysis commentary final assistant user system developer functions json message",
    "We need to answer the user. The user asks about the weather. Let's think step by step.",
    "Reasoning: low. Reasoning: medium. Reasoning: high. Knowledge cutoff: 2024-06",
    "You are ChatGPT, a large language model trained by OpenAI.",
] + TEXTS + EXTRA_TEXTS

# o200k_harmony's special tokens, in their order from id 199998 on (reserved ones shortened).
SPECIALS = [
    "<|startoftext|>", "<|endoftext|>", "<|reserved_200000|>", "<|reserved_200001|>",
    "<|return|>", "<|constrain|>", "<|reserved_200004|>", "<|channel|>", "<|start|>", "<|end|>",
    "<|message|>", "<|reserved_200009|>", "<|reserved_200010|>", "<|reserved_200011|>",
    "<|call|>", "<|reserved_200013|>",
]

HARMONY_TEXTS = [
    "<|start|>system<|message|>You are ChatGPT, a large language model trained by OpenAI.\n"
    "Reasoning: high<|end|><|start|>user<|message|>Hi there!<|end|><|start|>assistant",
    "<|channel|>analysis<|message|>We need to answer.<|end|><|start|>assistant<|channel|>final"
    "<|message|>Hello! How can I help?<|return|>",
    "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
    "<|message|>{\"city\":\"Paris\"}<|call|>",
    "text <|return|> more <|call|>", "<|startoftext|>Hello<|endoftext|>",
    "<|reserved_200000|><|reserved_200013|>", "<|end|><|end|>", "<<|end|>>",
    "<|start|", "<|start |>", "<|START|>", "|>", "<|", "<|channel|><|message|>",
    " <|message|> ", "\n<|start|>\n", "a<|constrain|>b",
]

# Texts the corpus does not hold: their words come out in pieces, in llama.cpp's merge order.
NOVEL_TEXTS = [
    "Tokenizers merge frequent pairs; rarer words split into smaller pieces.",
    "the thesis: there, then, they, these, theory, thermal", "Über-naïve résumés cost 12,345€!",
    "camelCaseWords HTTPResponses DON'T'VE", "fox dog foxes dogs jumped jumping lazier",
    "    indentation\n\tand\ttabs\r\n", "日本語のテキストです。한국어입니다",
]


def train(byte_map):
    """A plain byte-level BPE: the most frequent pair first (ties: the smaller pair)."""
    words = collections.Counter()
    for text in CORPUS:
        for w in split(PATTERNS["gpt-4o"], text):
            words[tuple(byte_map[b] for b in w.encode("utf-8"))] += 1
    merges = learn_merges(words, N_MERGES)
    return merges


def write_gguf(path):
    byte_map = gpt2_bytes()
    tokens = [byte_map[b] for b in range(256)]
    merges = train(byte_map)
    seen = set(tokens)
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            tokens.append(a + b)
    types = [1] * len(tokens)
    first_special = len(tokens)
    tokens += SPECIALS
    types += [3] * len(SPECIALS)
    w = gguf.GGUFWriter(path, "gpt-oss")
    w.add_name("o200k-synthetic")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("gpt-4o")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["%s %s" % m for m in merges])
    w.add_bos_token_id(first_special + SPECIALS.index("<|startoftext|>"))
    w.add_eos_token_id(first_special + SPECIALS.index("<|return|>"))
    w.add_pad_token_id(first_special + SPECIALS.index("<|endoftext|>"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return first_special


def piece(llm, tid, special):
    buf = (llama_cpp.ctypes.c_char * 256)()
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n = llama_cpp.llama_token_to_piece(vocab, tid, buf, 256, 0, special)
    assert n >= 0
    return bytes(buf[:n])


def main():
    out_dir = sys.argv[1]
    path = os.path.join(out_dir, "o200k-synthetic.gguf")
    first_special = write_gguf(path)
    llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    texts = [t for t in TEXTS + EXTRA_TEXTS + NOVEL_TEXTS + HARMONY_TEXTS if t]
    for suffix, special in (("", False), ("-special", True)):
        base = os.path.join(out_dir, "o200k-synthetic%s.gguf" % suffix)
        with open(base + ".inp", "w", encoding="utf-8", newline="") as inp, \
             open(base + ".out", "w", encoding="utf-8", newline="") as out:
            for text in texts:
                ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
                inp.write(text + SEP)
                out.write("".join(" %d" % i for i in ids) + "\n")
    with open(path + ".special", "w", encoding="utf-8", newline="") as f:
        f.write("# id text attr eog piece(special=false) piece(special=true), pieces in hex\n")
        for tid in range(first_special, first_special + len(SPECIALS)):
            text = llama_cpp.llama_vocab_get_text(vocab, tid).decode("utf-8")
            attr = llama_cpp.llama_vocab_get_attr(vocab, tid)
            eog = int(llama_cpp.llama_vocab_is_eog(vocab, tid))
            f.write("%d %s %d %d %s %s\n" % (tid, text, attr, eog,
                                             piece(llm, tid, False).hex() or "-",
                                             piece(llm, tid, True).hex() or "-"))


if __name__ == "__main__":
    main()
