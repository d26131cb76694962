# Byte-level BPE on the corpus plus the candidate-format tokens (CPU).
rule tokenizer:
    input:
        config=stage_config("tokenizer"),
        corpus=out("corpus", "metrics.json"),
    output:
        metrics=out("tokenizer", "metrics.json"),
    params:
        corpus=out("corpus"),
        out=out("tokenizer"),
    threads: 2
    log:
        log("tokenizer"),
    benchmark:
        bench_file("tokenizer")
    shell:
        "python -m stages.tokenizer --config {input.config} --corpus {params.corpus} --out {params.out}"
        " --no-progress > {log} 2>&1"
