# Harvest, filter, dedup and decontaminate CUDA sources into the pretraining corpus (CPU).
rule corpus:
    input:
        config=stage_config("corpus"),
        tuned=config_files(("corpus", "tuned"), "table.json"),
        held_out=config_files(("corpus", "tuned_exclude_grids")),
    output:
        metrics=out("corpus", "metrics.json"),
        stats=report(out("corpus", "stats.md"), category="Corpus"),
    params:
        out=out("corpus"),
    threads: 2
    log:
        log("corpus"),
    benchmark:
        bench_file("corpus")
    shell:
        "python -m stages.corpus --config {input.config} --out {params.out} --no-progress > {log} 2>&1"
