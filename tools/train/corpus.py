"""corpus.py - the training text: the prose of the Python 3.11 documentation.

Source: Debian 12's package python3.11-doc (licence: the Python Software Foundation License
Version 2, which covers the documentation; see the package's copyright file). Its
html/_sources/**/*.rst.txt files are the reStructuredText sources of the manuals. This module
keeps their prose paragraphs and drops what is not English text: code and literal blocks,
doctest sessions, directives, tables, section underlines. Inline markup is reduced to its text
(":func:`os.path.join`" -> "os.path.join", "``x``" -> "x").

Each source file is one document; a hash of its path puts it in one of three splits:
train (90 %), val (5 %: the validation loss) and study (5 %: prompts of the routing study, text
the model never saw). A document's subject is its top-level folder (library, tutorial, howto,
reference, c-api, whatsnew, faq, ...).
"""

import glob
import hashlib
import json
import os
import re
import subprocess

DEB_PACKAGE = "python3.11-doc"
SOURCES = "usr/share/doc/python3.11/html/_sources"

# Directives whose body is prose (kept, the directive line itself dropped).
PROSE_DIRECTIVES = {
    "note", "warning", "seealso", "versionadded", "versionchanged", "deprecated",
    "deprecated-removed", "impl-detail", "important", "tip", "attention", "caution", "hint",
    "function", "method", "class", "attribute", "data", "exception", "decorator",
    "decoratormethod", "classmethod", "staticmethod", "describe", "module", "currentmodule",
    "c:function", "c:macro", "c:type", "c:member", "c:var", "opcode", "cmdoption", "option",
    "envvar", "abstractmethod", "coroutinefunction", "coroutinemethod", "admonition", "topic",
    "sidebar", "rubric", "glossary", "availability", "audit-event", "only",
}

ADORNMENT = re.compile(r"^\s*([=\-~^\"'`#*+_.:])\1{3,}\s*$")
TABLE = re.compile(r"^\s*(\+[-=+]+\+?|\||=+(\s+=+)+\s*$)")
DIRECTIVE = re.compile(r"^(\s*)\.\.\s+([\w:-]+)::")
COMMENT = re.compile(r"^(\s*)\.\.(\s|$)")
FIELD = re.compile(r"^\s*:[\w -]+:(\s|$)")
BULLET = re.compile(r"^\s*([*\-+]|#\.|\d+\.|\([a-z0-9]\))\s+")
WORD = re.compile(r"^[A-Za-z][a-z'-]*[,.;:!?)]*$")


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def clean_inline(text):
    """Inline reStructuredText markup reduced to the words a reader sees."""
    text = re.sub(r":[\w:+-]+:`~?!?([^`<]*?)\s*<[^>]*>`", r"\1", text)
    text = re.sub(r":[\w:+-]+:`~([^`]*)`", lambda m: m.group(1).split(".")[-1], text)
    text = re.sub(r":[\w:+-]+:`!?([^`]*)`", r"\1", text)
    text = re.sub(r"``([^`]*)``", r"\1", text)
    text = re.sub(r"`([^`<]*?)\s*<[^>]*>`__?", r"\1", text)
    text = re.sub(r"`([^`]*)`__?", r"\1", text)
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\*\*([^*]+)\*\*", r"\1", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*)\*(?!\w)", r"\1", text)
    text = re.sub(r"\|[\w -]+\|_?", "", text)
    text = text.replace("\\ ", "").replace("\\", "")
    text = re.sub(r"\s+::$", "", text)
    text = re.sub(r"::$", ":", text)
    return re.sub(r"\s+", " ", text).strip()


def is_prose(par):
    words = par.split()
    if len(words) < 6:
        return False
    return sum(1 for w in words if WORD.match(w)) >= 0.7 * len(words)


def paragraphs(rst):
    """The prose paragraphs of one reStructuredText file, in order."""
    out, cur = [], []
    skip_deeper = None  # skip lines indented deeper than this (literal blocks, code, comments)

    def flush():
        if cur:
            par = clean_inline(" ".join(cur))
            if is_prose(par):
                out.append(par)
            cur.clear()

    for raw in rst.split("\n"):
        line = raw.rstrip().replace("\t", "    ")
        if skip_deeper is not None:
            if not line.strip() or indent_of(line) > skip_deeper:
                continue
            skip_deeper = None
        if not line.strip():
            flush()
            continue
        ind = indent_of(line)
        m = DIRECTIVE.match(line)
        if m:
            flush()
            if m.group(2) not in PROSE_DIRECTIVES:
                skip_deeper = ind
            continue
        if COMMENT.match(line):
            flush()
            skip_deeper = ind
            continue
        stripped = line.strip()
        if (ADORNMENT.match(line) or TABLE.match(line) or FIELD.match(line)
                or stripped.startswith(">>>") or stripped.startswith("...")):
            flush()
            continue
        if BULLET.match(line):
            flush()
            stripped = BULLET.sub("", line).strip()
        cur.append(stripped)
        if stripped.endswith("::"):
            flush()
            skip_deeper = ind
    flush()
    return out


def split_of(relpath):
    bucket = int(hashlib.sha256(relpath.encode()).hexdigest(), 16) % 100
    return "val" if bucket < 5 else "study" if bucket < 10 else "train"


def subject_of(relpath):
    parts = relpath.split("/")
    return parts[0] if len(parts) > 1 else "misc"


def fetch_package(work):
    """Downloads the .deb (no install, no root needed) and unpacks it under work/deb."""
    debs = glob.glob(os.path.join(work, DEB_PACKAGE + "_*.deb"))
    if not debs:
        subprocess.run(["apt-get", "download", DEB_PACKAGE], cwd=work, check=True)
        debs = glob.glob(os.path.join(work, DEB_PACKAGE + "_*.deb"))
    deb = sorted(debs)[-1]
    root = os.path.join(work, "deb")
    if not os.path.isdir(os.path.join(root, SOURCES)):
        subprocess.run(["dpkg-deb", "-x", deb, root], check=True)
    with open(deb, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    return os.path.basename(deb), sha, os.path.join(root, SOURCES)


def build(work):
    """Returns {"train": [par], "val": [par], "study": [{"subject", "doc", "text"}], "source"}."""
    deb, sha, src = fetch_package(work)
    splits = {"train": [], "val": [], "study": []}
    files = sorted(glob.glob(os.path.join(src, "**", "*.rst.txt"), recursive=True))
    for path in files:
        rel = os.path.relpath(path, src)
        with open(path, encoding="utf-8") as f:
            pars = paragraphs(f.read())
        split = split_of(rel)
        if split == "study":
            splits["study"] += [{"subject": subject_of(rel), "doc": rel, "text": p} for p in pars]
        else:
            splits[split] += pars
    splits["source"] = {"package": deb, "sha256": sha, "files": len(files)}
    return splits


if __name__ == "__main__":
    import sys

    c = build(sys.argv[1] if len(sys.argv) > 1 else "work")
    for k in ("train", "val"):
        print(k, len(c[k]), "paragraphs", sum(len(p) for p in c[k]), "chars")
    print("study", len(c["study"]), json.dumps(c["source"]))
