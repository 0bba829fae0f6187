"""Build one registry dataset into the canonical matrix + summary (rule build_dataset).

A data problem (a download that fails, e.g. offline; a bad file) ends the job
with one line in its log naming the dataset and the cause; the other jobs go
on (the profile's keep-going).
"""

import sys

from cbmm.data import DataError, build_dataset
from cbmm_workflow.jobs import start_log

log = start_log(snakemake.log[0], job="build_dataset")
name = snakemake.wildcards.dataset
entry = snakemake.params.entry
log.info("building %s from %s", name, entry)
try:
    build_dataset(name, entry, snakemake.output.matrix,
                  cache_dir=snakemake.params.cache_dir,
                  release=snakemake.params.release or None)
except DataError as exc:  # says what to do offline; a local file's names the file
    message = str(exc)
    named = message.startswith(name) or repr(name) in message
    log.error("%s", message if named else f"dataset {name!r}: {message}")
    sys.exit(1)
log.info("wrote %s", snakemake.output.matrix)
