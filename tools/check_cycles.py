#!/usr/bin/env python3
"""Fails when source files form a loop: an include cycle, or files whose functions call each
other (two files, or more around a loop).

The cross-reference comes from two tools:
  universal-ctags  where each function and macro is defined (first and last line), whether
                   it is static (file scope); the #include "..." lines of every file
  cscope           who calls each function (its line-oriented query 3, "functions calling")
cscope 15.9 is not complete on its own: its parser loses the calls of some functions (after
an array parameter, for one), and its database has named the file before the right one for
some hits. So each hit is checked against the source (the line must hold the name; else it
moves to the one file where it does, or the script stops), and a plain scan for `name(`
outside comments, strings and member calls adds what cscope missed; the summary line counts
both.

A call goes from the file that holds it (a .c file, or a header: a static inline function or
a macro body) to the file that defines the function, whichever header declares it. A header
with a .c file of the same name beside it (cache.h, cache.c) is that .c file's interface,
so for calls the two are one node: an inline function in x.h counts as x.c's. A call to a
name the calling file defines itself stays inside that file; a static function
elsewhere cannot be called, so only external definitions and header inlines are candidates.
A hit on a line outside every function or macro definition ctags found (a prototype, which
cscope may take for a call after a macro invocation) is no call.
Calls through function pointers (ops tables) are not calls here: that is how a table breaks a
loop. For includes every file is its own node; an include resolves against the including
file's folder, then src/, then include/; system headers are left out.

One layering rule too: files of src/cli and src/serve (the programs) include only the public
headers (include/), src/app and their own; any other include is printed and fails the check.

Every strongly connected group of two or more files in either graph is a cycle. Each is printed
with its files and the edges inside it (for calls, which function calls which), and the exit
status is 1. An allow-list file (--allow) names known cycles, one per line as the files of the
group separated by spaces ('#' starts a comment); a group that matches a line exactly is
printed as allowed and does not fail. A group that grows past its line fails again.

    tools/check_cycles.py [--root DIR] [--allow FILE] [DIR ...]   (default DIRs: src include)

Needs: ctags (universal-ctags, with JSON output), cscope, python3. Exit 0: no cycle; 1: a
cycle; 2: a tool is missing or failed.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile


def list_sources(root, dirs):
    files = []
    for d in dirs:
        for base, subdirs, names in os.walk(os.path.join(root, d)):
            subdirs.sort()
            for name in sorted(names):
                if name.endswith((".c", ".h")):
                    files.append(os.path.relpath(os.path.join(base, name), root))
    return files


def run_ctags(root, files):
    """Returns (defs, spans, includes): defs[name] = [(file, is_static)]; spans[file] = the
    [first, last] lines of its function definitions and macro definitions, with the name;
    includes[file] = the texts of its #include "..." lines."""
    cmd = ["ctags", "--output-format=json", "--languages=C", "--langmap=C:.c.h",
           "--kinds-C=fdh", "--extras=+r", "--fields=+nKrEe", "-L", "-", "-o", "-"]
    out = subprocess.run(cmd, cwd=root, input="\n".join(files), capture_output=True,
                         text=True, check=True).stdout
    defs, spans, includes = {}, {f: [] for f in files}, {f: [] for f in files}
    for line in out.splitlines():
        tag = json.loads(line)
        if tag.get("_type") != "tag":
            continue
        kind, path = tag.get("kind"), tag["path"]
        if kind == "function":
            static = "fileScope" in tag.get("extras", "")
            defs.setdefault(tag["name"], []).append((path, static))
            spans[path].append((tag["line"], tag.get("end", tag["line"]), tag["name"]))
        elif kind == "macro" and tag.get("roles") == "def":
            spans[path].append((tag["line"], tag.get("end", tag["line"]), tag["name"]))
        elif kind == "header" and tag.get("roles") == "local":
            includes[path].append(tag["name"])
    return defs, spans, includes


