#!/usr/bin/env python3
"""webui_check.py - drives the page of `moeinf serve` (GET /) in headless Chromium.

    webui_check.py MOEINF_BIN [--shot docs/webui.png] [--model FILE]

Starts `moeinf serve --expert-cache 50% --api-key KEY` (the embedded default model unless
--model), opens http://127.0.0.1:PORT/ in headless Chromium and, through the DevTools protocol
on a pipe (--remote-debugging-pipe: no websocket library needed), checks that:
  - the page loads without the key, and its /metrics poll is refused (401) until the key is typed;
  - a message typed into the box and sent with Enter (temperature 0) gets an answer that streams
    in (the page takes it as several server-sent deltas), equal to the text
    of the same request sent without the page;
  - the expert-cache panel updates after it: a new column in the hit-ratio chart with a row per
    MoE layer, a hit ratio and MiB read per token shown;
  - the server exits 0 on SIGTERM; and, with a second server on the in-tree model that thinks by
    script (tests/data/models/thinking-qwen3moe-F32.gguf) without an expert cache nor key: the
    panel says that there is none, the answer's thinking shows apart from it (folded once
    done); and the panel's arithmetic, fed two /metrics texts of its own, gives the per-layer
    hit ratios, MiB read and stall per token worked out by hand.
With --shot it saves a screenshot PNG there. Exit 0: passed; 1: failed; 77: skipped (no
Chromium, or no binary).
"""
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

KEY = "webui-check"
MESSAGE = "Hello! Tell me a story about a cat."
HERE = os.path.dirname(os.path.abspath(__file__))
THINKING = os.path.join(HERE, "..", "data", "models", "thinking-qwen3moe-F32.gguf")


def synthetic(acc, hits, layer_acc, layer_hits, bytes_read, stall, tokens):
    text = ("moeinf_parallel 4\nmoeinf_active_sequences 2\nmoeinf_expert_cache_slots 8\n"
            "moeinf_expert_cache_accesses_total %d\nmoeinf_expert_cache_hits_total %d\n"
            "moeinf_expert_cache_read_bytes_total %d\nmoeinf_expert_cache_stall_seconds_total %g\n"
            "moeinf_expert_cache_tokens_total %d\n" % (acc, hits, bytes_read, stall, tokens))
    for i, (a, h) in enumerate(zip(layer_acc, layer_hits)):
        text += ('moeinf_expert_layer_hits_total{layer="%d"} %d\n'
                 'moeinf_expert_layer_accesses_total{layer="%d"} %d\n' % (i, h, i, a))
    return text


# Between the two: layer 0 10 accesses, 5 hits (.5); layer 1 20 and 5 (.25); layer 2 none; all
# 30 and 10; 10 tokens, 20 MiB (2 per token), 10 ms of stall (1 per token). Hit ratio since
# start: 15 / 50.
SYNTHETIC = [synthetic(20, 5, [10, 10, 0], [5, 0, 0], 0, 0, 100),
             synthetic(50, 15, [20, 30, 0], [10, 5, 0], 20 * 1048576, 0.01, 110)]
MORE = ["What did the cat do next?", "And then?", "Where did it go?", "Who did it meet there?",
        "Thanks! One more line, please."]


