"""Draw the MATH-500 test subset in this folder from the full files (run once, by hand).

    python .test/data/math500/make_subset.py /path/to/shared/data/math500

Reads ``MATH_500.csv`` (140 x 500) and ``MATH-500_test.jsonl`` from the given
folder and ``config/math500_models.csv``; writes ``MATH_500.csv`` (40 rows: 20
models x both prompt styles, spread over the three size tiers; 60 items: 12 of
each difficulty level), ``items.jsonl`` (subject, level and unique_id of those
items, in column order; problem and solution text dropped) and ``models.csv``
(the 40 rows of the model table).  Item columns are renumbered 0..59 so that
column j is line j of ``items.jsonl``, as in the full files; ``SOURCE.md``
lists the original item numbers.
"""

import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
MODELS_PER_TIER = {"0-7B": 8, "7-20B": 6, ">20B": 6}
ITEMS_PER_LEVEL = 12
SEED = 500


def main(shared: Path) -> None:
    rng = np.random.default_rng(SEED)
    matrix = pd.read_csv(shared / "MATH_500.csv", index_col=0)
    models = pd.read_csv(REPO / "config" / "math500_models.csv")
    chosen_models = []
    for tier, count in MODELS_PER_TIER.items():
        names = sorted(models.loc[models["tier"] == tier, "model"].unique())
        chosen_models += list(rng.choice(names, size=count, replace=False))
    rows = models[models["model"].isin(chosen_models)].sort_values("row_label")
    items = [json.loads(line) for line in (shared / "MATH-500_test.jsonl").read_text().splitlines()]
    levels = np.array([int(item["level"]) for item in items])
    columns = sorted(int(j) for level in range(1, 6)
                     for j in rng.choice(np.flatnonzero(levels == level), size=ITEMS_PER_LEVEL,
                                         replace=False))
    subset = matrix.loc[rows["row_label"], [str(j) for j in columns]]
    subset.columns = [str(k) for k in range(len(columns))]
    subset.index.name = None
    subset.to_csv(HERE / "MATH_500.csv")
    with open(HERE / "items.jsonl", "w") as stream:
        for j in columns:
            record = {key: items[j][key] for key in ("subject", "level", "unique_id")}
            stream.write(json.dumps(record) + "\n")
    rows.to_csv(HERE / "models.csv", index=False)
    print(f"{subset.shape[0]} rows x {subset.shape[1]} items; original item numbers: {columns}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
