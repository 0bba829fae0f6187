"""Aggregation: one tidy table per study under results/tables/ (the figures read only these)."""


localrules:
    aggregate_simulation,
    aggregate_runtime,
    aggregate_discrimination,
    aggregate_stability,
    math500_tables,


rule aggregate_simulation:
    input:
        sim_metrics_files,
    output:
        SIM_TABLE,
    log:
        "logs/aggregate_simulation/{study}.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/aggregate_rows.py"


rule aggregate_runtime:
    input:
        fits=[real_fit_files(*job) for job in runtime_fits()],
        summaries=[MATRIX_SUMMARY.format(dataset=d) for d in config["real"]["runtime"]["datasets"]],
    output:
        RUNTIME_TABLE,
    params:
        jobs=runtime_fits(),
    log:
        "logs/aggregate_runtime/aggregate_runtime.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/aggregate_runtime.py"


rule aggregate_discrimination:
    input:
        expand(REAL_METRICS, dataset=config["real"]["interpretability"]["datasets"]),
    output:
        DISCRIMINATION_TABLE,
    log:
        "logs/aggregate_discrimination/aggregate_discrimination.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/aggregate_rows.py"


rule aggregate_stability:
    input:
        expand(STABILITY, dataset=config["real"]["stability"]["datasets"]),
    output:
        STABILITY_TABLE,
    log:
        "logs/aggregate_stability/aggregate_stability.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/aggregate_rows.py"


if math500() is not None:

    rule math500_tables:
        input:
            **real_fit_inputs(*interpretability_fit(math500()["dataset"])),
            matrix=MATRIX.format(dataset=math500()["dataset"]),
            models=MATH500_MODELS,
            items_meta=MATH500_ITEMS,
        output:
            abilities=MATH500_ABILITIES,
            item_table=MATH500_ITEMS_TABLE,
        log:
            "logs/math500_tables/math500_tables.log",
        conda:
            "../../envs/core.yaml"
        script:
            "../scripts/math500_tables.py"
