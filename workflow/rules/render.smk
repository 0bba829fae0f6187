"""Render: every figure and paper table from the aggregated tables only
(cbmm.figures.FIGURES and cbmm.tables).  Each figure is written with its caption,
produced by the figure's own caption function; the report shows it beside the PNG."""


localrules:
    render_sensitivity,
    render_runtime,
    render_math500_ability,
    render_item_difficulty,
    render_discrimination,
    render_rankflow,
    render_rankflow_dataset,
    render_stability_tables,
    render_runtime_tables,
    render_math500_models_table,


rule render_sensitivity:
    input:
        SIM_TABLE,
    output:
        **figure_outputs("sensitivity_{study}", "Simulation studies", "{study}"),
    log:
        log_file("render", "sensitivity_{study}"),
    benchmark:
        benchmark_file("render", "sensitivity_{study}")
    conda:
        "../../envs/core.yaml"
    params:
        figure=lambda wc: f"sensitivity_{wc.study}",
        args=lambda wc, input: [input[0]],
        caption=caption_file,
        kwargs={"definitions": config["figures"]["metric_definitions"]},
        caption_args={
            "config_summary": {"n_replicates": config["simulation"]["replicates"]},
            "definitions": config["figures"]["metric_definitions"],
        },
        method_modules=method_modules(),
    script:
        "../scripts/render.py"


rule render_runtime:
    input:
        RUNTIME_TABLE,
    output:
        **figure_outputs("runtime", "Scalability"),
    log:
        log_file("render", "runtime"),
    benchmark:
        benchmark_file("render", "runtime")
    conda:
        "../../envs/core.yaml"
    params:
        figure="runtime",
        args=lambda wc, input: [input[0]],
        caption=caption_file,
        caption_args={
            "config_summary": {"n_replicates": config["real"]["runtime"]["replicates"]}
        },
        method_modules=method_modules(),
    script:
        "../scripts/render.py"


rule render_math500_ability:
    input:
        MATH500_ABILITIES,
    output:
        **figure_outputs("math500_ability", "Interpretability"),
    log:
        log_file("render", "math500_ability"),
    benchmark:
        benchmark_file("render", "math500_ability")
    conda:
        "../../envs/core.yaml"
    params:
        figure="math500_ability",
        args=lambda wc, input: [input[0]],
        caption=caption_file,
    script:
        "../scripts/render.py"


rule render_item_difficulty:
    input:
        MATH500_ITEMS_TABLE,
    output:
        **figure_outputs("item_difficulty", "Interpretability"),
    log:
        log_file("render", "item_difficulty"),
    benchmark:
        benchmark_file("render", "item_difficulty")
    conda:
        "../../envs/core.yaml"
    params:
        figure="item_difficulty",
        args=lambda wc, input: [input[0]],
        caption=caption_file,
    script:
        "../scripts/render.py"


rule render_discrimination:
    input:
        DISCRIMINATION_TABLE,
    output:
        **figure_outputs("discrimination", "Interpretability"),
    log:
        log_file("render", "discrimination"),
    benchmark:
        benchmark_file("render", "discrimination")
    conda:
        "../../envs/core.yaml"
    params:
        figure="discrimination",
        args=lambda wc, input: [input[0]],
        caption=caption_file,
    script:
        "../scripts/render.py"


rule render_rankflow:
    input:
        summary=DISCRIMINATION_TABLE,
        rankings=[RANKINGS.format(dataset=d) for d in rankflow_panels()],
    output:
        **figure_outputs("rankflow", "Interpretability"),
    log:
        log_file("render", "rankflow"),
    benchmark:
        benchmark_file("render", "rankflow")
    conda:
        "../../envs/core.yaml"
    params:
        figure="rankflow",
        args=lambda wc, input: [
            dict(zip(rankflow_panels(), input.rankings)),
            input.summary,
        ],
        kwargs={"top": rankflow_panels()},
        caption=caption_file,
        caption_args={"config_summary": {"top": rankflow_panels()}},
    script:
        "../scripts/render.py"


rule render_rankflow_dataset:
    input:
        summary=DISCRIMINATION_TABLE,
        rankings=RANKINGS,
    output:
        **figure_outputs("rankflow_{dataset}", "Rankings", "{dataset}"),
    log:
        log_file("render", "rankflow_{dataset}"),
    benchmark:
        benchmark_file("render", "rankflow_{dataset}")
    conda:
        "../../envs/core.yaml"
    params:
        figure="rankflow",
        args=lambda wc, input: [{wc.dataset: input.rankings}, input.summary],
        kwargs=lambda wc: {
            "top": {wc.dataset: config["real"]["interpretability"]["rankflow_top"]}
        },
        caption=caption_file,
        caption_args=lambda wc: {
            "config_summary": {
                "top": {wc.dataset: config["real"]["interpretability"]["rankflow_top"]}
            }
        },
    script:
        "../scripts/render.py"


rule render_stability_tables:
    input:
        STABILITY_TABLE,
    output:
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
        log_file("render", "stability_tables"),
    benchmark:
        benchmark_file("render", "stability_tables")
    conda:
        "../../envs/core.yaml"
    params:
        datasets=config["real"]["stability"]["datasets"],
        parameters=STABILITY_PARAMETERS,
    script:
        "../scripts/render_stability_tables.py"


rule render_runtime_tables:
    input:
        RUNTIME_TABLE,
    output:
        summary=report_table(RUNTIME_SUMMARY, "table_runtime", "Scalability"),
        speedup=report_table(SPEEDUP_TABLE, "table_runtime", "Scalability"),
    log:
        log_file("render", "runtime_tables"),
    benchmark:
        benchmark_file("render", "runtime_tables")
    conda:
        "../../envs/core.yaml"
    params:
        method_modules=method_modules(),
    script:
        "../scripts/render_runtime_tables.py"


rule render_math500_models_table:
    input:
        MATH500_MODELS,
    output:
        report_table(MATH500_MODELS_TEX, "table_math500_models", "Interpretability"),
    log:
        log_file("render", "math500_models_table"),
    benchmark:
        benchmark_file("render", "math500_models_table")
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render_math500_models_table.py"
