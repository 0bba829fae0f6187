"""Efficient evaluation (docs/efficiency.md): per dataset of real.efficiency, the
selection study and the adaptive tests of held-out models (rule efficiency), the item
audit (rule item_audit), and their figures (a rule render_efficiency_<dataset> each).
The study's logic is cbmm.efficient.study; these jobs fit their own calibrations
(cbmm.fit's defaults)."""


rule efficiency:
    input:
        matrix=paths.MATRIX,
        # the item table, where the tests are also balanced over one of its columns
        item_table=lambda wc: (
            paths.MATH500_ITEMS if PLAN.content_balance(wc.dataset) else []
        ),
    output:
        rows=paths.EFFICIENCY_ROWS,
        selection=report_table(
            paths.EFFICIENCY_TABLE,
            "table_efficiency",
            "Efficient evaluation",
            "{dataset}",
        ),
        adaptive=report_table(
            paths.ADAPTIVE_TABLE, "table_adaptive", "Efficient evaluation", "{dataset}"
        ),
        adaptive_summary=report_table(
            paths.ADAPTIVE_SUMMARY_TABLE,
            "table_adaptive_summary",
            "Efficient evaluation",
            "{dataset}",
        ),
    log:
        paths.log_file("efficiency", "{dataset}"),
    benchmark:
        paths.benchmark_file("efficiency", "{dataset}")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
        runtime=240,
    params:
        settings=PLAN.efficiency_settings(),
        sigma=config["fit"]["sigma"],
        content=lambda wc: PLAN.content_balance(wc.dataset),
    script:
        "../scripts/efficiency.py"


rule item_audit:
    input:
        matrix=paths.MATRIX,
    output:
        report_table(
            paths.ITEM_AUDIT_TABLE,
            "table_item_audit",
            "Efficient evaluation",
            "{dataset}",
        ),
    log:
        paths.log_file("item_audit", "{dataset}"),
    benchmark:
        paths.benchmark_file("item_audit", "{dataset}")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: 4000 * attempt,
    params:
        sigma=config["fit"]["sigma"],
    script:
        "../scripts/item_audit.py"


# Each dataset's figures in a job of its own: one dataset's failure cannot take another's
# figures down.  One rule per dataset (not a wildcard rule): the report shows each
# figure's caption file, whose path must be known.
for figures_of in PLAN.efficiency_datasets():

    rule:
        name:
            f"render_efficiency_{figures_of}"
        input:
            [
                pattern.format(dataset=figures_of)
                for pattern in (
                    paths.EFFICIENCY_TABLE,
                    paths.ADAPTIVE_TABLE,
                    paths.ITEM_AUDIT_TABLE,
                )
            ],
        output:
            figure_outputs(render.efficiency_figures(PLAN, figures_of)),
        log:
            paths.log_file("render", f"efficiency_{figures_of}"),
        benchmark:
            paths.benchmark_file("render", f"efficiency_{figures_of}")
        localrule: True
        conda:
            "../../envs/core.yaml"
        params:
            figures=[
                figure.spec for figure in render.efficiency_figures(PLAN, figures_of)
            ],
        script:
            "../scripts/render.py"
