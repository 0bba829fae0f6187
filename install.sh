#!/usr/bin/env bash
# Create .venv and install cbmm with every extra (baselines, data, figures,
# workflow) and the test tools.  With --system, first install the Debian
# packages the baselines and the cluster test need (root; apt-get).
#
#   bash install.sh             # Python side only
#   bash install.sh --system    # + R, rpy2's build deps, SLURM and munge
#
# The R package mirt is not in Debian: install it inside R with
#   R -e 'install.packages("mirt")'
# (the mirt method and its tests are skipped, with that message, without it).
set -euo pipefail
cd "$(dirname "$0")"

if [[ "${1:-}" == "--system" ]]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends \
        r-base-core r-base-dev \
        slurmctld slurmd slurm-client munge >/dev/null
fi

PYTHON="${PYTHON:-python3}"
[[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
# torch first and pinned: the CPU wheel; an unpinned torch (e.g. pulled in by
# py-irt) would download several GB of CUDA packages.
.venv/bin/python -m pip install -q "torch==2.13.0"
.venv/bin/python -m pip install -q -e ".[all,test]"
echo "installed: $(.venv/bin/python -c 'import cbmm, cbmm._fused as f; print("cbmm", cbmm.__version__, "kernels", f.kernel_target)')"
