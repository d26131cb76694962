# k candidates per evaluation shape (held-out shapes included) from the final model, judged (GPU).
rule sample:
    input:
        config=stage_config("sample"),
        corpus=out("corpus", "metrics.json"),
        grid=config_file("sample", "grid"),
        model=out("rl_hgemm", "metrics.json"),
        heldout=out("rl_hgemm", "heldout.json"),
        library=out("tune", "metrics.json"),
    output:
        metrics=out("sample", "metrics.json"),
        samples=out("sample", "samples.jsonl"),
    params:
        corpus=out("corpus"),
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
        " --library {params.library} --corpus {params.corpus} --out {params.out} > {log} 2>&1"


# The same prompts from the pretrained model: what bench compares the final model's kernels with, so that
# the report can say what RL changed (best of k per held-out shape, before and after). The context comes
# from rl_hgemm's kernel database and the library, as the final model's does, so that only the model differs.
rule sample_pretrained:
    input:
        config=stage_config("sample"),
        corpus=out("corpus", "metrics.json"),
        grid=config_file("sample", "grid"),
        model=out("pretrain", "metrics.json"),
        heldout=out("rl_hgemm", "heldout.json"),
        kernels=out("rl_hgemm", "kernels.sqlite"),
        library=out("tune", "metrics.json"),
    output:
        metrics=out("sample_pretrained", "metrics.json"),
        samples=out("sample_pretrained", "samples.jsonl"),
    params:
        corpus=out("corpus"),
        model=out("pretrain"),
        library=out("tune"),
        out=out("sample_pretrained"),
    threads: 4
    resources:
        gpu=1,
    log:
        log("sample_pretrained"),
    benchmark:
        bench_file("sample_pretrained")
    shell:
        "python -m stages.sample --config {input.config} --model {params.model} --heldout {input.heldout}"
        " --kernels-db {input.kernels} --library {params.library} --corpus {params.corpus} --out {params.out} > {log} 2>&1"
