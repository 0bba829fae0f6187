"""Concatenate per-job rows (CSV tables or JSON objects) into one CSV table
(rules aggregate_simulation, aggregate_discrimination).

With ``params.planned`` (table -> the fits planned for it) the tables are first checked
against it (cbmm_workflow.store.unplanned_tables): one that lists other fits is marked
to run again and the job stops, naming it, rather than aggregate the wrong rows.

``params.sort`` names the columns to sort by; methods sort in ``params.method_order``
(the registry's display order).  With ``params.split_by = [column, values]`` the rows
go to one table per value instead, the outputs in the order of ``values``.
"""

import json
import sys

import pandas as pd
from cbmm.io import write_csv
from cbmm_workflow.jobs import start_log


def read_part(path):
    if path.endswith(".json"):
        with open(path) as stream:
            return pd.DataFrame([json.load(stream)])
    return pd.read_csv(path)


log = start_log(snakemake.log[0], job=snakemake.rule)
planned = getattr(snakemake.params, "planned", None)
if planned:
    from cbmm_workflow.store import unplanned_tables

    stale = unplanned_tables(planned)
    if stale:
        log.error("%s%s list other fits than this configuration plans for them: their jobs "
                  "finished while Snakemake was not running (killed, or a lost login "
                  "session), so it kept no record of the settings they ran with. They are "
                  "marked to run again: run the same command again (the fits already "
                  "stored are reused)", stale[0],
                  f" and {len(stale) - 1} more batch table(s)" if len(stale) > 1 else "")
        sys.exit(1)
table = pd.concat([read_part(path) for path in snakemake.input], ignore_index=True)
sort = list(snakemake.params.sort)
if sort:
    rank = {}
    if "method" in sort:
        rank["method"] = {m: i for i, m in enumerate(snakemake.params.method_order)}
    table = table.sort_values(sort, key=lambda col: col.map(rank[col.name]) if col.name in rank
                              else col, kind="stable", ignore_index=True)
log.info("%d rows from %d files", len(table), len(snakemake.input))
split_by = getattr(snakemake.params, "split_by", None)
if split_by is None:
    write_csv(table, snakemake.output[0])
else:
    column, values = split_by
    for value, path in zip(values, snakemake.output, strict=True):
        write_csv(table[table[column] == value], path)
