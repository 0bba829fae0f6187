"""Real data: fetching the paper's benchmark suites and storing response matrices.

Sources (chosen per dataset in ``config/datasets.yaml``):

* ``release`` - the paper authors' CSV files (GitHub LFS, SHA-256 pinned);
* ``hub`` - a rebuild from the Open LLM Leaderboard details on the Hugging Face Hub;
* ``math500_lart`` - MATH-500 derived from the LaRT data, checked against the pin;
* ``local`` - a user's CSV/Parquet table.

Every dataset is stored as a canonical Parquet matrix plus a summary JSON;
see :mod:`cbmm.data.matrix` and ``docs/data.md``.
"""

from .datasets import (
    SOURCE_OPTIONS,
    build_dataset,
    check_entry,
    find_entry,
    load_registry,
    validate_registry,
)
from .download import ChecksumError, DownloadError, StaleCacheError, download, sha256_file
from .local import load_local, read_responses, read_table
from .matrix import DataError, matrix_summary, read_matrix, summary_path, write_matrix

__all__ = [
    "SOURCE_OPTIONS",
    "ChecksumError",
    "DataError",
    "DownloadError",
    "StaleCacheError",
    "build_dataset",
    "check_entry",
    "download",
    "find_entry",
    "load_local",
    "load_registry",
    "matrix_summary",
    "read_matrix",
    "read_responses",
    "read_table",
    "sha256_file",
    "summary_path",
    "validate_registry",
    "write_matrix",
]
