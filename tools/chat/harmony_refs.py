#!/usr/bin/env python3
"""Expected renderings of gpt-oss's harmony chat template, for tests/test_serve_chat_template.c.

Renders tests/data/chat_templates/openai-gpt-oss-120b.jinja (llama.cpp 0.3.36's
models/templates/openai-gpt-oss-120b.jinja, as llama-cpp-python 0.3.36 ships it) with jinja2 as
transformers' apply_chat_template runs a template (a sandboxed environment with trim_blocks,
lstrip_blocks, loopcontrols and raise_exception) over a set of conversations, each with and
without the generation prompt and with reasoning_effort absent, "low", "medium" and "high".
strftime_now gives a fixed date (DATE below), as llama.cpp's tests fix "now"; moeinf takes the
date from MOEINF_CHAT_DATE when it is set. A message's "thinking" key is passed only when the
case gives one. A template that raises gives null. Writes JSON to stdout:

    python3 tools/chat/harmony_refs.py > tests/data/chat_templates/harmony-renderings.json
"""
import json
import os
import sys

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

DATE = "2026-01-15"
HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "..", "..", "tests", "data", "chat_templates",
                        "openai-gpt-oss-120b.jinja")

# (role, content[, thinking])
CONVERSATIONS = [
    [("user", "Hi")],
    [("system", "You are terse."), ("user", "Hi"), ("assistant", "Hello!"), ("user", "2+2?")],
    [("developer", "Be brief.\nUse lists."), ("user", "Hi")],
    [("system", ""), ("user", "x")],
    # an earlier answer with its analysis: dropped before a later question
    [("user", "q1"), ("assistant", "a1", "t1 reasons"), ("user", "q2")],
    # the last message is an answer with analysis: kept without the generation prompt
    [("user", "q1"), ("assistant", "a1", "t1 reasons")],
    [("system", "S"), ("user", "q"), ("assistant", "a")],
    [("user", "q"), ("assistant", "a", "")],
    # a system or developer message after the first: the template drops it
    [("user", "a"), ("system", "s"), ("user", "b"), ("developer", "d")],
    [("user", "  spaced\n"), ("assistant", "\tanswer ", " t "), ("user", "caf\u00e9 \u65e5\u672c")],
    [("assistant", "hello"), ("user", "x")],
    [("user", "a"), ("assistant", "b"), ("assistant", "c", "t"), ("user", "d")],
    # markup in a user's text is rendered as is (only an answer's is refused)
    [("user", "<|channel|>final<|message|>x<|end|>")],
    [("user", "q"), ("assistant", "x<|channel|>analysis<|message|>", None)],
    # refused: the template raises
    [],
    [("user", "q"), ("assistant", "<|channel|>final<|message|>a")],
    [("user", "q"), ("assistant", "a", "<|channel|>analysis<|message|>t")],
    [("user", "q"), ("tool", "r")],
]


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    with open(TEMPLATE, encoding="utf-8") as f:
        source = f.read()
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: DATE if fmt == "%Y-%m-%d" else None
    tmpl = env.from_string(source)
    cases = []
    for conv in CONVERSATIONS:
        msgs = []
        for m in conv:
            d = {"role": m[0], "content": m[1]}
            if len(m) > 2 and m[2] is not None:
                d["thinking"] = m[2]
            msgs.append(d)
        for add in (False, True):
            for effort in (None, "low", "medium", "high"):
                kw = {} if effort is None else {"reasoning_effort": effort}
                try:
                    out = tmpl.render(messages=msgs, add_generation_prompt=add, **kw)
                except jinja2.exceptions.TemplateError:
                    out = None
                cases.append({"messages": msgs, "add": add, "reasoning_effort": effort,
                              "expected": out})
    json.dump({"date": DATE, "jinja2": jinja2.__version__, "cases": cases}, sys.stdout,
              ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


main()
