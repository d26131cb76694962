"""The candidate format: one text holding CUDA C++ and its declarative launch spec.

The same text is what the corpus contains, what the model writes, what the harness evaluates and what
the kernel library stores. Host code is never run: the harness launches the entry kernel itself from
the spec. See docs/candidate-format.md for the full contract and two complete examples.

The spec is a block comment that opens with `/*@launch` and closes with `@*/`, one `field: value`
per line:

    /*@launch
    entry: hgemm_tiled          # an extern "C" __global__ function in the text
    block: 256                  # 1 to 3 ints, threads per block (product <= 1024)
    grid: cdiv(N, 128), cdiv(M, 128), batch
    smem: 3 * (128 * 32 + 32 * 128) * 2     # dynamic shared memory bytes (default 0)
    workspace: 0                # bytes of zero-filled scratch passed to the kernel (default 0)
    workspace_zero: kept        # the kernel leaves the zero-filled part zero (default: launch)
    layouts: NN, TN             # which B layouts the kernel implements (default NN)
    tensor_map: A, box=(128, 64), swizzle=128   # optional, repeatable: a TMA descriptor parameter
    tensor_map: B, box=(64, 64), swizzle=128, staged=1   # ... of a padded copy the kernel writes
    @*/

Expressions may use the problem's variables (M, N, K, batch for a GEMM), `num_sms` (the device's
multiprocessor count, for persistent kernels), integer literals, + - * // %, and the functions
cdiv(a, b), round_up(a, b), min(...), max(...). An expression of literals alone is checked when the
spec is parsed (a grid dimension outside CUDA's range, a negative smem or workspace); one that uses
variables is checked for each problem by LaunchSpec.launch_dims.

`workspace_zero` says who zero-fills the workspace (staged operand copies at its start aside,
hgemm.params.workspace_to_zero). `launch`, the default: the harness and hgemm.matmul fill it before
every launch, and the fill is timed with the kernel. `kept`: the kernel promises to leave that part zero
when it exits (a split-K reduction's last CTA clears the partial sums and counter it read, a grid
barrier resets its counter), so it is filled once, when allocated, and every launch saves the fill. The
harness holds the kernel to it: a verification launch or a timed batch that leaves any of it non-zero
makes the kernel `wrong`.

A candidate may include the project's device headers, `#include <hgemm/NAME.cuh>` (hgemm/include/,
the one user include path the compiler gets), and CUDA's own headers named in CUDA_HEADERS or under
cuda/ and cooperative_groups/. Any other include (a quoted name, an absolute path, a `..` component, a
header outside that list) is a SpecError naming its line: a candidate must not read files of the
machine it is compiled on.

The HGEMM kernel ABI, in this order:
    (const __half* A, const __half* B, __half* C, int M, int N, int K, int batch, void* workspace,
     const __grid_constant__ CUtensorMap <one per tensor_map line, in order>)
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

SPEC_OPEN = "/*@launch"
SPEC_CLOSE = "@*/"
GEMM_VARIABLES = ("M", "N", "K", "batch")
KNOWN_FIELDS = ("entry", "block", "grid", "smem", "workspace", "workspace_zero", "layouts", "tensor_map")
WORKSPACE_ZERO = ("launch", "kept")  # who zero-fills the workspace: the launcher before each launch, or the kernel keeps it
SWIZZLES = (0, 32, 64, 128)
OPERANDS = ("A", "B", "C")
GRID_LIMITS = (2**31 - 1, 65535, 65535)  # CUDA's maximum grid dimensions x, y, z
# Headers of the CUDA toolkit and the C/C++ standard library a candidate may include by name; any
# name under these folders of the toolkit is allowed too, and hgemm/ names the project's own headers.
CUDA_HEADERS = frozenset({
    "cuda.h", "cuda_runtime.h", "cuda_runtime_api.h", "cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h",
    "mma.h", "math_constants.h", "cuda_pipeline.h", "cuda_pipeline_primitives.h", "cuda_awbarrier.h",
    "cooperative_groups.h", "vector_types.h", "vector_functions.h", "device_launch_parameters.h",
    "stdint.h", "stddef.h", "limits.h", "float.h", "math.h", "stdio.h",
    "cstdint", "cstddef", "climits", "cfloat", "cmath", "cstdio", "type_traits", "utility", "limits",
})
CUDA_HEADER_DIRS = ("cuda/", "cooperative_groups/")
PROJECT_HEADER_DIR = "hgemm/"
# The project's device headers (package data): where `#include <hgemm/...>` resolves, the one user
# include path hgemm.compile gives nvcc.
INCLUDE_DIR = Path(__file__).resolve().parent / "include"


class SpecError(ValueError):
    """A malformed candidate; the message names the offending field."""

    def __init__(self, field_name: str, message: str):
        self.field = field_name
        super().__init__(f"launch spec field '{field_name}': {message}")


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def _round_up(a: int, b: int) -> int:
    return _cdiv(a, b) * b


_FUNCTIONS = {"cdiv": _cdiv, "round_up": _round_up, "min": min, "max": max}
_BINOPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
}


def _check_expr(node: ast.AST, variables: tuple[str, ...], field_name: str) -> None:
    """Allow only integer arithmetic over known names; anything else is a spec error."""
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, int) or isinstance(node.value, bool):
            raise SpecError(field_name, f"only integer literals are allowed, got {node.value!r}")
    elif isinstance(node, ast.Name):
        if not variables:
            raise SpecError(field_name, f"takes integer literals only, got the name '{node.id}'")
        if node.id not in variables:
            raise SpecError(field_name, f"unknown name '{node.id}' (allowed: {', '.join(variables)})")
    elif isinstance(node, ast.BinOp):
        if type(node.op) not in _BINOPS:
            raise SpecError(field_name, f"operator {type(node.op).__name__} is not allowed (use + - * // %)")
        _check_expr(node.left, variables, field_name)
        _check_expr(node.right, variables, field_name)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        _check_expr(node.operand, variables, field_name)
    elif isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
            raise SpecError(field_name, f"only calls to {', '.join(_FUNCTIONS)} are allowed")
        for arg in node.args:
            _check_expr(arg, variables, field_name)
    else:
        raise SpecError(field_name, f"unsupported expression element {type(node).__name__}")


def _eval(node: ast.AST, env: dict[str, int]) -> int:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.BinOp):
        return _BINOPS[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    if isinstance(node, ast.UnaryOp):
        return -_eval(node.operand, env)
    return _FUNCTIONS[node.func.id](*(_eval(a, env) for a in node.args))


def _names(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Name) for n in ast.walk(node))


@dataclass(frozen=True)
class Expr:
    """An integer expression of the problem's variables, validated once at parse time."""

    text: str
    tree: ast.AST = field(compare=False, repr=False)
    field_name: str = field(compare=False, repr=False)

    def __call__(self, env: dict[str, int]) -> int:
        try:
            return int(_eval(self.tree, env))
        except ZeroDivisionError:
            where = f" for {env}" if env else ""
            raise SpecError(self.field_name, f"'{self.text}' divides by zero{where}") from None

    def constant(self) -> int | None:
        """The value of an expression of literals alone (None where it uses a variable), so a bad
        constant fails at parse time rather than at its first launch."""
        return None if _names(self.tree) else self({})


