"""The item audit of one dataset (rule item_audit): cbmm.item_audit of a fit of all its
models (cbmm.fit's defaults) on their own answers, with that fit's status."""

import warnings

import cbmm
from cbmm.data import read_matrix
from cbmm.efficient import FLAGS, AbilityAgreementWarning, WrongWayDependenceWarning
from cbmm.efficient.audit import key_check_summary
from cbmm.io import write_csv
from cbmm_workflow.jobs import start_log

log = start_log(snakemake.log[0], job="item_audit")
table = read_matrix(snakemake.input.matrix)
with warnings.catch_warnings():
    warnings.simplefilter("ignore", cbmm.DegenerateDataWarning)  # the audit names those items
    result = cbmm.fit(table, sigma=snakemake.params.sigma)
log.info("fit of %d x %d: %s", *table.shape, result.status)
with warnings.catch_warnings(record=True) as caught:  # into the log, in the library's words
    warnings.simplefilter("always")
    audit = cbmm.item_audit(result, table)
log.info("flags: %s", {flag: int(audit[flag].sum()) for flag in FLAGS})
log.info("%s", key_check_summary(audit))
for warning in caught:
    log.warning("%s", warning.message)
for check, warned in (("ability_agreement", AbilityAgreementWarning),
                      ("wrong_way_dependence", WrongWayDependenceWarning)):
    if not any(issubclass(w.category, warned) for w in caught):
        log.info("%s", audit.attrs[check])
audit["status"] = result.status  # the fit's: its caption says whether it is an answer
write_csv(audit.reset_index(), snakemake.output[0], float_format="%.10g")
