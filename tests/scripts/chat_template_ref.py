#!/usr/bin/env python3
"""The independent reference for tests/test_serve_chat_template.c.

Reads {"name": N, "template": JINJA or null, "messages": [[role, content], ...], "add": bool}
objects, one per line, on stdin; writes one JSON string per line: the prompt llama.cpp's
llama_chat_apply_template writes for the built-in template N (or, with "template", for the
Jinja text it detects), or for N == "jinja" the Jinja text rendered by jinja2 (olmoe, which
llama.cpp has no template for). N == "hf" renders the Jinja text (or the file named by
"template_file") as transformers' apply_chat_template does (a sandboxed jinja2 environment with
trim_blocks, lstrip_blocks and raise_exception), with the object "kwargs" as more variables
(enable_thinking); a template that raises gives null. Exit code 77 when llama_cpp or jinja2 is
not installed."""
import ctypes
import json
import sys

try:
    import jinja2
    import llama_cpp
except ImportError as e:
    print(f"reference unavailable: {e}", file=sys.stderr)
    sys.exit(77)


def llama(tmpl, messages, add):
    arr = (llama_cpp.llama_chat_message * max(1, len(messages)))()
    keep = []
    for i, (role, content) in enumerate(messages):
        r, c = role.encode(), content.encode()
        keep += [r, c]
        arr[i].role, arr[i].content = r, c
    size = 1 << 16
    buf = ctypes.create_string_buffer(size)
    n = llama_cpp.llama_chat_apply_template(tmpl.encode(), arr, len(messages), add, buf, size)
    if n < 0:
        return None
    return buf.raw[:n].decode()


def render(tmpl, messages, add):
    env = jinja2.Environment()
    msgs = [{"role": r, "content": c} for r, c in messages]
    return env.from_string(tmpl).render(messages=msgs, add_generation_prompt=add,
                                        bos_token="", eos_token="<|endoftext|>")


def render_hf(tmpl, messages, add, kwargs):
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    msgs = [{"role": r, "content": c} for r, c in messages]
    try:
        return env.from_string(tmpl).render(messages=msgs, add_generation_prompt=add, **kwargs)
    except jinja2.exceptions.TemplateError:
        return None


for line in sys.stdin:
    q = json.loads(line)
    if q["name"] == "hf":
        tmpl = q.get("template")
        if q.get("template_file"):
            with open(q["template_file"], encoding="utf-8") as f:
                tmpl = f.read()
        out = render_hf(tmpl, q["messages"], q["add"], q.get("kwargs") or {})
    elif q["name"] == "jinja":
        out = render(q["template"], q["messages"], q["add"])
    else:
        out = llama(q["template"] or q["name"], q["messages"], q["add"])
    print(json.dumps(out))
