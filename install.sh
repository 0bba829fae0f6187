#!/usr/bin/env bash
# Create .venv and install cbmm with every extra (baselines, data, figures,
# workflow) and the test and lint tools, at the versions of the CI-tested lock
# (requirements/lock.txt, CPython 3.11, Linux x86-64, checked by SHA-256).  With
# --system, first install the Debian packages the baselines and the cluster test
# need (root; apt-get).
#
#   bash install.sh             # Python side only
#   bash install.sh --system    # + R, rpy2's build deps, SLURM and munge
#
# Another Python version or platform: pip install -e ".[all,test]" (the bounds of
# pyproject.toml; py-irt needs Python < 3.12).  The R package mirt is not in Debian:
# install it inside R with  R -e 'install.packages("mirt")'  (the mirt method and
# its tests are skipped, with that message, without it).
set -euo pipefail
cd "$(dirname "$0")"

if [[ "${1:-}" == "--system" ]]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends \
        r-base-core r-base-dev \
        slurmctld slurmd slurm-client munge >/dev/null
fi

PYTHON="${PYTHON:-python3.11}"
[[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
# Every package pinned and hash-checked; torch is the CPU wheel (the lock names its
# index): an unpinned torch would download several GB of CUDA packages.
torch_index=(--extra-index-url https://download.pytorch.org/whl/cpu)
if [[ -n "${PIP_FIND_LINKS:-}${PIP_EXTRA_INDEX_URL:-}" ]] \
        || .venv/bin/python -m pip config list 2>/dev/null | grep -q "find-links\|extra-index-url"; then
    torch_index=()  # pip already has a configured source for the CPU wheel
fi
.venv/bin/python -m pip install -q --require-hashes "${torch_index[@]}" -r requirements/lock.txt
# cbmm itself (editable, compiling the C extension cbmm._fused; gcc is needed).
.venv/bin/python -m pip install -q --no-deps --no-build-isolation -e .
echo "installed: $(.venv/bin/python -c 'import cbmm, cbmm._fused as f; print("cbmm", cbmm.__version__, "kernels", f.kernel_target)')"
