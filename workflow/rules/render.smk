"""Render: every figure and paper table from the aggregated tables only
(cbmm.figures.FIGURES and cbmm.tables).  Each figure is written with its caption,
produced by the figure's own caption function; the report shows it beside the PNG."""


localrules:
    render_sensitivity,
    render_runtime,
    render_math500,
    render_interpretability,


# One job draws the figures of every simulation study (one start-up for all of them).
rule render_sensitivity:
    input:
        [SIM_TABLE.format(study=study) for study in sim_studies()],
    output:
        [
            path
            for study in sim_studies()
            for path in figure_outputs(
                f"sensitivity_{study}", "Simulation studies", study
            ).values()
        ],
    log:
        log_file("render", "sensitivity"),
    benchmark:
        benchmark_file("render", "sensitivity")
    conda:
        "../../envs/core.yaml"
    params:
        figures=lambda wc, input: [
            {
                "figure": f"sensitivity_{study}",
                "args": [table],
                "kwargs": {"definitions": config["figures"]["metric_definitions"]},
                "caption_args": {
                    "config_summary": {
                        "n_replicates": config["simulation"]["replicates"]
                    },
                    "definitions": config["figures"]["metric_definitions"],
                },
            }
            for study, table in zip(sim_studies(), input)
        ],
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
        figures=lambda wc, input: [
            {
                "figure": "runtime",
                "args": [input[0]],
                "caption_args": {
                    "config_summary": {
                        "n_replicates": config["real"]["runtime"]["replicates"]
                    }
                },
            }
        ],
        method_modules=method_modules(),
    script:
        "../scripts/render.py"


# One job draws the two MATH-500 figures.
rule render_math500:
    input:
        MATH500_ABILITIES,
        MATH500_ITEMS_TABLE,
    output:
        [
            path
            for name in ("math500_ability", "item_difficulty")
            for path in figure_outputs(name, "Interpretability").values()
        ],
    log:
        log_file("render", "math500"),
    benchmark:
        benchmark_file("render", "math500")
    conda:
        "../../envs/core.yaml"
    params:
        figures=lambda wc, input: [
            {"figure": "math500_ability", "args": [input[0]]},
            {"figure": "item_difficulty", "args": [input[1]]},
        ],
    script:
        "../scripts/render.py"


# One job draws the figures of the interpretability datasets: the discrimination
# summary, the paper's rank-flow panels and each dataset's own rank flow.
rule render_interpretability:
    input:
        DISCRIMINATION_TABLE,
        [RANKINGS.format(dataset=d) for d in interpretability_datasets()],
    output:
        [
            path
            for name, category, subcategory, _ in interpretability_figures()
            for path in figure_outputs(name, category, subcategory).values()
        ],
    log:
        log_file("render", "interpretability"),
    benchmark:
        benchmark_file("render", "interpretability")
    conda:
        "../../envs/core.yaml"
    params:
        figures=[spec for *_, spec in interpretability_figures()],
    script:
        "../scripts/render.py"
