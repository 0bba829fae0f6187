"""Real-data summaries: rankings, CV of a and Spearman(theta, accuracy) of the
converged fit (beside the paper-rule fit's), and initialisation stability.
(The simulation metrics are computed by the fit jobs themselves, fit.smk.)

The fits are read through the store (cbmm_workflow.store.listed_fits) from the batch
tables that list them, the jobs' inputs."""


rule metrics_real:
    input:
        unpack(interpretability_inputs),
        matrix=paths.MATRIX,
    output:
        metrics=paths.REAL_METRICS,
        rankings=report_table(paths.RANKINGS, "table_rankings", "Rankings", "{dataset}"),
    log:
        paths.log_file("metrics_real", "{dataset}"),
    benchmark:
        paths.benchmark_file("metrics_real", "{dataset}")
    conda:
        "../../envs/core.yaml"
    resources:
        mem_mb=lambda wc, attempt: 8000 * attempt,
    params:
        fit_dirs=lambda wc: {
            stopping: fit.fit_dir
            for stopping, fit in PLAN.interpretability_fits(wc.dataset).items()
        },
        top_fraction=config["real"]["interpretability"]["top_fraction"],
        # each batch table's fits, checked (see aggregate_simulation)
        planned=interpretability_plan,
    script:
        "../scripts/metrics_real.py"


rule stability:
    input:
        stability_inputs,
    output:
        paths.STABILITY,
    log:
        paths.log_file("stability", "{dataset}"),
    benchmark:
        paths.benchmark_file("stability", "{dataset}")
    conda:
        "../../envs/core.yaml"
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
    params:
        fits=lambda wc: [
            {
                "init_scale": float(fit.init_scale),
                "seed": fit.seed,
                "fit_dir": fit.fit_dir,
            }
            for fit in PLAN.stability_fits(wc.dataset)
        ],
        planned=stability_plan,
    script:
        "../scripts/stability.py"
