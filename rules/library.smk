# The library behind hgemm.matmul: the tuned seed library, with the shapes the model's kernel won in the
# bench stage's run given to it (CPU: it only reads bench's timings).
rule library:
    input:
        config=stage_config("library"),
        bench=out("bench", "results.json"),
        samples=out("sample", "metrics.json"),
        tune=out("tune", "table.json"),
    output:
        metrics=out("library", "metrics.json"),
        table=out("library", "table.json"),
        owned=report(out("library", "owned.md"), category="Library"),
    params:
        bench=out("bench"),
        samples=out("sample"),
        tune=out("tune"),
        out=out("library"),
    threads: 1
    log:
        log("library"),
    benchmark:
        bench_file("library")
    shell:
        "python -m stages.library --config {input.config} --bench {params.bench} --samples {params.samples}"
        " --tune {params.tune} --out {params.out} > {log} 2>&1"