def run_cscope(root, files, names):
    """Returns (calls, crashed): calls[name] = [(file, caller, line, text)] of the calls to
    name (cscope's query 3), and the names whose query crashed cscope. cscope 15.9 has been
    seen to crash (SIGSEGV) on one query of a database that depends on the checkout's layout;
    the queries then run one at a time, and a name whose query still crashes gets only the
    calls the source scan finds (scanned_calls), which is how its missed calls are found too."""
    with tempfile.TemporaryDirectory() as tmp:
        listing = os.path.join(tmp, "files")
        db = os.path.join(tmp, "cscope.out")
        with open(listing, "w", encoding="utf-8") as f:
            f.write("\n".join(files) + "\n")
        # -k: no /usr/include; -u: build afresh; -b: build only; -c: no compression (the
        # compressed database has named the wrong file for some hits; see checked_calls).
        subprocess.run(["cscope", "-b", "-c", "-k", "-u", "-i", listing, "-f", db], cwd=root,
                       check=True, capture_output=True)
        calls = query_cscope(root, db, names)
        if calls is not None:
            return calls, []
        calls, crashed = {}, []
        for name in names:
            one = query_cscope(root, db, [name])
            if one is None:
                crashed.append(name)
                calls[name] = []
            else:
                calls.update(one)
        return calls, crashed


def query_cscope(root, db, names):
    """calls[name] for each of names from the database db, or None when cscope crashed."""
    queries = "".join("3" + n + "\n" for n in names)
    proc = subprocess.run(["cscope", "-d", "-l", "-f", db], cwd=root, input=queries,
                          capture_output=True, text=True, check=False)
    if proc.returncode < 0:  # killed by a signal
        return None
    if proc.returncode != 0:
        raise RuntimeError(f"cscope failed (exit {proc.returncode}): {proc.stderr.strip()}")
    out = proc.stdout
    calls = {}
    # The answers come in query order: "cscope: N lines" and then N lines each.
    # The prompt ">> " opens each answer's first line (and the last line, with no answer).
    lines = [ln[3:] if ln.startswith(">> ") else ln for ln in out.splitlines()]
    i, q = 0, 0
    while i < len(lines) and q < len(names):
        head = lines[i].strip()
        i += 1
        if head == "Unable to search database":  # what line mode says for no match
            calls.setdefault(names[q], [])
            q += 1
            continue
        if not head.startswith("cscope: "):
            continue
        n = int(head.split()[1])
        callers = calls.setdefault(names[q], [])
        for line in lines[i:i + n]:
            parts = line.split(" ", 3)
            text = parts[3] if len(parts) > 3 else ""
            callers.append((os.path.normpath(parts[0]), parts[1], int(parts[2]), text))
        i += n
        q += 1
    if q != len(names):
        raise RuntimeError(f"cscope answered {q} of {len(names)} queries")
    return calls


def checked_calls(root, name, hits, spans):
    """cscope's hits on name, each checked against the source: the line it names must hold
    the name. cscope 15.9 has been seen to give a line of one file under the name of the file
    before it; such a hit moves to the one file whose line holds the name inside a function
    of the name cscope gave, or, where it named the wrong function too, to the one file whose
    line is the text cscope quoted. A hit that fits no file is dropped (cscope has also been
    seen to name a line that holds the name in no file, and which one depends on the order it
    indexed the files in), and so is a hit whose quoted text several files have at that line
    (a common call such as `st = moeinf_fail(err, ...` can be): the text scan of scan_calls
    still finds every real call. Returns ([(file, line)], how many moved, how many
    dropped); RuntimeError when several files fit by the function's name."""
    texts = {}

    def holds(path, line):
        if path not in texts:
            with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
                texts[path] = f.read().split("\n")
        lines = texts[path]
        return 0 < line <= len(lines) and re.search(r"\b" + re.escape(name) + r"\b",
                                                     lines[line - 1]) is not None

    def same_text(path, line, text):
        lines = texts[path]
        return " ".join(lines[line - 1].split()) == " ".join(text.split())

    out, moved, unplaced = [], 0, 0
    for path, caller, line, text in hits:
        if path not in spans or holds(path, line):
            out.append((path, line))
            continue
        fits = [f for f in spans if holds(f, line)
                and any(first <= line <= last and n == caller for first, last, n in spans[f])]
        if not fits and text:
            fits = [f for f in spans if holds(f, line) and same_text(f, line, text)]
            if len(fits) > 1:
                fits = []
        if not fits:
            unplaced += 1
            continue
        if len(fits) != 1:
            raise RuntimeError(f"cscope puts a call to {name}() in {caller}() at {path}:{line}, "
                               f"which does not hold it ({len(fits)} files fit)")
        out.append((fits[0], line))
        moved += 1
    return out, moved, unplaced