def _parse_exprs(text: str, field_name: str, variables: tuple[str, ...]) -> list[Expr]:
    try:
        tree = ast.parse(f"({text},)", mode="eval").body
    except SyntaxError as e:
        raise SpecError(field_name, f"cannot parse '{text}': {e.msg}") from None
    if not isinstance(tree, ast.Tuple):
        raise SpecError(field_name, f"cannot parse '{text}'")
    exprs = []
    for elt in tree.elts:
        _check_expr(elt, variables, field_name)
        exprs.append(Expr(ast.unparse(elt), elt, field_name))
    return exprs


@dataclass(frozen=True)
class TensorMapSpec:
    """A TMA descriptor the harness encodes for one operand, viewed as (batch, rows, cols) row-major.

    box is (rows, cols) of the tile one copy moves; swizzle is the shared-memory swizzle in bytes.
    staged: the descriptor is not of the operand itself but of a copy the kernel writes into its
    workspace with rows padded to 128 bytes (hgemm.params.staged_operands gives where), so TMA serves
    any pitch; the kernel must finish the copy before its first TMA load of it."""

    operand: str
    box: tuple[int, int]
    swizzle: int = 0
    staged: bool = False

    def render(self) -> str:
        return (f"tensor_map: {self.operand}, box=({self.box[0]}, {self.box[1]}), swizzle={self.swizzle}"
                + (", staged=1" if self.staged else ""))


