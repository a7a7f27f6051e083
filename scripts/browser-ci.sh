#!/usr/bin/env bash
# Make the dashboard's browser tests runnable: Debian's Chromium (never a Playwright-downloaded
# browser) and the Python packages of the dev extra. Idempotent: does nothing that is already done.
# Run as root (apt-get); the test command calls it before pytest.
set -euo pipefail

CHROMIUM="${HYPERPOD_SCHEDULER_CHROMIUM:-/usr/bin/chromium}"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1

if [ ! -x "$CHROMIUM" ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "browser-ci: $CHROMIUM is missing and installing it needs root (apt-get install chromium)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    echo "browser-ci: installing Debian's chromium with apt-get (undo: apt-get remove chromium)"
    apt-get install -y --no-install-recommends chromium >/dev/null \
        || { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null; }
fi

PY="${PYTHON:-$(dirname "$0")/../.venv/bin/python}"
if ! "$PY" -c "import playwright, schemathesis, fastapi, uvicorn, jinja2, multipart" 2>/dev/null; then
    "$PY" -m pip install --quiet "playwright>=1.44" "schemathesis>=4.0" "fastapi>=0.110" "uvicorn>=0.29" \
        "jinja2>=3.1" "python-multipart>=0.0.9" "httpx>=0.27"
fi

# Prove the browser starts the way the tests start it (a clear failure here beats one in pytest).
"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --disable-sync --no-first-run --dump-dom about:blank >/dev/null 2>&1 \
    || { echo "browser-ci: $CHROMIUM is installed but does not start headless" >&2; exit 1; }
echo "browser-ci: $("$CHROMIUM" --version 2>/dev/null || echo chromium) ready"
