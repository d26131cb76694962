# Tune the seed kernel families over the grid into the kernel library: dispatch table, kernels/,
# bench.json (GPU). Needs nothing upstream, so it runs beside the corpus and pretraining.
rule tune:
    input:
        config=stage_config("tune"),
        grid=config_file("tune", "grid"),
        reused=config_files(("tune", "reuse"), "table.json"),   # libraries tuned earlier, copied (tune.reuse)
    output:
        metrics=out("tune", "metrics.json"),
        table=out("tune", "table.json"),
        bench=out("tune", "bench.json"),
    params:
        out=out("tune"),
    threads: 4
    resources:
        gpu=1,
    log:
        log("tune"),
    benchmark:
        bench_file("tune")
    shell:
        "python -m stages.tune --config {input.config} --out {params.out} > {log} 2>&1"
