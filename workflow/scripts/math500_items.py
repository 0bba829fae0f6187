"""The MATH-500 items (subject, level) for the difficulty figure (rule math500_items):
the Hub's test split, or a local JSONL file of the same form (any number of items:
column j of the matrix is line j; math500_tables checks that every column has one).  A
download that fails or a bad file ends the job with one line in its log naming the key."""

import sys

from cbmm.data import DataError
from cbmm.data.math500 import fetch_items, read_items_jsonl
from cbmm.io import write_csv
from cbmm_workflow.jobs import start_log

log = start_log(snakemake.log[0], job="math500_items")
source, out = snakemake.params.source, snakemake.output[0]
log.info("items from %s", source)
try:
    if source == "hub":
        fetch_items(out, source="hub", cache_dir=snakemake.params.cache_dir)
    else:
        write_csv(read_items_jsonl(source, n_items=None), out)
except DataError as exc:  # a download that fails (offline) or a bad file: one line
    offline = (" (offline: set real.interpretability.math500.items to a local copy of the "
               "Hub's test.jsonl)" if source == "hub" else "")
    log.error("real.interpretability.math500.items %r: %s%s", source, exc, offline)
    sys.exit(1)
