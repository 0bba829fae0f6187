#!/usr/bin/env bash
# Installs cbmm into this conda environment (cbmm 0.2.0).  Snakemake runs this
# script once, inside the environment it has just created, from the run's working
# directory and with the Snakemake process's environment variables; the Snakefile
# exports CBMM_REPO, the repository it belongs to.  The dependencies are pinned in
# the environment file, so nothing else is installed (--no-deps).  The environment
# is rebuilt when this file or the environment file changes: the version above
# changes with every release (tests/test_envs.py checks it).
set -euo pipefail
python -m pip install --no-deps --no-build-isolation "${CBMM_REPO:?CBMM_REPO is set by the Snakefile}"
python -c "import cbmm, cbmm._fused; print('cbmm', cbmm.__version__, 'installed')"
