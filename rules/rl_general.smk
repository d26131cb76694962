# GRPO on the general CUDA kernel tasks, from the pretrained model (GPU). Resumable state in work/.
rule rl_general:
    input:
        config=stage_config("rl_general"),
        model=out("pretrain", "metrics.json"),
    output:
        metrics=out("rl_general", "metrics.json"),
        curves=out("rl_general", "curves.json"),
        kernels=out("rl_general", "kernels.sqlite"),
    params:
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
        " --out {params.out} > {log} 2>&1"
