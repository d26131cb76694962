# Continued pretraining on the corpus (GPU). Checkpoints live in work/pretrain, which is not an output:
# a failed or killed job leaves them, and the rerun resumes from the last one.
rule pretrain:
    input:
        config=stage_config("pretrain"),
        corpus=out("corpus", "metrics.json"),
        tokenizer=out("tokenizer", "metrics.json"),
    output:
        metrics=out("pretrain", "metrics.json"),
        loss=out("pretrain", "loss_curve.json"),
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
