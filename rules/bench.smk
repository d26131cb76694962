# Time the model's best kernel, the pretrained model's and the library's per shape against every baseline (GPU).
rule bench:
    input:
        config=stage_config("bench"),
        grid=config_file("bench", "grid"),
        samples=out("sample", "metrics.json"),
        before=out("sample_pretrained", "metrics.json"),
        library=out("tune", "metrics.json"),
    output:
        metrics=out("bench", "metrics.json"),
        results=out("bench", "results.json"),
        summary=report(out("bench", "summary.md"), category="Benchmark"),
    params:
        samples=out("sample"),
        before=out("sample_pretrained"),
        library=out("tune"),
        out=out("bench"),
    threads: 4
    resources:
        gpu=1,
    log:
        log("bench"),
    benchmark:
        bench_file("bench")
    shell:
        "python -m stages.bench --config {input.config} --samples {params.samples} --before {params.before}"
        " --library {params.library}"
        " --out {params.out} > {log} 2>&1"
