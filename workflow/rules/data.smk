"""Real data: every registry entry a study uses becomes resources/matrices/<name>.parquet
(+ .summary.json) via cbmm.data.build_dataset; MATH-500 also gets item and model metadata."""


rule build_dataset:
    input:
        local_source,
    output:
        matrix=MATRIX,
        summary=MATRIX_SUMMARY,
    params:
        entry=lambda wc: local_entry(config["datasets"][wc.dataset]),
        release=config["release"],
        cache_dir=config["cache_dir"],
    log:
        "logs/build_dataset/{dataset}.log",
    threads: 1
    resources:
        mem_mb=8000,
        runtime=120,
    conda:
        "../../envs/core.yaml"
    script:
        "../scripts/build_dataset.py"


if math500() is not None:

    rule math500_items:
        input:
            [] if math500()["items"] == "hub" else str(repo_path(math500()["items"])),
        output:
            MATH500_ITEMS,
        params:
            source=lambda wc, input: input[0] if input else "hub",
            cache_dir=config["cache_dir"],
        log:
            "logs/math500_items/math500_items.log",
        conda:
            "../../envs/core.yaml"
        script:
            "../scripts/math500_items.py"

    rule math500_models:
        input:
            str(repo_path(math500()["models"])),
        output:
            MATH500_MODELS,
        params:
            refresh=math500()["refresh_models"],
        log:
            "logs/math500_models/math500_models.log",
        conda:
            "../../envs/core.yaml"
        script:
            "../scripts/math500_models.py"
