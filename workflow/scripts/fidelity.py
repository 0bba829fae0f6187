"""The published numbers beside this run's, from the aggregated tables (rule fidelity).
The user's method modules are imported first: the tables name methods through the registry."""

from cbmm.fidelity import write_fidelity
from cbmm_workflow.jobs import import_method_modules, start_log

log = start_log(snakemake.log[0], job="fidelity")
import_method_modules(snakemake.params.method_modules)
table = write_fidelity(snakemake.input, snakemake.output[0])
counts = table["within_spread"].replace("", "not computed").value_counts().to_dict()
log.info("%d published numbers: %s", len(table), counts)
