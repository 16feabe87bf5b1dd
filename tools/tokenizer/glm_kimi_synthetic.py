#!/usr/bin/env python3
"""Synthetic GLM-4.5 and Kimi-K2 vocabularies and llama.cpp's ids and rules for them.

No real GLM or Kimi vocabulary can be fetched here, so this makes a small one of each kind, as
o200k_synthetic.py does for gpt-oss: a GGUF with no tensors (tokenizer.ggml.model "gpt2") whose
256 byte tokens and merges come from a tiny byte-level BPE trained on a fixed corpus,
pre-split with the family's pattern from pretok_cases.py, then the family's special tokens
with the types and ids llama.cpp's converter gives them:
  glm4     tokenizer.ggml.pre "glm4"; GLM-4.5's added tokens from <|endoftext|> on, in their
           order: the <|...|> and [..MASK] ones and <sop>/<eop> control, <think>, </think>,
           the tool tags and /nothink user-defined (added tokens that are not special); EOS and
           unknown <|endoftext|>, EOT <|user|>, EOM <|observation|> (conversion/glm.py); no BOS
           key, so llama.cpp's default for glm4 (no BOS) shows;
  kimi-k2  tokenizer.ggml.pre "kimi-k2"; Kimi-K2's special tokens from [BOS] on, all control
           (conversion/deepseek.py marks every tiktoken special token so); BOS [BOS], EOS [EOS].

llama.cpp (llama-cpp-python 0.3.36, vocab only) then gives, for NAME in glm4, kimi-k2:
  NAME-synthetic.gguf.inp/.out           ids of each text, parse_special off
  NAME-synthetic-special.gguf.inp/.out   the same texts with parse_special on
  NAME-synthetic.gguf.special            per special token: id, text, attributes, whether it
                                         ends generation, its piece with special off and on;
                                         a first line "# bos B eos E" (-1: none)

    pip install llama-cpp-python==0.3.36 regex gguf
    python3 tools/tokenizer/glm_kimi_synthetic.py tests/data/tokenizer
"""
import collections
import os
import sys

import gguf
import llama_cpp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pretok_cases import EXTRA_TEXTS, HAN_TEXTS, PATTERNS, TEXTS, split  # noqa: E402
from tiny_bpe import gpt2_bytes, learn_merges  # noqa: E402

SEP = "\n__ggml_vocab_test__\n"
N_MERGES = 600

CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.",
    "I'm sure they'll say it's fine, but we've seen what they'd do. Don't worry, you're OK.",
    "def tokenize(text):\n    return [t for t in text.split(' ') if t]\n\nprint(tokenize('a b'))\n",
    "The year 2025 had 365 days; 1,234,567 people read https://example.com/docs/index.html today.",
    "HTTPServer getHTTPResponse camelCaseWord iPhone JSONDecoder XMLHttpRequest",
    "\u4f60\u597d\uff0c\u4e16\u754c\uff01\u6211\u4eec\u4eca\u5929\u5b66\u4e60\u4e2d\u6587\u3002"
    "\u4e2d\u6587\u548c\u82f1\u6587\u6df7\u5408\u7684\u6587\u672c\u3002",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8\u3002\ud55c\uad6d\uc5b4 \ubb38\uc7a5.",
    "We need to answer the user. The user asks about the weather. Let's think step by step.",
    "system user assistant tool think answer reasoning",
] + TEXTS + EXTRA_TEXTS + HAN_TEXTS

