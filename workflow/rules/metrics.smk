"""Metrics: each simulated fit against its truth; descriptive summaries, rankings and
initialisation stability on real data."""


rule metrics_simulation:
    input:
        simulation=SIMULATION,
        **fit_outputs(SIM_FIT_DIR),
    output:
        SIM_METRICS,
    params:
        # the tidy row's identifying columns; level as the float of the table
        row=lambda wc: dict(study=wc.study, level=float(wc.level), method=wc.method,
                            replicate=int(wc.replicate)),
    log:
        "logs/metrics_simulation/{study}/level_{level}/{method}/rep_{replicate}.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/metrics_simulation.py"


rule metrics_real:
    input:
        unpack(interpretability_fit_files),
        matrix=MATRIX,
    output:
        metrics=REAL_METRICS,
        rankings=report_table(RANKINGS, "table_rankings", "Rankings", "{dataset}"),
    params:
        top_fraction=config["real"]["interpretability"]["top_fraction"],
    log:
        "logs/metrics_real/{dataset}.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/metrics_real.py"


rule stability:
    input:
        unpack(stability_fit_abilities),
    output:
        STABILITY,
    params:
        fits=lambda wc: [(float(scale), seed) for _, _, scale, seed in stability_fits(wc.dataset)],
        input_keys=lambda wc: [f"s2_{scale}_seed_{seed}" for _, _, scale, seed in stability_fits(wc.dataset)],
    log:
        "logs/stability/{dataset}.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/stability.py"
