"""Fits: one job per (study, level, method, replicate) and per (dataset, method,
start variance, seed).  Each writes fit.json (status, runtime, iterations,
loss), abilities.csv and items.csv; a failed fit is a result, not a failed job."""


rule fit_simulation:
    input:
        simulation=SIMULATION,
    output:
        **fit_outputs(SIM_FIT_DIR),
    params:
        method=lambda wc: wc.method,
        seed=lambda wc: sim_seed(wc.study, wc.level, wc.replicate),
        init_scale=config["fit"]["init_scale"],
        sigma=None,  # the simulation's own temperature
        tol=config["fit"]["tol"],
        max_iter=config["fit"]["max_iter"],
        timeout_s=config["fit"]["timeout_s"],
        options=method_options,
    log:
        "logs/fit_simulation/{study}/level_{level}/{method}/rep_{replicate}.log",
    benchmark:
        "results/benchmarks/fit_simulation/{study}/level_{level}/{method}/rep_{replicate}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: fit_mem_mb(sim_cells(wc)) * attempt,
        runtime=lambda wc, attempt: fit_runtime_min(wc.method, sim_cells(wc)) * attempt,
    conda:
        method_env
    script:
        "../scripts/fit.py"


rule fit_real:
    input:
        matrix=MATRIX,
        summary=MATRIX_SUMMARY,
    output:
        **fit_outputs(REAL_FIT_DIR),
    params:
        method=lambda wc: wc.method,
        seed=lambda wc: int(wc.seed),
        init_scale=lambda wc: float(wc.init_scale),
        sigma=config["fit"]["sigma"],
        tol=config["fit"]["tol"],
        max_iter=config["fit"]["max_iter"],
        timeout_s=config["fit"]["timeout_s"],
        options=method_options,
    log:
        "logs/fit_real/{dataset}/{method}/s2_{init_scale}/seed_{seed}.log",
    benchmark:
        "results/benchmarks/fit_real/{dataset}/{method}/s2_{init_scale}/seed_{seed}.tsv"
    threads: 1
    resources:
        mem_mb=lambda wc, input, attempt: fit_mem_mb(real_cells(input.summary)) * attempt,
        runtime=lambda wc, input, attempt: (
            fit_runtime_min(wc.method, real_cells(input.summary)) * attempt),
    conda:
        method_env
    script:
        "../scripts/fit.py"
