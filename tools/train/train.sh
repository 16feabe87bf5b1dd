#!/bin/sh
# train.sh - runs train.py (options: train.sh --help) in tools/train/.venv, which venv.sh
# makes on first use. Needs python3 (3.10+) with venv, apt-get and dpkg-deb (the corpus is a
# Debian package, downloaded, not installed).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
"$here/venv.sh"
exec "$here/.venv/bin/python" "$here/train.py" "$@"
