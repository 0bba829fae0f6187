"""Concatenate per-job rows (CSV tables or JSON objects) into one CSV table
(rules aggregate_simulation, aggregate_discrimination).

With ``params.planned`` (table -> the fits planned for it) the tables are first checked
against it (cbmm_workflow.store.refuse_unplanned): one that lists other fits is marked
to run again and the job stops, naming it, rather than aggregate the wrong rows.

``params.sort`` names the columns to sort by; methods sort in ``params.method_order``
(the registry's display order).  With ``params.split_by = [column, values]`` the rows
go to one table per value instead, the outputs in the order of ``values``.
"""

import json

import pandas as pd
from cbmm.io import read_csv, write_csv
from cbmm_workflow.jobs import start_log


def read_part(path):
    if path.endswith(".json"):
        with open(path) as stream:
            return pd.DataFrame([json.load(stream)])
    return read_csv(path)


log = start_log(snakemake.log[0], job=snakemake.rule)
planned = getattr(snakemake.params, "planned", None)
if planned:
    from cbmm_workflow.store import refuse_unplanned

    refuse_unplanned(planned, log)
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