@dataclass(frozen=True)
class LaunchSpec:
    entry: str
    block: tuple[int, int, int]
    grid: tuple[Expr, Expr, Expr]
    smem: Expr
    workspace: Expr
    layouts: tuple[str, ...] = ("NN",)
    tensor_maps: tuple[TensorMapSpec, ...] = ()
    workspace_zero: str = "launch"

    @property
    def zero_each_launch(self) -> bool:
        """Whether the launcher zero-fills the workspace before every launch (`workspace_zero: launch`)."""
        return self.workspace_zero == "launch"

    def launch_dims(self, env: dict[str, int]) -> tuple[tuple[int, int, int], tuple[int, int, int], int, int]:
        """(grid, block, dynamic smem bytes, workspace bytes) for concrete variables; a bad value is a SpecError."""
        grid = tuple(g(env) for g in self.grid)
        for axis, (g, lim) in enumerate(zip(grid, GRID_LIMITS)):
            if not 1 <= g <= lim:
                raise SpecError("grid", f"dimension {axis} = {g} for {env} is outside 1..{lim}")
        smem, workspace = self.smem(env), self.workspace(env)
        if smem < 0:
            raise SpecError("smem", f"{smem} bytes for {env} is negative")
        if workspace < 0:
            raise SpecError("workspace", f"{workspace} bytes for {env} is negative")
        return grid, self.block, smem, workspace

    def render(self) -> str:
        lines = [
            SPEC_OPEN,
            f"entry: {self.entry}",
            "block: " + ", ".join(str(b) for b in self.block),
            "grid: " + ", ".join(g.text for g in self.grid),
            f"smem: {self.smem.text}",
            f"workspace: {self.workspace.text}",
        ]
        lines += [] if self.zero_each_launch else [f"workspace_zero: {self.workspace_zero}"]
        lines += ["layouts: " + ", ".join(self.layouts)]
        lines += [t.render() for t in self.tensor_maps]
        lines.append(SPEC_CLOSE)
        return "\n".join(lines)


@dataclass(frozen=True)
class Candidate:
    source: str
    spec: LaunchSpec

    @property
    def sha(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]

    def supports(self, layout: str) -> bool:
        return layout in self.spec.layouts


def _parse_tensor_map(value: str, variables: tuple[str, ...]) -> TensorMapSpec:
    name = "tensor_map"
    try:
        call = ast.parse(f"f({value})", mode="eval").body
    except SyntaxError as e:
        raise SpecError(name, f"cannot parse '{value}': {e.msg}") from None
    if len(call.args) != 1 or not isinstance(call.args[0], ast.Name) or call.args[0].id not in OPERANDS:
        raise SpecError(name, f"must start with an operand name {OPERANDS}, got '{value}'")
    kwargs = {kw.arg: kw.value for kw in call.keywords}
    unknown = set(kwargs) - {"box", "swizzle", "staged"}
    if unknown:
        raise SpecError(name, f"unknown key(s) {sorted(unknown)} (allowed: box, swizzle, staged)")
    if "box" not in kwargs:
        raise SpecError(name, "needs box=(rows, cols)")
    try:
        box = ast.literal_eval(kwargs["box"])
        swizzle = ast.literal_eval(kwargs["swizzle"]) if "swizzle" in kwargs else 0
        staged = ast.literal_eval(kwargs["staged"]) if "staged" in kwargs else 0
    except ValueError:
        raise SpecError(name, "box, swizzle and staged must be integer literals") from None
    if staged not in (0, 1):
        raise SpecError(name, f"staged must be 0 or 1, got {staged!r}")
    if not (isinstance(box, tuple) and len(box) == 2 and all(isinstance(b, int) and 1 <= b <= 256 for b in box)):
        raise SpecError(name, f"box must be two integers in 1..256, got {box!r}")
    if swizzle not in SWIZZLES:
        raise SpecError(name, f"swizzle must be one of {SWIZZLES}, got {swizzle!r}")
    if staged and call.args[0].id == "C":
        raise SpecError(name, "only the inputs A and B can be staged")
    return TensorMapSpec(call.args[0].id, box, swizzle, bool(staged))


