#!/usr/bin/env bash
# The whole test suite: lint (ruff), types (mypy), then pytest. Extra arguments go to pytest.
source "$(dirname "$0")/_venv.sh" dev
echo "== ruff"; ruff check src tests bench
echo "== mypy"; mypy
echo "== pytest"
workers=$(python -c 'import os; print(min(4, os.cpu_count() or 1))')
exec python -m pytest -n "$workers" "$@"
