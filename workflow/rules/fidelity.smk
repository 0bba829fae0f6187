"""Fidelity: the paper's published numbers beside this run's (cbmm.fidelity), after the
aggregated tables; results/fidelity/fidelity.csv, shown in the report."""


localrules:
    fidelity,


rule fidelity:
    input:
        all_tables(),
    output:
        report_table(FIDELITY, "fidelity", "Fidelity"),
    log:
        log_file("fidelity", "fidelity"),
    benchmark:
        benchmark_file("fidelity", "fidelity")
    conda:
        "../../envs/core.yaml"
    params:
        method_modules=method_modules(),
    script:
        "../scripts/fidelity.py"