def _entry_declared(source: str, entry: str) -> bool:
    # `extern "C" __global__ [qualifiers, __launch_bounds__(..)] void entry(` either inline or inside
    # an `extern "C" { ... }` block; the cubin's symbol lookup is the final word at load time.
    decl = re.compile(r"__global__\s+(?:[\w:]+(?:\s*\([^)]*\))?\s+)*?" + re.escape(entry) + r"\s*\(")
    return bool(decl.search(source)) and 'extern "C"' in source


def parse_spec(text: str, variables: tuple[str, ...] = GEMM_VARIABLES) -> LaunchSpec:
    """Parse the /*@launch ... @*/ block of a candidate text."""
    start = text.find(SPEC_OPEN)
    if start < 0:
        raise SpecError("spec", f"no '{SPEC_OPEN}' block found")
    end = text.find(SPEC_CLOSE, start)
    if end < 0:
        raise SpecError("spec", f"the '{SPEC_OPEN}' block is not closed with '{SPEC_CLOSE}'")
    names = tuple(variables) + ("num_sms",)
    fields: dict[str, str] = {}
    tensor_maps: list[TensorMapSpec] = []
    for raw in text[start + len(SPEC_OPEN):end].splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if ":" not in line:
            raise SpecError("spec", f"line '{line}' is not 'field: value'")
        key, value = (s.strip() for s in line.split(":", 1))
        if key not in KNOWN_FIELDS:
            raise SpecError(key, f"unknown field (known: {', '.join(KNOWN_FIELDS)})")
        if key == "tensor_map":
            tensor_maps.append(_parse_tensor_map(value, names))
            continue
        if key in fields:
            raise SpecError(key, "given twice")
        fields[key] = value
    for required in ("entry", "block", "grid"):
        if required not in fields:
            raise SpecError(required, "is required")

    entry = fields["entry"]
    if not re.fullmatch(r"[A-Za-z_]\w*", entry):
        raise SpecError("entry", f"'{entry}' is not a C identifier")

    block_exprs = _parse_exprs(fields["block"], "block", ())
    if not 1 <= len(block_exprs) <= 3:
        raise SpecError("block", "needs 1 to 3 integers")
    block = tuple(e({}) for e in block_exprs) + (1,) * (3 - len(block_exprs))
    if any(b < 1 for b in block) or block[0] * block[1] * block[2] > 1024 or block[2] > 64:
        raise SpecError("block", f"{block} is not a valid CUDA block (each >= 1, product <= 1024, z <= 64)")

    grid = _parse_exprs(fields["grid"], "grid", names)
    if not 1 <= len(grid) <= 3:
        raise SpecError("grid", "needs 1 to 3 expressions")
    one = Expr("1", ast.Constant(1), "grid")
    grid = tuple(grid) + (one,) * (3 - len(grid))
    for axis, (g, lim) in enumerate(zip(grid, GRID_LIMITS)):
        value = g.constant()
        if value is not None and not 1 <= value <= lim:
            raise SpecError("grid", f"dimension {axis} = {value} is outside 1..{lim}")

    scalars = {}
    for key in ("smem", "workspace"):
        exprs = _parse_exprs(fields.get(key, "0"), key, names)
        if len(exprs) != 1:
            raise SpecError(key, "needs exactly one expression")
        value = exprs[0].constant()
        if value is not None and value < 0:
            raise SpecError(key, f"{value} bytes is negative")
        scalars[key] = exprs[0]

    layouts = tuple(s.strip() for s in fields.get("layouts", "NN").split(",") if s.strip())
    bad = [x for x in layouts if x not in ("NN", "TN")]
    if bad or not layouts:
        raise SpecError("layouts", f"must list NN and/or TN, got '{fields.get('layouts')}'")
    workspace_zero = fields.get("workspace_zero", "launch")
    if workspace_zero not in WORKSPACE_ZERO:
        raise SpecError("workspace_zero", f"'{workspace_zero}' is not one of {', '.join(WORKSPACE_ZERO)}")
    return LaunchSpec(entry, block, grid, scalars["smem"], scalars["workspace"], layouts, tuple(tensor_maps),
                      workspace_zero)


