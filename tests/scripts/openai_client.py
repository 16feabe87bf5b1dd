#!/usr/bin/env python3
"""The `openai` Python client against `moeinf serve` (tests/test_serve.c runs it).

usage: openai_client.py BASE_URL API_KEY MODEL EXPECTED_TEXT PIP_TARGET
Completes one chat greedily, not streamed and streamed, and checks both give EXPECTED_TEXT;
the same with logprobs (the client's types parse them; the tokens' bytes spell the text);
tools refused with a 400.
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
r = client.chat.completions.create(model=model, messages=messages, max_completion_tokens=10,
                                   temperature=0, logprobs=True, top_logprobs=2)
content = r.choices[0].logprobs.content
assert r.choices[0].message.content == expected, r.choices[0].message.content
assert len(content) == 10, content
assert b"".join(bytes(e.bytes) for e in content) == expected.encode(), content
assert all(e.logprob <= 0 and len(e.top_logprobs) == 2 for e in content), content
assert all(e.top_logprobs[0].logprob >= e.logprob for e in content), content
try:
    client.chat.completions.create(model=model, messages=messages, max_tokens=1, tools=[
        {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}])
    raise AssertionError("tools were accepted")
except openai.BadRequestError as e:
    assert "'tools'" in str(e), e
print("openai client ok")
