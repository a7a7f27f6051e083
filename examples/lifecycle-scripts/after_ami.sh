#!/bin/bash
# AMI + extension tier (OnInitComplete) for the mixed-tier example's login group.
set -euo pipefail
echo "login node extras"