def _code_lines(text: str) -> list[str]:
    """The text's lines as the preprocessor reads directives: comments blanked (not inside string or
    char literals) and backslash-newlines joined, the joined line under its first line's number."""
    out, i, n, state, pending = [], 0, len(text), None, 0
    while i < n:
        c = text[i]
        if c == "\\" and text.startswith("\n", i + 1):   # a line continuation, in every state
            pending += 1
            i += 2
            continue
        if c == "\n":
            out.append("\n" * (1 + pending))
            pending = 0
            if state != "block":
                state = None
        elif state is None:
            if text.startswith("//", i):
                state = "line"
            elif text.startswith("/*", i):
                state, i = "block", i + 1
                out.append(" ")
            else:
                if c in "\"'":
                    state = c
                out.append(c)
        elif state == "block":
            if text.startswith("*/", i):
                state, i = None, i + 1
        elif state != "line":   # inside a string or char literal: kept as written
            out.append(c)
            if c == "\\" and i + 1 < n:
                out.append(text[i + 1])
                i += 1
            elif c == state:
                state = None
        i += 1
    return "".join(out).split("\n")


_DIRECTIVE = re.compile(r"\s*#\s*(include|include_next|import)\b\s*(.*)")


def _include_error(target: str) -> str | None:
    """Why one include target is refused, or None when it is allowed."""
    if not (target.startswith("<") and target.endswith(">")):
        kind = "a quoted include" if target.startswith('"') else "not a <header> name"
        return f"{kind}; only <hgemm/...> and CUDA's own headers can be included"
    name = target[1:-1].strip()
    parts = name.split("/")
    if name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts):
        return "a header path must be a plain relative name (no absolute path, '..', '.' or empty component)"
    if name.startswith(PROJECT_HEADER_DIR):
        if not (INCLUDE_DIR / name).is_file():
            have = ", ".join(sorted(p.name for p in (INCLUDE_DIR / PROJECT_HEADER_DIR).glob("*.cuh")))
            return f"no project header '{name}' (there are: {have})"
        return None
    if name in CUDA_HEADERS or name.startswith(CUDA_HEADER_DIRS):
        return None
    return (f"'{name}' is not a header a candidate may include (the project's <hgemm/...> and CUDA's own: "
            f"cuda_fp16.h, cuda_bf16.h, cuda.h, mma.h, cuda/..., stdint.h, ...)")


def check_includes(text: str) -> None:
    """Raise SpecError for the first include a candidate may not use (see the module docstring)."""
    for number, line in enumerate(_code_lines(text), 1):
        m = _DIRECTIVE.match(line)
        if not m:
            continue
        directive, target = m.group(1), m.group(2).strip()
        why = (f"#{directive} is not allowed; use #include" if directive != "include" else _include_error(target))
        if why:
            raise SpecError("include", f"line {number}: '#{directive} {target}': {why}")


def parse_candidate(text: str, variables: tuple[str, ...] = GEMM_VARIABLES) -> Candidate:
    """Parse and validate a candidate text; raises SpecError naming the bad field."""
    if not isinstance(text, str) or not text.strip():
        raise SpecError("source", "empty candidate")
    check_includes(text)
    spec = parse_spec(text, variables)
    if not _entry_declared(text, spec.entry):
        raise SpecError("entry", f"no extern \"C\" __global__ function named '{spec.entry}' in the source")
    return Candidate(text, spec)


_FENCE = re.compile(r"```(?:cuda|cpp|c\+\+|cu|c)?\s*\n(.*?)```", re.DOTALL)
# string and character literals (kept: inline PTX lives in strings, where // is no C comment), then the
# comments; the launch spec's /*@ block is not a comment
_LITERAL_OR_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*(?!@).*?\*/', re.DOTALL)
_ENTRY = re.compile(r"\bentry:\s*(\w+)")


def code_identity(text: str) -> str:
    """A kernel's text less its comments and with each run of whitespace one space: two texts of one
    identity are one kernel (the spec block kept), whatever their comments say. A model that writes out
    the library's kernel with another measurement comment or entry name has written the library's kernel.
    Line splices go first and string literals stay whole, as in the C preprocessor, so no code hides in
    what this calls a comment."""
    spliced = text.replace("\\\r\n", "").replace("\\\n", "")
    code = " ".join(_LITERAL_OR_COMMENT.sub(lambda m: m.group(0) if m.group(0)[0] in "\"'" else " ", spliced).split())
    entry = _ENTRY.search(code)
    return re.sub(rf"\b{re.escape(entry.group(1))}\b", "<entry>", code) if entry else code


def extract_candidate_text(completion: str) -> str:
    """The candidate inside a model completion: the first fenced block holding a spec, else the raw text."""
    for block in _FENCE.findall(completion):
        if SPEC_OPEN in block:
            return block
    return completion
