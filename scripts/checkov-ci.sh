#!/usr/bin/env bash
# checkov for the CloudFormation templates, in a virtualenv of its own: checkov pins boto3/botocore
# releases far older than the project needs, so it cannot share the project's .venv. Idempotent.
# tests/deploy/test_templates.py runs it (it fails under CI=true when this script has not run).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${HYPERPOD_SCHEDULER_CHECKOV_VENV:-$root/.venv-checkov}"
version="3.3.30"
if [ -x "$venv/bin/checkov" ] && "$venv/bin/checkov" --version 2>/dev/null | grep -qx "$version"; then
  echo "checkov-ci: checkov $version ready"; exit 0
fi
echo "checkov-ci: installing checkov $version with pip into $venv, a virtualenv of its own (undo: rm -rf $venv)"
"${PYTHON:-python3}" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet "checkov==$version"
echo "checkov-ci: checkov $("$venv/bin/checkov" --version) ready"
