#!/bin/sh
# venv.sh - makes tools/train/.venv with the pinned packages of requirements.txt, unless it
# is there with the same list already. Used by train.sh and tools/study/routing_study.sh.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$venv/requirements.txt"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r "$here/requirements.txt"
    cp "$here/requirements.txt" "$venv/requirements.txt"
fi
