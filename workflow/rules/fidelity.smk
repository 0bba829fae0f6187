"""Fidelity: the paper's published numbers beside this run's (cbmm.fidelity), after the
aggregated tables; results/fidelity/fidelity.csv, shown in the report."""


localrules:
    fidelity,


FIDELITY = "results/fidelity/fidelity.csv"


rule fidelity:
    input:
        all_tables(),
    output:
        report_table(FIDELITY, "fidelity", "Fidelity"),
    log:
        "logs/fidelity/fidelity.log",
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/fidelity.py"