def fail(msg):
    print("webui_check: FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def skip(msg):
    print("SKIP: webui_check: " + msg)
    sys.exit(77)


class Browser:
    """Chromium with the DevTools protocol on fds 3 (commands) and 4 (replies), NUL-framed."""

    def __init__(self, exe, tmp):
        cmd_r, self.cmd_w = os.pipe()
        self.rep_r, rep_w = os.pipe()

        def fds():  # in the child: the pipe ends at 3 and 4, as Chromium expects them (through
            # fds above 100 first: either end may itself be 3 or 4)
            r = fcntl.fcntl(cmd_r, fcntl.F_DUPFD, 100)
            w = fcntl.fcntl(rep_w, fcntl.F_DUPFD, 100)
            os.dup2(r, 3)
            os.dup2(w, 4)

        self.log = open(os.path.join(tmp, "chromium.log"), "w")
        self.proc = subprocess.Popen(
            [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-extensions", "--remote-debugging-pipe",
             "--user-data-dir=" + os.path.join(tmp, "profile"), "about:blank"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log,
            preexec_fn=fds, close_fds=False)
        os.close(cmd_r)
        os.close(rep_w)
        self.buf = b""
        self.next_id = 0
        self.session = None

    def _message(self, deadline):
        while b"\0" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.rep_r], [], [], left)[0]:
                fail("Chromium did not answer in time")
            chunk = os.read(self.rep_r, 65536)
            if not chunk:
                fail("Chromium closed its DevTools pipe (see chromium.log)")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, params=None, session=True, timeout=30):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.cmd_w, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            r = self._message(deadline)
            if r.get("id") == self.next_id:  # events (no id) are not needed
                if "error" in r:
                    fail("%s: %s" % (method, r["error"]))
                return r["result"]

    def js(self, expr):
        r = self.call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
        if "exceptionDetails" in r:
            fail("page script %r: %s" % (expr, r["exceptionDetails"]))
        return r["result"].get("value")

    def wait_js(self, expr, timeout, what):
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            v = self.js(expr)
            if v:
                return v
            time.sleep(0.05)
        fail("%s within %g s" % (what, timeout))

    def close(self):
        try:
            os.close(self.cmd_w)  # Chromium exits when its pipe closes
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def start_server(binary, model, tmp, tag, extra):
    out_path = os.path.join(tmp, tag + ".out")
    err_path = os.path.join(tmp, tag + ".err")
    out = open(out_path, "w")
    err = open(err_path, "w")
    args = [binary, "serve", "--host", "127.0.0.1", "--port", "0", "-t", "1"] + extra
    if model:
        args += ["-m", model]
    proc = subprocess.Popen(args, stdout=out, stderr=err, stdin=subprocess.DEVNULL)
    want = "listening on http://127.0.0.1:"
    t0 = time.monotonic()
    while time.monotonic() - t0 < 60:
        text = open(out_path).read()
        if want in text:
            return proc, int(text.split(want, 1)[1].split()[0])
        if proc.poll() is not None:
            fail("moeinf serve exited: " + open(err_path).read())
        time.sleep(0.05)
    proc.kill()
    fail("moeinf serve printed no port within 60 s")


def stop_server(proc):
    proc.terminate()
    try:
        if proc.wait(timeout=30) != 0:
            fail("moeinf serve exited %d on SIGTERM" % proc.returncode)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        fail("moeinf serve did not stop within 30 s of SIGTERM")


