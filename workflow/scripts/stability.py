"""Spearman correlations between cBMM fits of one dataset started with different
variances s^2 and the same seed (rule stability; cbmm.tables.stability_pairs)."""

from pathlib import Path

import pandas as pd
from cbmm.tables import stability_pairs
from helpers import start_log, write_csv

log = start_log(snakemake.log[0], job="stability")
fits = {}
for fit in snakemake.params.fits:
    folder = Path(fit["fit_dir"])
    items = pd.read_csv(folder / "items.csv")
    theta = pd.read_csv(folder / "abilities.csv")["theta"].to_numpy()
    fits[(fit["init_scale"], fit["seed"])] = (theta, items["a"].to_numpy(), items["b"].to_numpy())
table = stability_pairs(fits, dataset=snakemake.wildcards.dataset)
log.info("%d correlations, %d NaN (failed or constant fits)", len(table),
         int(table["spearman"].isna().sum()))
write_csv(table, snakemake.output[0])
