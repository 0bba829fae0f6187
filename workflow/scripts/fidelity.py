"""The published numbers beside this run's, from the aggregated tables (rule fidelity): the
rows that concern this run (a run on a user's own data gets none of the paper's suites).
The user's method modules are imported first: the tables name methods through the registry."""

from cbmm.fidelity import load_published, write_fidelity
from cbmm_workflow.jobs import import_method_modules, start_log

log = start_log(snakemake.log[0], job="fidelity")
import_method_modules(snakemake.params.method_modules)
table = write_fidelity(snakemake.input, snakemake.output[0], covered_only=True)
counts = table["within_spread"].replace("", "not computed").value_counts().to_dict()
log.info("%d published numbers concern this run: %s; %d others (studies, levels, methods or "
         "datasets it does not have) left out", len(table), counts,
         len(load_published()) - len(table))
