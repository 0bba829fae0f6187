"""Real data: every registry entry a study uses becomes resources/matrices/<name>.parquet
(+ .summary.json) via cbmm.data.build_dataset; MATH-500 also gets item and model metadata.

build_dataset is a checkpoint: the real-data fits are packed into jobs by the size of
the built matrix (cbmm_workflow.plan, Plan.real_batches)."""


checkpoint build_dataset:
    input:
        lambda wc: PLAN.local_files(wc.dataset),
    output:
        matrix=paths.MATRIX,
        summary=paths.MATRIX_SUMMARY,
    log:
        paths.log_file("build_dataset", "{dataset}"),
    benchmark:
        paths.benchmark_file("build_dataset", "{dataset}")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        entry=lambda wc: PLAN.dataset_entry(wc.dataset),
        release=config["release"],
        cache_dir=config["cache_dir"],
    script:
        "../scripts/build_dataset.py"


if PLAN.math500 is not None:

    rule math500_items:
        input:
            (
                []
                if PLAN.math500["items"] == "hub"
                else str(paths.repo_path(PLAN.math500["items"]))
            ),
        output:
            paths.MATH500_ITEMS,
        log:
            paths.log_file("math500_items", "math500_items"),
        benchmark:
            paths.benchmark_file("math500_items", "math500_items")
        conda:
            "../../envs/core.yaml"
        params:
            source=lambda wc, input: input[0] if input else "hub",
            cache_dir=config["cache_dir"],
        script:
            "../scripts/math500_items.py"

    rule math500_models:
        input:
            str(paths.repo_path(PLAN.math500["models"])),
        output:
            paths.MATH500_MODELS,
        log:
            paths.log_file("math500_models", "math500_models"),
        benchmark:
            paths.benchmark_file("math500_models", "math500_models")
        conda:
            "../../envs/core.yaml"
        params:
            refresh=PLAN.math500["refresh_models"],
        script:
            "../scripts/math500_models.py"
