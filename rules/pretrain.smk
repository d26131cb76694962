# Continued pretraining on the corpus (GPU). Checkpoints live in work/pretrain, which is not an output:
# a failed or killed job leaves them, and the rerun resumes from the last one (docs/dag.md: reruns).
rule pretrain:
    input:
        config=stage_config("pretrain"),
        corpus=out("corpus", "metrics.json"),
        tokenizer=out("tokenizer", "metrics.json"),
    output:
        # The stage builds its outputs in a staging folder and swaps the whole folder in at the end. update():
        # Snakemake leaves the previous ones in place while the job runs and restores them if it fails. Not
        # metrics.json, the mark of a finished stage: it goes when the job starts, so that after a failed
        # or killed job the stage is still to run (restored files are newer than the config edit).
        metrics=out("pretrain", "metrics.json"),
        loss=update(out("pretrain", "loss_curve.json")),
    params:
        corpus=out("corpus"),
        tokenizer=out("tokenizer"),
        work=f"{WORK}/pretrain",
        out=out("pretrain"),
    threads: 4
    resources:
        gpu=1,
    log:
        log("pretrain"),
    benchmark:
        bench_file("pretrain")
    shell:
        "python -m stages.pretrain --config {input.config} --corpus {params.corpus}"
        " --tokenizer {params.tokenizer} --work {params.work} --out {params.out} > {log} 2>&1"
