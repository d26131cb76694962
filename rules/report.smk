# HTML and Markdown report over every stage's results (CPU). Also in `snakemake --report report.zip`.
rule report:
    input:
        config=stage_config("report"),
        corpus=out("corpus", "metrics.json"),
        pretrain=out("pretrain", "metrics.json"),
        rl_general=out("rl_general", "metrics.json"),
        rl_hgemm=out("rl_hgemm", "metrics.json"),
        tune=out("tune", "metrics.json"),
        bench=out("bench", "results.json"),
        tokenizer=out("tokenizer", "metrics.json"),
        sample=out("sample", "metrics.json"),
        library=out("library", "metrics.json"),
    output:
        html=report(out("report", "report.html"), category="Report"),
        markdown=report(out("report", "report.md"), category="Report"),
    params:
        corpus=out("corpus"),
        pretrain=out("pretrain"),
        rl_general=out("rl_general"),
        rl_hgemm=out("rl_hgemm"),
        tune=out("tune"),
        bench=out("bench"),
        tokenizer=out("tokenizer"),
        sample=out("sample"),
        library=out("library"),
        stage_times=f"{RESULTS}/benchmarks",
        out=out("report"),
    threads: 1
    log:
        log("report"),
    benchmark:
        bench_file("report")
    shell:
        "python -m stages.report --config {input.config} --corpus {params.corpus} --pretrain {params.pretrain}"
        " --rl-general {params.rl_general} --rl-hgemm {params.rl_hgemm} --tune {params.tune}"
        " --bench {params.bench} --tokenizer {params.tokenizer} --sample {params.sample} --library {params.library}"
        " --stage-times {params.stage_times} --out {params.out} > {log} 2>&1"
