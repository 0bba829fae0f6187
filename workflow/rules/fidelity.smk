"""Fidelity: the paper's published numbers beside this run's (cbmm.fidelity), after the
aggregated tables; results/fidelity/fidelity.csv, shown in the report."""


localrules:
    fidelity,


rule fidelity:
    input:
        PLAN.all_tables(),
    output:
        report_table(paths.FIDELITY, "fidelity", "Fidelity"),
    log:
        paths.log_file("fidelity", "fidelity"),
    benchmark:
        paths.benchmark_file("fidelity", "fidelity")
    conda:
        "../../envs/core.yaml"
    params:
        method_modules=PLAN.method_modules,
    script:
        "../scripts/fidelity.py"
