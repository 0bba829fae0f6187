"""Render: every figure and paper table from the aggregated tables only
(cbmm.figures and cbmm.tables).  What each job draws is cbmm_workflow.render's; each
figure is written with its caption, produced by the figure's own caption function; the
report shows it beside the PNG."""


localrules:
    render_sensitivity,
    render_runtime,
    render_math500,
    render_interpretability,


# One job draws the figures of every simulation study (one start-up for all of them).
rule render_sensitivity:
    input:
        [paths.SIM_TABLE.format(study=study) for study in PLAN.studies],
    output:
        figure_outputs(render.sensitivity_figures(PLAN)),
    log:
        paths.log_file("render", "sensitivity"),
    benchmark:
        paths.benchmark_file("render", "sensitivity")
    conda:
        "../../envs/core.yaml"
    params:
        figures=[figure.spec for figure in render.sensitivity_figures(PLAN)],
        method_modules=PLAN.method_modules,
    script:
        "../scripts/render.py"


rule render_runtime:
    input:
        paths.RUNTIME_TABLE,
    output:
        figure_outputs(render.runtime_figures(PLAN)),
    log:
        paths.log_file("render", "runtime"),
    benchmark:
        paths.benchmark_file("render", "runtime")
    conda:
        "../../envs/core.yaml"
    params:
        figures=[figure.spec for figure in render.runtime_figures(PLAN)],
        method_modules=PLAN.method_modules,
    script:
        "../scripts/render.py"


# One job draws the two MATH-500 figures.
rule render_math500:
    input:
        paths.MATH500_ABILITIES,
        paths.MATH500_ITEMS_TABLE,
    output:
        figure_outputs(render.math500_figures()),
    log:
        paths.log_file("render", "math500"),
    benchmark:
        paths.benchmark_file("render", "math500")
    conda:
        "../../envs/core.yaml"
    params:
        figures=[figure.spec for figure in render.math500_figures()],
    script:
        "../scripts/render.py"


# One job draws the discrimination summary and the paper's rank-flow panels.
rule render_interpretability:
    input:
        paths.DISCRIMINATION_TABLE,
        [paths.RANKINGS.format(dataset=d) for d in PLAN.rankflow_panels()],
    output:
        figure_outputs(render.interpretability_figures(PLAN)),
    log:
        paths.log_file("render", "interpretability"),
    benchmark:
        paths.benchmark_file("render", "interpretability")
    conda:
        "../../envs/core.yaml"
    params:
        figures=[figure.spec for figure in render.interpretability_figures(PLAN)],
    script:
        "../scripts/render.py"


# Each interpretability dataset's own rank flow, in a job of its own: one dataset's figure
# cannot take another's down.  One rule per dataset (not a wildcard rule): the report
# shows each figure's caption file, whose path must be known.
for rankflow in render.dataset_rankflow_figures(PLAN):

    rule:
        name:
            f"render_{rankflow.name}"
        input:
            paths.REAL_METRICS.format(dataset=rankflow.subcategory),
            paths.RANKINGS.format(dataset=rankflow.subcategory),
        output:
            figure_outputs([rankflow]),
        log:
            paths.log_file("render", rankflow.name),
        benchmark:
            paths.benchmark_file("render", rankflow.name)
        localrule: True
        conda:
            "../../envs/core.yaml"
        params:
            figures=[rankflow.spec],
        script:
            "../scripts/render.py"
