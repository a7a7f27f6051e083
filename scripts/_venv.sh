# Sourced by the set-up scripts: create or reuse .venv and install the project into it.
# Works on a fresh Debian machine with Python 3.11; installs python3-venv if it is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${HYPERPOD_SCHEDULER_VENV:-$root/.venv}"
py="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  echo "setting up: creating $venv (a Python virtualenv, nothing outside this folder; undo: rm -rf $venv)" >&2
  if ! "$py" -m venv "$venv" >/dev/null 2>&1; then
    # Debian splits venv/ensurepip into its own package.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      echo "setting up: installing Debian's python3-venv with apt-get (undo: apt-get remove python3-venv)" >&2
      apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
      rm -rf "$venv"; "$py" -m venv "$venv"
    else
      echo "error: '$py -m venv' failed; install python3-venv" >&2; exit 1
    fi
  fi
fi
stamp="$venv/.installed-$(cat "$root/pyproject.toml" | sha256sum | cut -c1-16)-${1:-run}"
# A dev install has everything a run install has.
[ "${1:-run}" = run ] && [ -f "${stamp%-run}-dev" ] && stamp="${stamp%-run}-dev"
if [ ! -f "$stamp" ]; then
  echo "setting up: installing hyperpod-scheduler and its dependencies into $venv with pip (a few minutes the first time)" >&2
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
  if [ "${1:-run}" = dev ]; then
    "$venv/bin/python" -m pip install -q -e "$root[dev]"
  else
    "$venv/bin/python" -m pip install -q -e "$root"
  fi
  touch "$stamp"
  echo "setting up: done; the commands are in $venv/bin (undo everything: rm -rf $venv)" >&2
fi
export PATH="$venv/bin:$PATH"
cd "$root"
