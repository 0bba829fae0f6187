"""Beyond the paper (docs/trust.md): how sure the abilities are, and whether the model
predicts answers it did not see.  Per dataset, the library's default cBMM fit with
standard errors and a bootstrap over items (an abilities table with intervals and rank
intervals, and a figure), and per dataset and method a cross-validation of the held-out
cells beside the item-mean baseline.  These fits are the library's, not the paper's
(its random start and stopping rule); each table carries the fit's status."""


localrules:
    heldout_table,


rule uncertainty:
    input:
        matrix=paths.MATRIX,
    output:
        report_table(
            paths.ABILITIES_TABLE, "table_abilities", "Uncertainty", "{dataset}"
        ),
    log:
        paths.log_file("uncertainty", "{dataset}"),
    benchmark:
        paths.benchmark_file("uncertainty", "{dataset}")
    conda:
        "../../envs/core.yaml"
    threads: 2
    resources:
        mem_mb=lambda wc, attempt: 8000 * attempt,
    params:
        sigma=config["fit"]["sigma"],
        n_boot=config["real"]["uncertainty"]["n_boot"],
        level=config["real"]["uncertainty"]["level"],
    script:
        "../scripts/uncertainty.py"


rule validate_method:
    input:
        matrix=paths.MATRIX,
    output:
        paths.HELDOUT_PART,
    log:
        paths.log_file("validate_method", "{dataset}/{method}"),
    benchmark:
        paths.benchmark_file("validate_method", "{dataset}/{method}")
    wildcard_constraints:
        method=r"[a-z][a-z0-9_]*",
    conda:
        method_env
    resources:
        mem_mb=lambda wc, attempt: 8000 * attempt,
    params:
        sigma=config["fit"]["sigma"],
        settings=lambda wc: PLAN.validation_settings(wc.method),
        folds=config["real"]["validation"]["folds"],
        seed=config["real"]["validation"]["seed"],
        method_modules=PLAN.method_modules,
    script:
        "../scripts/validate_method.py"


rule heldout_table:
    input:
        lambda wc: PLAN.heldout_parts(wc.dataset),
    output:
        report_table(paths.HELDOUT_TABLE, "table_heldout", "Uncertainty", "{dataset}"),
    log:
        paths.log_file("heldout_table", "{dataset}"),
    conda:
        "../../envs/core.yaml"
    params:
        sort=["method", "fold"],
        method_order=PLAN.methods_in_order(),
    script:
        "../scripts/aggregate_rows.py"


# Each dataset's abilities figure in a job of its own, as its rank flow: one dataset that
# failed cannot withhold the others' figures.
for abilities in render.uncertainty_figures(PLAN):

    rule:
        name:
            f"render_{abilities.name}"
        input:
            paths.ABILITIES_TABLE.format(dataset=abilities.subcategory),
        output:
            figure_outputs([abilities]),
        log:
            paths.log_file("render", abilities.name),
        benchmark:
            paths.benchmark_file("render", abilities.name)
        localrule: True
        conda:
            "../../envs/core.yaml"
        params:
            figures=[abilities.spec],
        script:
            "../scripts/render.py"
