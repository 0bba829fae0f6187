"""The published numbers beside this run's, from the aggregated tables (rule fidelity)."""

from cbmm.fidelity import write_fidelity
from helpers import start_log

log = start_log(snakemake.log[0], job="fidelity")
table = write_fidelity(snakemake.input, snakemake.output[0])
counts = table["within_spread"].replace("", "not computed").value_counts().to_dict()
log.info("%d published numbers: %s", len(table), counts)
