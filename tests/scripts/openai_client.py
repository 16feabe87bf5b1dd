#!/usr/bin/env python3
"""The `openai` Python client against `moeinf serve` (tests/test_serve.c runs it).

usage: openai_client.py BASE_URL API_KEY MODEL EXPECTED_TEXT PIP_TARGET
Completes one chat greedily, not streamed and streamed, and checks both give EXPECTED_TEXT.
Installs openai from PyPI into PIP_TARGET when it is not importable; exit code 77 (a skip)
when it cannot be installed."""
import importlib
import subprocess
import sys

url, key, model, expected, target = sys.argv[1:6]
try:
    import openai
except ImportError:
    sys.path.insert(0, target)
    try:
        import openai
    except ImportError:
        r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target",
                            target, "openai"], capture_output=True, timeout=180)
        importlib.invalidate_caches()  # the target folder was empty when first searched
        try:
            import openai
        except ImportError:
            print("openai client not installable (offline?): " + r.stderr.decode()[-300:],
                  file=sys.stderr)
            sys.exit(77)

client = openai.OpenAI(base_url=url, api_key=key, max_retries=0, timeout=60)
messages = [{"role": "user", "content": "Hi there"}]
r = client.chat.completions.create(model=model, messages=messages, max_tokens=10,
                                   temperature=0)
text = r.choices[0].message.content
assert text == expected, f"non-streamed {text!r} != {expected!r}"
assert r.usage.completion_tokens == 10, r.usage
parts = []
for chunk in client.chat.completions.create(model=model, messages=messages, max_tokens=10,
                                            temperature=0, stream=True):
    if chunk.choices and chunk.choices[0].delta.content:
        parts.append(chunk.choices[0].delta.content)
assert "".join(parts) == expected, f"streamed {''.join(parts)!r} != {expected!r}"
try:
    client.chat.completions.create(model=model, messages=[], max_tokens=1)
    raise AssertionError("an empty conversation was accepted")
except openai.BadRequestError:
    pass
print("openai client ok")
