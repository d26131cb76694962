# GRPO on the general CUDA kernel tasks, from the pretrained model (GPU). Resumable state in work/.
rule rl_general:
    input:
        config=stage_config("rl_general"),
        corpus=out("corpus", "metrics.json"),
        model=out("pretrain", "metrics.json"),
    output:
        # The stage builds its outputs in a staging folder and swaps the whole folder in at the end. update():
        # Snakemake leaves the previous ones in place while the job runs and restores them if it fails. Not
        # metrics.json, the mark of a finished stage: it goes when the job starts, so that after a failed
        # or killed job the stage is still to run (restored files are newer than the config edit).
        metrics=out("rl_general", "metrics.json"),
        curves=update(out("rl_general", "curves.json")),
        kernels=update(out("rl_general", "kernels.sqlite")),
    params:
        corpus=out("corpus"),
        model=out("pretrain"),
        work=f"{WORK}/rl_general",
        out=out("rl_general"),
    threads: 4
    resources:
        gpu=1,
    log:
        log("rl_general"),
    benchmark:
        bench_file("rl_general")
    shell:
        "python -m stages.rl_general --config {input.config} --model {params.model} --work {params.work}"
        " --corpus {params.corpus} --out {params.out} > {log} 2>&1"
