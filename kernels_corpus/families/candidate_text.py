"""The text of a header family's render: a comment, the include, the launch spec and one entry whose
body calls the family's template (`Template<...>::run`) with the candidate ABI's arguments."""

from __future__ import annotations


def header_candidate(comment: str, header: str, spec: str, entry: str, threads: int, min_blocks: int,
                     template: str) -> str:
    return "\n".join([
        comment,
        f"#include <hgemm/{header}>",
        "",
        spec,
        "",
        f'extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})',
        f"{entry}(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,",
        "    int M, int N, int K, int batch, void* workspace) {",
        f"  {template}::run(A, B, C, M, N, K, batch, workspace);",
        "}",
        "",
    ])
