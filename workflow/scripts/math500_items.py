"""The MATH-500 items (subject, level) for the difficulty figure (rule math500_items):
the Hub's test split, or a local JSONL file of the same form (any number of items:
column j of the matrix is line j; math500_tables checks that every column has one)."""

from cbmm.data.math500 import fetch_items, read_items_jsonl
from cbmm.io import write_csv
from cbmm_workflow.jobs import start_log

log = start_log(snakemake.log[0], job="math500_items")
source, out = snakemake.params.source, snakemake.output[0]
log.info("items from %s", source)
if source == "hub":
    fetch_items(out, source="hub", cache_dir=snakemake.params.cache_dir)
else:
    write_csv(read_items_jsonl(source, n_items=None), out)
