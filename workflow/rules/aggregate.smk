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
        report_table(SIM_TABLE, "table_simulation", "Simulation studies", "{study}"),
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
        report_table(RUNTIME_TABLE, "table_runtime", "Scalability"),
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
        report_table(DISCRIMINATION_TABLE, "table_discrimination", "Interpretability"),
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
        report_table(STABILITY_TABLE, "table_stability_raw", "Recovery stability"),
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
            abilities=report_table(MATH500_ABILITIES, "table_math500", "Interpretability"),
            item_table=report_table(MATH500_ITEMS_TABLE, "table_math500", "Interpretability"),
        log:
            "logs/math500_tables/math500_tables.log",
        conda:
            "../../envs/core.yaml"
        script:
            "../scripts/math500_tables.py"
