#!/bin/bash
# Custom tier (OnCreate): these scripts do everything the AMI would otherwise do. A stand-in for the
# real scripts in awsome-distributed-training; it reads provisioning_parameters.json for the topology.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
python3 -c 'import json,sys; p=json.load(open(sys.argv[1])); print("controller:", p["controller_group"])' \
  "$here/provisioning_parameters.json"
