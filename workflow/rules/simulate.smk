"""Simulated data: one job per (study, level, replicate); every method fits that same file."""


rule simulate:
    output:
        SIMULATION,
    params:
        design=lambda wc: sim_design(wc.study, wc.level),
        seed=lambda wc: sim_seed(wc.study, wc.level, wc.replicate),
    log:
        "logs/simulate/{study}/level_{level}/rep_{replicate}.log",
    threads: 1
    resources:
        mem_mb=lambda wc: fit_mem_mb(sim_cells(wc)),
        runtime=10,
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/simulate.py"
