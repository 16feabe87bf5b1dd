#!/usr/bin/env python3
"""Expected renderings of the GLM, Kimi-K2 and DeepSeek-R1 chat templates, for
tests/test_serve_chat_template.c.

Renders llama.cpp 0.3.36's models/templates files (as llama-cpp-python 0.3.36 ships them,
copied into tests/data/chat_templates) with jinja2 as transformers' apply_chat_template runs a
template (a sandboxed environment with trim_blocks, lstrip_blocks, loopcontrols and
raise_exception) over a set of conversations with string contents and no tools, each with
and without the generation prompt and with enable_thinking absent, true and false:
  GLM-4.6.jinja                                  moeinf's glm45
  GLM-4.7-Flash.jinja                            glm47
  Kimi-K2-Instruct.jinja                         kimi-k2
  moonshotai-Kimi-K2.jinja                       kimi-k2 (an earlier Kimi-K2 template: its own
                                                 default system text)
  Kimi-K2-Thinking.jinja                         kimi-k2-thinking
  deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja deepseek-r1 (bos_token "": the tokenizer adds
                                                 BOS)
A template that raises gives null (none of these conversations makes one raise). Writes JSON
to stdout: the conversations, then each case naming its template, moeinf's name for it and
the conversation's index:

    python3 tools/chat/glm_kimi_refs.py > tests/data/chat_templates/glm-kimi-r1-renderings.json
"""
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
DIR = os.path.join(HERE, "..", "..", "tests", "data", "chat_templates")

TEMPLATES = [
    ("GLM-4.6.jinja", "glm45"),
    ("GLM-4.7-Flash.jinja", "glm47"),
    ("Kimi-K2-Instruct.jinja", "kimi-k2"),
    ("moonshotai-Kimi-K2.jinja", "kimi-k2"),
    ("Kimi-K2-Thinking.jinja", "kimi-k2-thinking"),
    ("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", "deepseek-r1"),
]

# (role, content)
CONVERSATIONS = [
    [("user", "Hi")],
    [("system", "You are terse."), ("user", "Hi"), ("assistant", "Hello!"), ("user", "2+2?")],
    # an earlier answer's thinking, before a later question
    [("user", "q1"), ("assistant", "<think>t1</think>a1"), ("user", "q2")],
    # the last answer's thinking, after the last question
    [("user", "q1"), ("assistant", "<think>\nt1 reasons\n</think>\n\na1")],
    [("system", "S")],
    [],
    [("user", "  spaced\n"), ("assistant", "\tanswer "), ("user", "caf\u00e9 \u65e5\u672c ")],
    [("assistant", "hello"), ("user", "x")],
    [("user", "a/nothink")],
    [("user", "a"), ("system", "s2"), ("user", "b")],
    [("user", "q"), ("assistant", "x</think>y</think>z")],
    [("user", "q"), ("assistant", "<think> </think>")],
    [("user", "q"), ("assistant", "no think \n"), ("assistant", "<think>t</think>")],
    [("system", "A"), ("system", "B"), ("user", "u")],
    [("user", "<|user|><|im_end|><\uff5cUser\uff5c></think>")],
    [("user", "q"), ("assistant", "")],
    [("user", "q"), ("assistant", "\n\n<think>\n\nt\n\n</think>\n\n")],
    [("user", "q"), ("assistant", "a<think>b</think>c"), ("user", "r"), ("assistant", "\u3000x\u3000")],
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    cases = []
    for fname, name in TEMPLATES:
        with open(os.path.join(DIR, fname), encoding="utf-8") as f:
            tmpl = env.from_string(f.read())
        for k, conv in enumerate(CONVERSATIONS):
            msgs = [{"role": r, "content": c} for r, c in conv]
            for add in (False, True):
                for thinking in (None, True, False):
                    kw = {} if thinking is None else {"enable_thinking": thinking}
                    try:
                        out = tmpl.render(messages=msgs, add_generation_prompt=add, bos_token="",
                                          eos_token="", **kw)
                    except jinja2.exceptions.TemplateError:
                        out = None
                    cases.append({"template": fname, "name": name, "conversation": k,
                                  "add": add, "enable_thinking": thinking, "expected": out})
    convs = [[{"role": r, "content": c} for r, c in conv] for conv in CONVERSATIONS]
    # one conversation or case per line
    sys.stdout.write('{"jinja2": %s,\n "conversations": [\n' % json.dumps(jinja2.__version__))
    sys.stdout.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in convs))
    sys.stdout.write('],\n "cases": [\n')
    sys.stdout.write(",\n".join(json.dumps(c, ensure_ascii=False) for c in cases))
    sys.stdout.write("]}\n")


main()
