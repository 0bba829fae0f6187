"""Aggregation: one tidy table per study under results/tables/ (the figures read only these)."""


localrules:
    aggregate_simulation,
    aggregate_runtime,
    aggregate_discrimination,
    aggregate_stability,
    math500_tables,


# One job writes the table of every simulation study (one start-up for all of them).
rule aggregate_simulation:
    input:
        sim_batch_files(),
    output:
        [
            report_table(
                SIM_TABLE.format(study=study),
                "table_simulation",
                "Simulation studies",
                study,
            )
            for study in sim_studies()
        ],
    log:
        log_file("aggregate_simulation", "aggregate_simulation"),
    benchmark:
        benchmark_file("aggregate_simulation", "aggregate_simulation")
    conda:
        "../../envs/core.yaml"
    params:
        sort=["level", "method", "replicate"],
        method_order=methods_in_order(),
        split_by=["study", sim_studies()],
    script:
        "../scripts/aggregate_rows.py"


rule aggregate_runtime:
    input:
        batches=runtime_batch_files,
    output:
        table=report_table(RUNTIME_TABLE, "table_runtime", "Scalability"),
        summary=report_table(RUNTIME_SUMMARY, "table_runtime", "Scalability"),
        speedup=report_table(SPEEDUP_TABLE, "table_runtime", "Scalability"),
    log:
        log_file("aggregate_runtime", "aggregate_runtime"),
    benchmark:
        benchmark_file("aggregate_runtime", "aggregate_runtime")
    conda:
        "../../envs/core.yaml"
    params:
        method_order=methods_in_order(),
        stopping=PAPER,
        datasets=config["real"]["runtime"]["datasets"],
        methods=runtime_methods(),
        replicates=config["real"]["runtime"]["replicates"],
        init_scale=float(config["fit"]["init_scale"]),
        method_modules=method_modules(),
    script:
        "../scripts/aggregate_runtime.py"


rule aggregate_discrimination:
    input:
        expand(REAL_METRICS, dataset=config["real"]["interpretability"]["datasets"]),
    output:
        report_table(DISCRIMINATION_TABLE, "table_discrimination", "Interpretability"),
    log:
        log_file("aggregate_discrimination", "aggregate_discrimination"),
    benchmark:
        benchmark_file("aggregate_discrimination", "aggregate_discrimination")
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
        expand(STABILITY, dataset=config["real"]["stability"]["datasets"]),
    output:
        raw=report_table(STABILITY_TABLE, "table_stability_raw", "Recovery stability"),
        summary=report_table(STABILITY_SUMMARY, "table_stability", "Recovery stability"),
        tex=[
            report_table(
                STABILITY_TEX.format(parameter=p),
                "table_stability",
                "Recovery stability",
            )
            for p in STABILITY_PARAMETERS
        ],
    log:
        log_file("aggregate_stability", "aggregate_stability"),
    benchmark:
        benchmark_file("aggregate_stability", "aggregate_stability")
    conda:
        "../../envs/core.yaml"
    params:
        datasets=config["real"]["stability"]["datasets"],
        parameters=STABILITY_PARAMETERS,
    script:
        "../scripts/aggregate_stability.py"


if math500() is not None:

    rule math500_tables:
        input:
            batch=math500_fit_batch,
            matrix=MATRIX.format(dataset=math500()["dataset"]),
            models=MATH500_MODELS,
            items_meta=MATH500_ITEMS,
        output:
            abilities=report_table(
                MATH500_ABILITIES, "table_math500", "Interpretability"
            ),
            item_table=report_table(
                MATH500_ITEMS_TABLE, "table_math500", "Interpretability"
            ),
            models_tex=report_table(
                MATH500_MODELS_TEX, "table_math500_models", "Interpretability"
            ),
        log:
            log_file("math500_tables", "math500_tables"),
        benchmark:
            benchmark_file("math500_tables", "math500_tables")
        conda:
            "../../envs/core.yaml"
        params:
            fit_dir=real_fit_dir(interpretability_fits(math500()["dataset"])[CONVERGED]),
        script:
            "../scripts/math500_tables.py"
