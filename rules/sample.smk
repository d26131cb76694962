# k candidates per evaluation shape (held-out shapes included) from the final model, judged (GPU).
rule sample:
    input:
        config=stage_config("sample"),
        grid=config_file("sample", "grid"),
        model=out("rl_hgemm", "metrics.json"),
        heldout=out("rl_hgemm", "heldout.json"),
        library=out("tune", "metrics.json"),
    output:
        metrics=out("sample", "metrics.json"),
        samples=out("sample", "samples.jsonl"),
    params:
        model=out("rl_hgemm"),
        library=out("tune"),
        out=out("sample"),
    threads: 4
    resources:
        gpu=1,
    log:
        log("sample"),
    benchmark:
        bench_file("sample")
    shell:
        "python -m stages.sample --config {input.config} --model {params.model} --heldout {input.heldout}"
        " --library {params.library} --out {params.out} > {log} 2>&1"
