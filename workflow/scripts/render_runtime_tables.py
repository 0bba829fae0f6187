"""Runtime summary (mean/min/max per suite and method) and cBMM's speedup over the
fastest baseline (rule render_runtime_tables).  The user's method modules are
imported first: the tables name methods through the registry."""

from cbmm.io import write_csv
from cbmm.tables import runtime_summary, speedup_table
from helpers import import_method_modules, start_log

log = start_log(snakemake.log[0], job="render_runtime_tables")
import_method_modules(snakemake.params.method_modules)
summary = runtime_summary(snakemake.input[0])
write_csv(summary, snakemake.output.summary)
write_csv(speedup_table(summary), snakemake.output.speedup)
log.info("%s", summary.to_string())
