"""Real data: every registry entry a study uses becomes resources/matrices/<name>.parquet
(+ .summary.json) via cbmm.data.build_dataset; MATH-500 also gets item and model metadata.

build_dataset is a checkpoint: the real-data fits are packed into jobs by the size of
the built matrix (common.smk, real_batches)."""


checkpoint build_dataset:
    input:
        local_source,
    output:
        matrix=MATRIX,
        summary=MATRIX_SUMMARY,
    log:
        log_file("build_dataset", "{dataset}"),
    benchmark:
        benchmark_file("build_dataset", "{dataset}")
    conda:
        "../../envs/core.yaml"
    threads: 1
    resources:
        mem_mb=8000,
        runtime=120,
    params:
        entry=lambda wc: local_entry(config["datasets"][wc.dataset]),
        release=config["release"],
        cache_dir=config["cache_dir"],
    script:
        "../scripts/build_dataset.py"


if math500() is not None:

    rule math500_items:
        input:
            [] if math500()["items"] == "hub" else str(repo_path(math500()["items"])),
        output:
            MATH500_ITEMS,
        log:
            log_file("math500_items", "math500_items"),
        benchmark:
            benchmark_file("math500_items", "math500_items")
        conda:
            "../../envs/core.yaml"
        params:
            source=lambda wc, input: input[0] if input else "hub",
            cache_dir=config["cache_dir"],
        script:
            "../scripts/math500_items.py"

    rule math500_models:
        input:
            str(repo_path(math500()["models"])),
        output:
            MATH500_MODELS,
        log:
            log_file("math500_models", "math500_models"),
        benchmark:
            benchmark_file("math500_models", "math500_models")
        conda:
            "../../envs/core.yaml"
        params:
            refresh=math500()["refresh_models"],
        script:
            "../scripts/math500_models.py"
