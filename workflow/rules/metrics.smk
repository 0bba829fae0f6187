"""Real-data summaries: rankings, CV of a and Spearman(theta, accuracy) of the
converged fit (beside the paper-rule fit's), and initialisation stability.
(The simulation metrics are computed by the fit jobs themselves, fit.smk.)"""


rule metrics_real:
    input:
        unpack(interpretability_inputs),
        matrix=MATRIX,
    output:
        metrics=REAL_METRICS,
        rankings=report_table(RANKINGS, "table_rankings", "Rankings", "{dataset}"),
    log:
        log_file("metrics_real", "{dataset}"),
    benchmark:
        benchmark_file("metrics_real", "{dataset}")
    conda:
        "../../envs/core.yaml"
    resources:
        mem_mb=lambda wc, attempt: 8000 * attempt,
    params:
        fit_dirs=lambda wc: {
            stopping: real_fit_dir(fit)
            for stopping, fit in interpretability_fits(wc.dataset).items()
        },
        top_fraction=config["real"]["interpretability"]["top_fraction"],
    script:
        "../scripts/metrics_real.py"


rule stability:
    input:
        stability_inputs,
    output:
        STABILITY,
    log:
        log_file("stability", "{dataset}"),
    benchmark:
        benchmark_file("stability", "{dataset}")
    conda:
        "../../envs/core.yaml"
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
    params:
        fits=lambda wc: [
            {"init_scale": float(fit[3]), "seed": fit[4], "fit_dir": real_fit_dir(fit)}
            for fit in stability_fits(wc.dataset)
        ],
    script:
        "../scripts/stability.py"