def main():
    args = sys.argv[1:]
    shot = model = None
    if "--shot" in args:
        i = args.index("--shot")
        shot = args[i + 1]
        del args[i:i + 2]
    if "--model" in args:
        i = args.index("--model")
        model = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    binary = args[0]
    if not os.access(binary, os.X_OK):
        skip("no moeinf binary at " + binary)
    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(n)), None)
    if not exe:
        skip("no Chromium (Debian: apt-get install chromium)")

    tmp = tempfile.mkdtemp(prefix="webui-check-")
    server, port = start_server(binary, model, tmp, "serve",
                                ["--expert-cache", "50%", "--api-key", KEY])
    plain = None
    browser = None
    try:
        browser = Browser(exe, tmp)
        target = browser.call("Target.createTarget", {"url": "about:blank"}, session=False)
        browser.session = browser.call("Target.attachToTarget",
                                       {"targetId": target["targetId"], "flatten": True},
                                       session=False)["sessionId"]
        browser.call("Emulation.setDeviceMetricsOverride",
                     {"width": 1100, "height": 720, "deviceScaleFactor": 1, "mobile": False})
        browser.call("Page.navigate", {"url": "http://127.0.0.1:%d/" % port})

        # the page loads without the key; its /metrics poll is refused until the key is typed
        browser.wait_js("window.webui && webui.error.includes('API key')", 20,
                        "the page's first /metrics poll refused without the key")
        browser.js("(() => { const k = document.getElementById('key'); k.value = %s;"
                   " k.dispatchEvent(new Event('change')); })()" % json.dumps(KEY))
        browser.wait_js("webui.polls >= 1 && webui.cache === true", 20,
                        "a /metrics poll with the key showing the expert cache")
        browser.wait_js("document.getElementById('model').textContent !== ''", 10,
                        "the model's name from /v1/models")
        polls0 = browser.js("webui.polls")

        # type the message and press Enter, as a user would
        def type_and_send(text):
            browser.js("document.getElementById('input').focus()")
            browser.call("Input.insertText", {"text": text})
            browser.call("Input.dispatchKeyEvent", {"type": "keyDown", "key": "Enter",
                                                    "code": "Enter", "windowsVirtualKeyCode": 13})

        browser.js("document.getElementById('temp').value = '0'")  # greedy: comparable below
        type_and_send(MESSAGE)
        answer = "document.querySelector('.msg.assistant:last-child .answer')"
        running = "!document.getElementById('stop').disabled"
        seen_running = False  # answer text on the page while the request still ran
        t0 = time.monotonic()
        while time.monotonic() - t0 < 120:
            st = browser.js("(() => { const a = %s; return [a ? a.textContent.length : -1, %s,"
                            " document.getElementById('send').disabled]; })()" % (answer, running))
            if st[0] > 0 and st[1]:
                seen_running = True
            if st[0] >= 0 and not st[2]:
                break
            time.sleep(0.01)
        else:
            fail("no answer within 120 s")
        text = browser.js(answer + ".textContent")
        meta = browser.js("document.querySelector('.msg.assistant:last-child .meta').textContent")
        errors = browser.js("document.querySelectorAll('.msg .error').length")
        reads = browser.js("webui.reads")
        if errors:
            fail("the answer ended in an error: " +
                 browser.js("document.querySelector('.msg .error').textContent"))
        if not text:
            fail("the answer is empty")
        if "tokens" not in meta:
            fail("no usage line under the answer: %r" % meta)
        # streamed: the page took the answer as several server-sent deltas (how many network
        # reads carried them depends on timing: a fast server's whole answer can come in one)
        deltas = browser.js("webui.deltas")
        if deltas < 2:
            fail("the answer came as %d streamed delta(s), not streamed" % deltas)
        # the same request without the page, not streamed: the same text
        req = urllib.request.Request(
            "http://127.0.0.1:%d/v1/chat/completions" % port,
            data=json.dumps({"messages": [{"role": "user", "content": MESSAGE}], "temperature": 0,
                             "max_tokens": 256}).encode(),
            headers={"Content-Type": "application/json", "Authorization": "Bearer " + KEY})
        with urllib.request.urlopen(req, timeout=120) as r:
            direct = json.loads(r.read())["choices"][0]["message"]["content"]
        if text != direct:
            fail("the page shows %r; the API answers %r" % (text, direct))
        user = browser.js("document.querySelector('.msg.user').textContent")
        if user != MESSAGE:
            fail("the user's message shows as %r" % user)

        # the panel: a poll after the answer adds a column (the expert traffic of the answer)
        browser.wait_js("webui.polls > %d && webui.columns.length >= 1" % polls0, 20,
                        "the cache panel updated after the answer")
        browser.wait_js("document.getElementById('s-mib').textContent !== '-'", 10,
                        "MiB read per token shown")
        hit = browser.js("document.getElementById('s-hit').textContent")
        mib = browser.js("document.getElementById('s-mib').textContent")
        stall = browser.js("document.getElementById('s-stall').textContent")
        layers = browser.js("webui.layers")
        if not layers:  # the worker gives moeinf_expert_layer_*{layer="i"}: a row per MoE layer
            fail("no per-layer rows in the hit-ratio chart")
        try:
            if not 0 <= float(hit) <= 1:
                raise ValueError
        except ValueError:
            fail("hit ratio shown as %r" % hit)
        print("webui_check: answer %d chars in %d deltas, %d reads%s; %s" %
              (len(text), deltas, reads, " (seen while streaming)" if seen_running else "", meta))
        print("webui_check: panel: hit ratio %s, %s MiB read per token, stall %s per token, "
              "%s per-layer rows" % (hit, mib, stall, layers or "no"))
        if shot:
            # a few more turns, each seen by a poll, so that the chart has some history
            for i, more in enumerate(MORE):
                cols = browser.js("webui.columns.length")
                type_and_send(more)
                browser.wait_js("document.querySelectorAll('.msg.assistant').length == %d &&"
                                " document.getElementById('stop').disabled" % (i + 2),
                                120, "answer %d" % (i + 2))
                browser.wait_js("webui.columns.length > %d" % cols, 20, "a column for answer %d" % (i + 2))
            png = browser.call("Page.captureScreenshot", {"format": "png"})["data"]
            with open(shot, "wb") as f:
                f.write(base64.b64decode(png))
            print("webui_check: screenshot %s (%d bytes)" % (shot, os.path.getsize(shot)))
        stop_server(server)
        server = None

        # the in-tree model that thinks by script, without an expert cache (nor key): the
        # panel says there is no cache, and the thinking shows apart from the answer
        plain, port = start_server(binary, THINKING, tmp, "plain",
                                   ["--chat-template", "chatml", "-c", "256"])
        browser.call("Page.navigate", {"url": "http://127.0.0.1:%d/" % port})
        browser.wait_js("window.webui && webui.polls >= 1 && webui.cache === false &&"
                        " !document.getElementById('nocache').hidden &&"
                        " document.getElementById('cache').hidden", 20,
                        "the panel saying there is no expert cache")
        browser.js("document.getElementById('temp').value = '0'")
        type_and_send("Hi")
        browser.wait_js("document.querySelectorAll('.msg.assistant').length == 1 &&"
                        " document.getElementById('stop').disabled", 60, "the thinking answer")
        got = browser.js("(() => { const m = document.querySelector('.msg.assistant');"
                         " const t = m.querySelector('.think');"
                         " return [t.hidden, t.open, t.querySelector('div').textContent,"
                         " m.querySelector('.answer').textContent,"
                         " m.querySelectorAll('.error').length]; })()")
        # the script's text: "<think> hmm, ok</think>  Hello" (test_serve_reasoning.c)
        if got != [False, False, "hmm, ok", "Hello", 0]:
            fail("thinking [hidden, open, thinking, answer, errors] = %r, want "
                 "[False, False, 'hmm, ok', 'Hello', 0]" % got)

        # the panel's arithmetic on two /metrics texts of its own (polling paused): per-layer
        # hit ratios over the interval, MiB read and stall per token
        browser.js("webui.paused = true")
        browser.js("update(parseMetrics(%s)); update(parseMetrics(%s))" %
                   (json.dumps(SYNTHETIC[0]), json.dumps(SYNTHETIC[1])))
        got = browser.js("[webui.layers, webui.columns[webui.columns.length - 1],"
                         " webui.overall[webui.overall.length - 1],"
                         " document.getElementById('s-mib').textContent,"
                         " document.getElementById('s-stall').textContent,"
                         " document.getElementById('s-hit').textContent,"
                         " document.getElementById('s-active').textContent]")
        want = [3, [0.5, 0.25, None], 10 / 30, "2.00", "1.00 ms", "0.300", "2 of 4"]
        if got[:2] != want[:2] or abs(got[2] - want[2]) > 1e-12 or got[3:] != want[3:]:
            fail("the panel on given metrics: %r, want %r" % (got, want))
        stop_server(plain)
        plain = None
        print("webui_check: passed")
    finally:
        if browser:
            browser.close()
        for proc in (server, plain):
            if proc and proc.poll() is None:
                proc.kill()
                proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
