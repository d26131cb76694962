"""The text of a header family's render: a comment, the include, the launch spec and one entry whose
body calls the family's template (`Template<...>::run`) with the candidate ABI's arguments."""

from __future__ import annotations


def launch_spec(entry: str, block: int, grid: str, smem: int | str = 0, workspace: int | str = 0,
                layouts: str = "NN, TN", kept_zero: bool = False) -> str:
    """The `/*@launch ... @*/` block (docs/candidate-format.md) of one entry. kept_zero: the kernel leaves
    its workspace zero (`workspace_zero: kept`), so no launch zero-fills it."""
    return "\n".join(["/*@launch", f"entry: {entry}", f"block: {block}", f"grid: {grid}", f"smem: {smem}",
                      f"workspace: {workspace}"] + (["workspace_zero: kept"] if kept_zero else [])
                     + [f"layouts: {layouts}", "@*/"])


def header_candidate(comment: str, header: str, spec: str, entry: str, threads: int, min_blocks: int,
                     template: str, cluster: int = 1) -> str:
    """cluster > 1: the entry runs in clusters of that many CTAs along x (`__cluster_dims__`)."""
    cluster_dims = f"__cluster_dims__({cluster}, 1, 1) " if cluster > 1 else ""
    return "\n".join([
        comment,
        f"#include <hgemm/{header}>",
        "",
        spec,
        "",
        f'extern "C" __global__ {cluster_dims}void __launch_bounds__({threads}, {min_blocks})',
        f"{entry}(const __half* __restrict__ A, const __half* __restrict__ B, __half* __restrict__ C,",
        "    int M, int N, int K, int batch, void* workspace) {",
        f"  {template}::run(A, B, C, M, N, K, batch, workspace);",
        "}",
        "",
    ])
