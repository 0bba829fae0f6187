"""Fits, packed into jobs (batches) by their declared cost (common.smk, pack).

A batch job fits its units one after the other in one Python process and writes one
row per fit to its batch table.  Its units are the fits of every configured method
that runs in the job's conda env (e.g. cBMM, L-BFGS-B and Manopt in envs/core.yaml),
so one start-up serves them all.  Each fit is also kept on its own (SIM_FIT_DIR,
REAL_FIT_DIR: fit.json, abilities.csv, items.csv and unit.json) and reused by a later
job with the same settings, so an interrupted batch resumes where it stopped and a
change of the packing refits nothing.  A method's failure is a row with status
'failed: ...', never a failed job."""


rule fit_simulation:
    output:
        SIM_BATCH,
    log:
        log_file("fit_simulation", "{env}/batch_{batch}"),
    benchmark:
        benchmark_file("fit_simulation", "{env}/batch_{batch}")
    conda:
        batch_env
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: batch_resources(sim_batch(wc))[0] * attempt,
        runtime=lambda wc, attempt: batch_resources(sim_batch(wc))[1] * attempt,
    params:
        units=sim_batch,
        tol=config["fit"]["tol"],
        max_iter=config["fit"]["max_iter"],
        init_scale=config["fit"]["init_scale"],
        progress_every=config["fit"]["progress_every"],
        method_modules=method_modules(),
        absent_frameworks=absent_frameworks,
    script:
        "../scripts/fit_simulation.py"


rule fit_real:
    input:
        matrix=MATRIX,
    output:
        REAL_BATCH,
    log:
        log_file("fit_real", "{dataset}/{env}/batch_{batch}"),
    benchmark:
        benchmark_file("fit_real", "{dataset}/{env}/batch_{batch}")
    conda:
        batch_env
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: batch_resources(real_batch(wc))[0] * attempt,
        runtime=lambda wc, attempt: batch_resources(real_batch(wc))[1] * attempt,
    params:
        units=real_batch,
        dataset=lambda wc: wc.dataset,
        sigma=config["fit"]["sigma"],
        progress_every=config["fit"]["progress_every"],
        method_modules=method_modules(),
        absent_frameworks=absent_frameworks,
    script:
        "../scripts/fit_real.py"
