#!/usr/bin/env bash
# The main job: the demo on the embedded HyperPod emulator. Extra arguments go to `hyperpod-scheduler demo`.
source "$(dirname "$0")/_venv.sh" run
exec hyperpod-scheduler demo "$@"