def blank_comments_and_strings(text):
    """The text with comments and string and character literals turned to spaces (newlines
    kept, so line numbers hold)."""
    out, i, n = [], 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text[i] in "\"'":
            j = i + 1
            while j < n and text[j] != text[i] and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    return "".join(out)


def scan_calls(root, files, names):
    """Every `name(` outside comments and strings that is not a member call (a.f(), p->f()):
    the calls cscope's parser misses (it loses the calls of some functions, e.g. after an
    array parameter). Returns {name: {(file, line)}}."""
    pattern = re.compile(r"(?<![\w.>])(" + "|".join(map(re.escape, names)) + r")\s*\(")
    found = {}
    for path in files:
        with open(os.path.join(root, path), encoding="utf-8", errors="replace") as f:
            text = blank_comments_and_strings(f.read())
        for number, line in enumerate(text.split("\n"), 1):
            for m in pattern.finditer(line):
                found.setdefault(m.group(1), set()).add((path, number))
    return found


def module_of(path, known):
    """A header with a .c of the same name beside it is that .c's interface: its inline
    functions count as that .c's functions."""
    if path.endswith(".h") and path[:-2] + ".c" in known:
        return path[:-2] + ".c"
    return path


def resolve_include(including, text, known):
    for base in (os.path.dirname(including), "src", "include"):
        cand = os.path.normpath(os.path.join(base, text))
        if cand in known:
            return cand
    return None


def strongly_connected(nodes, edges):
    """Tarjan's algorithm, iterative; returns the groups of two or more nodes."""
    index, low, on_stack, stack, groups = {}, {}, set(), [], []
    counter = 0
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    group.append(top)
                    if top == node:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))
    return sorted(groups)


def read_allow(path):
    allowed = []
    if not path:
        return allowed
    with open(path, encoding="utf-8") as f:
        for line in f:
            words = line.split("#", 1)[0].split()
            if words:
                allowed.append(frozenset(os.path.normpath(w) for w in words))
    return allowed


def report(kind, groups, labels, allowed):
    """Prints each group; returns (cycles that fail, cycles allowed)."""
    failed, passed = 0, 0
    for group in groups:
        ok = frozenset(group) in allowed
        failed += not ok
        passed += ok
        print(f"{kind} cycle{' (allowed)' if ok else ''}: {' <-> '.join(group)}")
        members = set(group)
        for src in group:
            for dst in sorted(labels.get(src, {})):
                if dst in members:
                    for why in sorted(labels[src][dst]):
                        print(f"  {src} -> {dst}: {why}")
    return failed, passed


# The programs (the moeinf command, its server) reach the library through its public headers
# and the programs' own library, src/app, only: a program that needed an internal header would
# mean the public API lacks something.
PROGRAMS = ("src/cli/", "src/serve/")
PROGRAMS_MAY_INCLUDE = ("include/", "src/app/", "src/cli/", "src/serve/")


