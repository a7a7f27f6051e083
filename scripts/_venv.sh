# Sourced by the set-up scripts: create or reuse .venv and install the project into it.
# Works on a fresh Debian machine with Python 3.11; installs python3-venv if it is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${HYPERPOD_SCHEDULER_VENV:-$root/.venv}"
py="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  if ! "$py" -m venv "$venv" >/dev/null 2>&1; then
    # Debian splits venv/ensurepip into its own package.
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
      apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
      rm -rf "$venv"; "$py" -m venv "$venv"
    else
      echo "error: '$py -m venv' failed; install python3-venv" >&2; exit 1
    fi
  fi
fi
stamp="$venv/.installed-$(cat "$root/pyproject.toml" | sha256sum | cut -c1-16)-${1:-run}"
if [ ! -f "$stamp" ]; then
  "$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
  if [ "${1:-run}" = dev ]; then
    "$venv/bin/python" -m pip install -q -e "$root[dev]"
  else
    "$venv/bin/python" -m pip install -q -e "$root"
  fi
  touch "$stamp"
fi
export PATH="$venv/bin:$PATH"
cd "$root"
