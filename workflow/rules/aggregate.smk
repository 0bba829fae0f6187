"""Aggregation: one tidy table per study under results/tables/ (the figures read only these)."""


localrules:
    aggregate_simulation,
    aggregate_runtime,
    aggregate_discrimination,
    aggregate_stability,


# One job writes the table of every simulation study (one start-up for all of them).
rule aggregate_simulation:
    input:
        PLAN.sim_batch_files(),
    output:
        [
            report_table(
                paths.SIM_TABLE.format(study=study),
                "table_simulation",
                "Simulation studies",
                study,
            )
            for study in PLAN.studies
        ],
    log:
        paths.log_file("aggregate_simulation", "aggregate_simulation"),
    benchmark:
        paths.benchmark_file("aggregate_simulation", "aggregate_simulation")
    conda:
        "../../envs/core.yaml"
    params:
        sort=["level", "method", "replicate"],
        method_order=PLAN.methods_in_order(),
        split_by=["study", PLAN.studies],
        # each batch table's fits, checked: a table written under another packing whose
        # job Snakemake did not record (it was not running) is not taken for up to date
        planned=PLAN.sim_batch_keys(),
    script:
        "../scripts/aggregate_rows.py"


rule aggregate_runtime:
    input:
        batches=runtime_batch_files,
    output:
        table=report_table(paths.RUNTIME_TABLE, "table_runtime", "Scalability"),
        summary=report_table(paths.RUNTIME_SUMMARY, "table_runtime", "Scalability"),
        speedup=report_table(paths.SPEEDUP_TABLE, "table_runtime", "Scalability"),
    log:
        paths.log_file("aggregate_runtime", "aggregate_runtime"),
    benchmark:
        paths.benchmark_file("aggregate_runtime", "aggregate_runtime")
    conda:
        "../../envs/core.yaml"
    params:
        method_order=PLAN.methods_in_order(),
        stopping=PAPER,
        datasets=config["real"]["runtime"]["datasets"],
        methods=PLAN.runtime_methods(),
        replicates=config["real"]["runtime"]["replicates"],
        init_scale=float(config["fit"]["init_scale"]),
        method_modules=PLAN.method_modules,
        # each batch table's fits, checked (see aggregate_simulation)
        planned=runtime_plan,
    script:
        "../scripts/aggregate_runtime.py"


rule aggregate_discrimination:
    input:
        expand(
            paths.REAL_METRICS, dataset=config["real"]["interpretability"]["datasets"]
        ),
    output:
        report_table(
            paths.DISCRIMINATION_TABLE, "table_discrimination", "Interpretability"
        ),
    log:
        paths.log_file("aggregate_discrimination", "aggregate_discrimination"),
    benchmark:
        paths.benchmark_file("aggregate_discrimination", "aggregate_discrimination")
    conda:
        "../../envs/core.yaml"
    params:
        sort=[],
        method_order=[],
    script:
        "../scripts/aggregate_rows.py"


# The raw correlations of every stability dataset, their summary and the paper's
# three LaTeX tables.
rule aggregate_stability:
    input:
        expand(paths.STABILITY, dataset=config["real"]["stability"]["datasets"]),
    output:
        raw=report_table(
            paths.STABILITY_TABLE, "table_stability_raw", "Recovery stability"
        ),
        summary=report_table(
            paths.STABILITY_SUMMARY, "table_stability", "Recovery stability"
        ),
        tex=[
            report_table(path, "table_stability", "Recovery stability")
            for path in paths.STABILITY_TEX_FILES
        ],
    log:
        paths.log_file("aggregate_stability", "aggregate_stability"),
    benchmark:
        paths.benchmark_file("aggregate_stability", "aggregate_stability")
    conda:
        "../../envs/core.yaml"
    params:
        datasets=config["real"]["stability"]["datasets"],
    script:
        "../scripts/aggregate_stability.py"


if PLAN.math500 is not None:

    localrules:
        math500_tables,

    rule math500_tables:
        input:
            batch=math500_fit_batch,
            matrix=paths.MATRIX.format(dataset=PLAN.math500["dataset"]),
            models=paths.MATH500_MODELS,
            items_meta=paths.MATH500_ITEMS,
        output:
            abilities=report_table(
                paths.MATH500_ABILITIES, "table_math500", "Interpretability"
            ),
            item_table=report_table(
                paths.MATH500_ITEMS_TABLE, "table_math500", "Interpretability"
            ),
            models_tex=report_table(
                paths.MATH500_MODELS_TEX, "table_math500_models", "Interpretability"
            ),
        log:
            paths.log_file("math500_tables", "math500_tables"),
        benchmark:
            paths.benchmark_file("math500_tables", "math500_tables")
        conda:
            "../../envs/core.yaml"
        params:
            fit_dir=math500_fit().fit_dir,
            planned=math500_plan,
        script:
            "../scripts/math500_tables.py"
