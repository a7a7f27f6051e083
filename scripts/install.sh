#!/usr/bin/env bash
# Create (or reuse) .venv/ with hyperpod-scheduler installed, for the README's tour. Nothing outside the
# checkout is changed (on a machine without python3-venv, as root, Debian's python3-venv is installed
# and said so). Undo: rm -rf .venv
source "$(dirname "$0")/_venv.sh" run
echo "hyperpod-scheduler is in $venv/bin; put it on PATH in this shell with:"
echo "  export PATH=\"$venv/bin:\$PATH\""
