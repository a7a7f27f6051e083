#!/bin/bash
# AMI + extension tier (OnInitComplete): runs after the HyperPod AMI has set up Slurm, Docker and mounts.
set -euo pipefail
echo "installing developer tools"