def programs_rule(inc_labels):
    failed = 0
    for src, targets in sorted(inc_labels.items()):
        if not src.startswith(PROGRAMS):
            continue
        for dst in sorted(targets):
            if not dst.startswith(PROGRAMS_MAY_INCLUDE):
                print(f"programs rule: {src} includes {dst}, an internal header of the library")
                failed += 1
    return failed


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--allow", help="file naming known cycles, one per line")
    ap.add_argument("dirs", nargs="*", default=["src", "include"])
    args = ap.parse_args()
    for tool in ("ctags", "cscope"):
        if not shutil.which(tool):
            print(f"check_cycles: {tool} is missing (apt-get install universal-ctags cscope)",
                  file=sys.stderr)
            return 2
    root = os.path.abspath(args.root)
    files = list_sources(root, args.dirs)
    known = set(files)
    try:
        defs, spans, includes = run_ctags(root, files)
        # Only names some file can call from outside: external definitions, header inlines.
        names = sorted(n for n, where in defs.items()
                       if any(not st or f.endswith(".h") for f, st in where))
        calls, crashed = run_cscope(root, files, names)
    except (subprocess.CalledProcessError, RuntimeError, json.JSONDecodeError) as e:
        print(f"check_cycles: {e}", file=sys.stderr)
        return 2

    scanned = scan_calls(root, files, names)
    call_labels, n_calls, n_dropped, n_moved, n_scan_only, n_unplaced = {}, 0, 0, 0, 0, 0
    for name in names:
        try:
            hits, moved, unplaced = checked_calls(root, name, calls.get(name, ()), spans)
        except RuntimeError as e:
            print(f"check_cycles: {e}", file=sys.stderr)
            return 2
        n_moved += moved
        n_unplaced += unplaced
        targets = sorted({f for f, st in defs[name] if not st or f.endswith(".h")})
        if len(targets) > 1:
            print(f"check_cycles: warning: {name}() is defined in {', '.join(targets)}",
                  file=sys.stderr)
        from_cscope = set(hits)
        for caller_file, line in sorted(from_cscope | scanned.get(name, set())):
            if caller_file not in known or any(f == caller_file for f, _ in defs[name]):
                continue  # outside the scanned folders, or the caller's own definition
            # Outside every definition ctags saw: a prototype, or a cscope misreading.
            inside = [n for first, last, n in spans[caller_file] if first <= line <= last]
            if not inside:
                n_dropped += (caller_file, line) in from_cscope
                continue
            n_scan_only += (caller_file, line) not in from_cscope
            src = module_of(caller_file, known)
            for target in targets:
                dst = module_of(target, known)
                if dst == src:
                    continue
                where = "" if target == dst else f" (inline in {target})"
                why = f"{inside[-1]}() calls {name}(){where}"
                call_labels.setdefault(src, {}).setdefault(dst, set()).add(why)
                n_calls += 1
    inc_labels = {}
    for f in files:
        for text in includes[f]:
            target = resolve_include(f, text, known)
            if target and target != f:
                inc_labels.setdefault(f, {}).setdefault(target, set()).add(f'#include "{text}"')

    allowed = read_allow(args.allow)
    failed, passed = programs_rule(inc_labels), 0
    for kind, labels in (("include", inc_labels), ("call", call_labels)):
        edges = {src: set(dst) for src, dst in labels.items()}
        nodes = files if kind == "include" else sorted({module_of(f, known) for f in files})
        f, p = report(kind, strongly_connected(nodes, edges), labels, allowed)
        failed, passed = failed + f, passed + p
    n_inc = sum(len(d) for d in inc_labels.values())
    n_call_edges = sum(len(d) for d in call_labels.values())
    print(f"check_cycles: {len(files)} files, {n_inc} include edges, {n_call_edges} call edges "
          f"({n_calls} calls across files; cscope hits: {n_dropped} outside any definition, "
          f"{n_moved} moved to their file, {n_unplaced} in no one file, dropped, {n_scan_only} calls "
          f"it missed"
          + (f", {len(crashed)} queries it crashed on, left to the scan" if crashed else "")
          + "): "
          + (f"{failed} cycle(s) or rule breach(es)" if failed else "no cycle")
          + (f", {passed} allowed" if passed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
