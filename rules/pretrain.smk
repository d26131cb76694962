# Continued pretraining on the corpus (GPU). Checkpoints live in work/pretrain, which is not an output:
# a failed or killed job leaves them, and the rerun resumes from the last one (docs/dag.md: reruns).


def pretrain_launcher():
    """The command that runs `-m stages.pretrain`, from pretrain.launch.processes: python for one process,
    torchrun for several; for `gpus`, torchrun over every GPU the job's machine shows, decided when the
    job runs (a cluster node may have other GPUs than the machine that plans the DAG)."""
    n = config["pretrain"]["launch"]["processes"]
    if n == "gpus":
        return ("$(if nvidia-smi -L >/dev/null 2>&1; then echo 'torchrun --standalone --nproc-per-node=gpu'; "
                "else echo python; fi)")
    return "python" if n == 1 else f"torchrun --standalone --nproc-per-node={n}"


rule pretrain:
    input:
        config=stage_config("pretrain"),
        corpus=out("corpus", "metrics.json"),
        tokenizer=out("tokenizer", "metrics.json"),
        deepspeed=config_file("pretrain", "launch", "deepspeed"),
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
        launcher=pretrain_launcher(),
    threads: 4
    resources:
        gpu=1,
    log:
        log("pretrain"),
    benchmark:
        bench_file("pretrain")
    shell:
        "{params.launcher} -m stages.pretrain --config {input.config} --corpus {params.corpus}"
        " --tokenizer {params.tokenizer} --work {params.work} --out {params.out} > {log} 2>&1"
