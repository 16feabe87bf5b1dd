#!/bin/sh
# train.sh - makes tools/train/.venv (pinned packages from requirements.txt) on first use,
# then runs train.py with the given options. Needs python3 (3.10+) with venv, apt-get and
# dpkg-deb (the corpus is a Debian package, downloaded, not installed).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
venv="$here/.venv"
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$venv/requirements.txt"; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet -r "$here/requirements.txt"
    cp "$here/requirements.txt" "$venv/requirements.txt"
fi
exec "$venv/bin/python" "$here/train.py" "$@"
