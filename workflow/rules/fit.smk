"""Fits, packed into jobs (batches) by their declared cost (cbmm_workflow.plan, pack).

A batch job fits its units one after the other in one Python process and writes one
row per fit to its batch table.  Its units are the fits of every configured method
that runs in the job's conda env (e.g. cBMM, L-BFGS-B and Manopt in envs/core.yaml),
so one start-up serves them all.  Each fit is also kept on its own in the store of
finished fits (cbmm_workflow.store: a folder per fit, SIM_FIT_DIR or REAL_FIT_DIR) and
reused by a later job with the same settings, so an interrupted batch resumes where it
stopped and a change of the packing refits nothing.  A method's failure is a row with
status 'failed: ...', never a failed job."""


rule fit_simulation:
    input:
        refit=refit_input(paths.SIM_BATCH),
    output:
        paths.SIM_BATCH,
    log:
        paths.log_file("fit_simulation", "{env}/batch_{batch}"),
    benchmark:
        paths.benchmark_file("fit_simulation", "{env}/batch_{batch}")
    conda:
        batch_env
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: PLAN.batch_resources(sim_batch(wc))["mem_mb"]
        * attempt,
        runtime=lambda wc, attempt: PLAN.batch_resources(sim_batch(wc))["runtime"]
        * attempt,
    params:
        units=sim_batch,
        tol=config["fit"]["tol"],
        max_iter=config["fit"]["max_iter"],
        init_scale=config["fit"]["init_scale"],
        method_modules=PLAN.method_modules,
        # a change of a user's method module reruns the fit jobs (their fits' keys change)
        method_code=METHOD_CODE,
    script:
        "../scripts/fit_simulation.py"


rule fit_real:
    input:
        matrix=paths.MATRIX,
        refit=refit_input(paths.REAL_BATCH),
    output:
        paths.REAL_BATCH,
    log:
        paths.log_file("fit_real", "{dataset}/{env}/batch_{batch}"),
    benchmark:
        paths.benchmark_file("fit_real", "{dataset}/{env}/batch_{batch}")
    conda:
        batch_env
    threads: 1
    resources:
        mem_mb=lambda wc, attempt: PLAN.batch_resources(real_batch(wc))["mem_mb"]
        * attempt,
        runtime=lambda wc, attempt: PLAN.batch_resources(real_batch(wc))["runtime"]
        * attempt,
    params:
        units=real_batch,
        dataset=lambda wc: wc.dataset,
        sigma=config["fit"]["sigma"],
        method_modules=PLAN.method_modules,
        method_code=METHOD_CODE,
    script:
        "../scripts/fit_real.py"
