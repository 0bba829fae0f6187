"""Render: every figure and paper table from the aggregated tables only
(cbmm.figures.FIGURES and cbmm.tables); figures are report()-tagged."""


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
        **figure_outputs("sensitivity_{study}", "Simulation studies", "{study}",
                         caption="sensitivity"),
    params:
        figure=lambda wc: f"sensitivity_{wc.study}",
        args=lambda wc, input: [input[0]],
        kwargs={"definitions": config["figures"]["metric_definitions"]},
    log:
        "logs/render/sensitivity_{study}.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render.py"


rule render_runtime:
    input:
        RUNTIME_TABLE,
    output:
        **figure_outputs("runtime", "Scalability"),
    params:
        figure="runtime",
        args=lambda wc, input: [input[0]],
    log:
        "logs/render/runtime.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render.py"


rule render_math500_ability:
    input:
        MATH500_ABILITIES,
    output:
        **figure_outputs("math500_ability", "Interpretability"),
    params:
        figure="math500_ability",
        args=lambda wc, input: [input[0]],
    log:
        "logs/render/math500_ability.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render.py"


rule render_item_difficulty:
    input:
        MATH500_ITEMS_TABLE,
    output:
        **figure_outputs("item_difficulty", "Interpretability"),
    params:
        figure="item_difficulty",
        args=lambda wc, input: [input[0]],
    log:
        "logs/render/item_difficulty.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render.py"


rule render_discrimination:
    input:
        DISCRIMINATION_TABLE,
    output:
        **figure_outputs("discrimination", "Interpretability"),
    params:
        figure="discrimination",
        args=lambda wc, input: [input[0]],
    log:
        "logs/render/discrimination.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render.py"


rule render_rankflow:
    input:
        summary=DISCRIMINATION_TABLE,
        rankings=[RANKINGS.format(dataset=d) for d in rankflow_panels()],
    output:
        **figure_outputs("rankflow", "Interpretability"),
    params:
        figure="rankflow",
        args=lambda wc, input: [dict(zip(rankflow_panels(), input.rankings)), input.summary],
        kwargs={"top": rankflow_panels()},
    log:
        "logs/render/rankflow.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render.py"


rule render_rankflow_dataset:
    input:
        summary=DISCRIMINATION_TABLE,
        rankings=RANKINGS,
    output:
        **figure_outputs("rankflow_{dataset}", "Rankings", "{dataset}", caption="rankflow_dataset"),
    params:
        figure="rankflow",
        args=lambda wc, input: [{wc.dataset: input.rankings}, input.summary],
        kwargs=lambda wc: {"top": {wc.dataset: config["real"]["interpretability"]["rankflow_top"]}},
    log:
        "logs/render/rankflow_{dataset}.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render.py"


rule render_stability_tables:
    input:
        STABILITY_TABLE,
    output:
        summary=report_table("results/tables/stability_summary.csv", "table_stability",
                             "Recovery stability"),
        tex=[report_table(path, "table_stability", "Recovery stability")
             for path in expand(STABILITY_TEX, parameter=["theta", "a", "b"])],
    params:
        datasets=config["real"]["stability"]["datasets"],
    log:
        "logs/render/stability_tables.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render_stability_tables.py"


rule render_runtime_tables:
    input:
        RUNTIME_TABLE,
    output:
        summary=report_table("results/tables/runtime_summary.csv", "table_runtime",
                             "Scalability"),
        speedup=report_table("results/tables/speedup.csv", "table_runtime", "Scalability"),
    log:
        "logs/render/runtime_tables.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render_runtime_tables.py"


rule render_math500_models_table:
    input:
        MATH500_MODELS,
    output:
        report_table("results/tables/math500_models.tex", "table_math500_models",
                     "Interpretability"),
    log:
        "logs/render/math500_models_table.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/render_math500_models_table.py"
