# HGEMM-specialised GRPO with the cuBLAS-relative reward, contrastive context from the tuned library,
# and held-out shapes (GPU). Resumable state in work/.
rule rl_hgemm:
    input:
        config=stage_config("rl_hgemm"),
        model=out("rl_general", "metrics.json"),
        library=out("tune", "metrics.json"),
    output:
        metrics=out("rl_hgemm", "metrics.json"),
        curves=out("rl_hgemm", "curves.json"),
        heldout=out("rl_hgemm", "heldout.json"),
        kernels=out("rl_hgemm", "kernels.sqlite"),
    params:
        model=out("rl_general"),
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
        " --work {params.work} --out {params.out} > {log} 2>&1"
