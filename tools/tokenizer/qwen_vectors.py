#!/usr/bin/env python3
"""More tokenizer test vectors for the qwen35 and qwen2 pre-tokenizers, made by llama.cpp.

llama.cpp's own vectors for ggml-vocab-qwen35.gguf (tests/data/tokenizer) do not tell qwen35
from qwen2: that file carries Qwen1.5's vocabulary, whose merges never join a letter and a
combining mark that the qwen2 split keeps apart in those strings. These vectors add
pretok_cases.py's texts (Thai, Vietnamese with combining marks, Arabic harakat, ...), on which
the two splits give different ids, tokenized by llama.cpp (llama-cpp-python 0.3.36, vocab
only, add_special and parse_special off, as llama.cpp's test-tokenizer-0) once with the file as
it is (qwen35) and once with its tokenizer.ggml.pre rewritten to "qwen2" (which gives back
llama.cpp's ggml-vocab-qwen2.gguf byte for byte).

Writes tests/data/tokenizer/qwen35-more.gguf.inp/.out and qwen2-more.gguf.inp/.out in the
format of llama.cpp's .inp/.out (../shared/testdata/README.md section 3):

    pip install llama-cpp-python==0.3.36
    python3 tools/tokenizer/qwen_vectors.py tests/data/tokenizer
"""
import os
import struct
import sys
import tempfile

import llama_cpp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pretok_cases import TEXTS  # noqa: E402

SEP = "\n__ggml_vocab_test__\n"


def as_qwen2(data):
    key = b"tokenizer.ggml.pre"
    at = data.index(key) + len(key)
    assert data[at + 4:at + 18] == struct.pack("<Q", 6) + b"qwen35"
    return data[:at + 4] + struct.pack("<Q", 5) + b"qwen2" + data[at + 18:]


def write(out_dir, name, gguf_path):
    llm = llama_cpp.Llama(model_path=gguf_path, vocab_only=True, verbose=False)
    with open(os.path.join(out_dir, name + "-more.gguf.inp"), "w", encoding="utf-8",
              newline="") as inp, \
         open(os.path.join(out_dir, name + "-more.gguf.out"), "w", encoding="utf-8",
              newline="") as out:
        for text in TEXTS:
            ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
            inp.write(text + SEP)
            out.write("".join(" %d" % i for i in ids) + "\n")


def main():
    out_dir = sys.argv[1]
    path = os.path.join(out_dir, "ggml-vocab-qwen35.gguf")
    write(out_dir, "qwen35", path)
    with open(path, "rb") as f:
        data = as_qwen2(f.read())
    with tempfile.TemporaryDirectory() as tmp:
        q2 = os.path.join(tmp, "ggml-vocab-qwen2.gguf")
        with open(q2, "wb") as f:
            f.write(data)
        write(out_dir, "qwen2", q2)


if __name__ == "__main__":
    main()
