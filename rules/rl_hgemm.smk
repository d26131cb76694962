# HGEMM-specialised GRPO with the cuBLAS-relative reward, contrastive context from the tuned library,
# and held-out shapes (GPU). Resumable state in work/.
rule rl_hgemm:
    input:
        config=stage_config("rl_hgemm"),
        corpus=out("corpus", "metrics.json"),
        model=out(config["rl_hgemm"]["start_from"], "metrics.json"),   # rl_general, or pretrain (the ablation)
        library=out("tune", "metrics.json"),
        grid=config_file("rl_hgemm", "shapes", "grid"),
        heldout_grid=config_file("rl_hgemm", "shapes", "heldout_grid"),
    output:
        # The stage builds its outputs in a staging folder and swaps the whole folder in at the end. update():
        # Snakemake leaves the previous ones in place while the job runs and restores them if it fails. Not
        # metrics.json, the mark of a finished stage: it goes when the job starts, so that after a failed
        # or killed job the stage is still to run (restored files are newer than the config edit).
        metrics=out("rl_hgemm", "metrics.json"),
        curves=update(out("rl_hgemm", "curves.json")),
        heldout=update(out("rl_hgemm", "heldout.json")),
        kernels=update(out("rl_hgemm", "kernels.sqlite")),
    params:
        corpus=out("corpus"),
        model=out(config["rl_hgemm"]["start_from"]),
        library=out("tune"),
        work=f"{WORK}/rl_hgemm",
        out=out("rl_hgemm"),
    threads: 4
    resources:
        gpu=1,
    log:
        log("rl_hgemm"),
    benchmark:
        bench_file("rl_hgemm")
    shell:
        "python -m stages.rl_hgemm --config {input.config} --model {params.model} --library {params.library}"
        " --work {params.work} --corpus {params.corpus} --out {params.out} > {log} 2>&1"