FAMILIES = {
    "glm4": {
        "arch": "glm4moe",
        "specials": [  # (text, type): 3 control, 4 user-defined
            ("<|endoftext|>", 3), ("[MASK]", 3), ("[gMASK]", 3), ("[sMASK]", 3), ("<sop>", 3),
            ("<eop>", 3), ("<|system|>", 3), ("<|user|>", 3), ("<|assistant|>", 3),
            ("<|observation|>", 3), ("<|begin_of_image|>", 3), ("<|end_of_image|>", 3),
            ("<think>", 4), ("</think>", 4), ("<tool_call>", 4), ("</tool_call>", 4),
            ("<tool_response>", 4), ("</tool_response>", 4), ("<arg_key>", 4),
            ("</arg_key>", 4), ("<arg_value>", 4), ("</arg_value>", 4), ("/nothink", 4),
        ],
        "ids": {"eos": "<|endoftext|>", "unk": "<|endoftext|>", "eot": "<|user|>",
                "eom": "<|observation|>"},
        "texts": [
            "[gMASK]<sop><|system|>\nS<|user|>\nHi<|assistant|>\n<think>ok</think>\nHello"
            "<|user|>\nAgain/nothink<|assistant|>\n<think></think>",
            "[gMASK]<sop><|user|>\u4f60\u597d<|assistant|><think>",
            "<tool_call>f<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>",
            "<|observation|><tool_response>r</tool_response>", "<think></think>", "/nothink",
            "a/nothink b", "<|user|", "<think >", "[gMASK]sop", "<|endoftext|>x<|endoftext|>",
        ],
    },
    "kimi-k2": {
        "arch": "deepseek2",
        "specials": [
            ("[BOS]", 3), ("[EOS]", 3), ("<|im_end|>", 3), ("<|im_user|>", 3),
            ("<|im_assistant|>", 3), ("<|start_header_id|>", 3), ("<|end_header_id|>", 3),
            ("[EOT]", 3), ("<|im_system|>", 3), ("<|tool_calls_section_begin|>", 3),
            ("<|tool_calls_section_end|>", 3), ("<|tool_call_begin|>", 3),
            ("<|tool_call_argument_begin|>", 3), ("<|tool_call_end|>", 3),
            ("<|im_middle|>", 3), ("<think>", 3), ("</think>", 3),
        ],
        "ids": {"bos": "[BOS]", "eos": "[EOS]"},
        "texts": [
            "<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot "
            "AI.<|im_end|><|im_user|>user<|im_middle|>Hi<|im_end|><|im_assistant|>assistant"
            "<|im_middle|>",
            "<think>Let me think.</think>Hello!<|im_end|>",
            "<|tool_calls_section_begin|><|tool_call_begin|>functions.f:0"
            "<|tool_call_argument_begin|>{\"a\": 1}<|tool_call_end|><|tool_calls_section_end|>",
            "[BOS]\u4f60\u597d[EOS]", "<|im_middle|", "<|IM_END|>", "<think >", "x<|im_end|>y",
        ],
    },
}


def write_gguf(path, name, fam):
    byte_map = gpt2_bytes()
    tokens = [byte_map[b] for b in range(256)]
    words = collections.Counter()
    for text in CORPUS:
        for w in split(PATTERNS[name], text):
            words[tuple(byte_map[b] for b in w.encode("utf-8"))] += 1
    merges = learn_merges(words, N_MERGES)
    seen = set(tokens)
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            tokens.append(a + b)
    types = [1] * len(tokens)
    first_special = len(tokens)
    tokens += [t for t, _ in fam["specials"]]
    types += [k for _, k in fam["specials"]]
    w = gguf.GGUFWriter(path, fam["arch"])
    w.add_name("%s-synthetic" % name)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(name)
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["%s %s" % m for m in merges])
    adders = {"bos": w.add_bos_token_id, "eos": w.add_eos_token_id,
              "unk": w.add_unk_token_id, "eot": w.add_eot_token_id, "eom": w.add_eom_token_id}
    for key, text in fam["ids"].items():
        adders[key](tokens.index(text))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return first_special


def piece(vocab, tid, special):
    buf = (llama_cpp.ctypes.c_char * 256)()
    n = llama_cpp.llama_token_to_piece(vocab, tid, buf, 256, 0, special)
    assert n >= 0
    return bytes(buf[:n])


def main():
    out_dir = sys.argv[1]
    for name, fam in FAMILIES.items():
        path = os.path.join(out_dir, "%s-synthetic.gguf" % name)
        first_special = write_gguf(path, name, fam)
        llm = llama_cpp.Llama(model_path=path, vocab_only=True, verbose=False)
        vocab = llama_cpp.llama_model_get_vocab(llm.model)
        texts = [t for t in TEXTS + EXTRA_TEXTS + HAN_TEXTS + fam["texts"] if t]
        for suffix, special in (("", False), ("-special", True)):
            base = os.path.join(out_dir, "%s-synthetic%s.gguf" % (name, suffix))
            with open(base + ".inp", "w", encoding="utf-8", newline="") as inp, \
                 open(base + ".out", "w", encoding="utf-8", newline="") as out:
                for text in texts:
                    ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=special)
                    inp.write(text + SEP)
                    out.write("".join(" %d" % i for i in ids) + "\n")
        with open(path + ".special", "w", encoding="utf-8", newline="") as f:
            f.write("# bos %d eos %d\n" % (llama_cpp.llama_vocab_bos(vocab),
                                          llama_cpp.llama_vocab_eos(vocab)))
            f.write("# id text attr eog piece(special=false) piece(special=true), in hex\n")
            for tid in range(first_special, first_special + len(fam["specials"])):
                text = llama_cpp.llama_vocab_get_text(vocab, tid).decode("utf-8")
                attr = llama_cpp.llama_vocab_get_attr(vocab, tid)
                eog = int(llama_cpp.llama_vocab_is_eog(vocab, tid))
                f.write("%d %s %d %d %s %s\n" % (tid, text, attr, eog,
                                                 piece(vocab, tid, False).hex() or "-",
                                                 piece(vocab, tid, True).hex() or "-"))
        del llm


if __name__ == "__main__":
    main()
