"""Weights at a precision (precision.py says which): conversion, and the CPU quantized layers.

On the CPU the quantized layers call the kernel of kernels.py, for prefill chunks too; only
layers given float32 copies (`use_cpu_kernel(dense=True)`, no longer what the server does)
send many rows to an SGEMM on them. Imports MLX: the worker thread only, after
`blas.enable_fast_blas`.
"""

from __future__ import annotations

import logging
from types import ModuleType
from typing import TYPE_CHECKING, Any

import mlx.core as mx
from mlx.nn.layers.activations import silu
from mlx.nn.layers.base import Module
from mlx.nn.layers.embedding import Embedding
from mlx.nn.layers.linear import Linear
from mlx.nn.layers.quantized import QuantizedEmbedding, QuantizedLinear
from mlx.utils import tree_unflatten

if TYPE_CHECKING:
    from .precision import Precision

__all__ = [
    "GROUP_SIZE",
    "KERNEL_MAX_ROWS",
    "BlockLinear",
    "CpuQuantizedEmbedding",
    "CpuQuantizedLinear",
    "apply_precision",
    "concatenate_linears",
    "cpu_kernel",
    "describe_precision",
    "float_matmul",
    "input_bits",
    "kernel_matmul",
    "linear_parts",
    "set_input_bits",
    "use_cpu_kernel",
]

_log = logging.getLogger(__name__)

GROUP_SIZE = 32
# Rows (tokens) up to which the kernel beats dequantizing into OpenBLAS's SGEMM; a decode batch
# (at most --max-batch rows) always stays below it, so a row's logits do not depend on the
# batch it decodes in.
KERNEL_MAX_ROWS = 32
# Module names that `q4` keeps at 8 bits, besides embeddings (an untied output projection).
_EIGHT_BIT_NAMES = ("lm_head",)


def apply_precision(model: Module, precision: Precision) -> None:
    """Convert `model`'s linear and embedding layers in place to `precision`; float parameters
    (norms, biases) become float32."""
    replaced: list[tuple[str, Module]] = []
    for path, module in _modules(model):
        if not isinstance(module, Linear | Embedding | QuantizedLinear | QuantizedEmbedding):
            continue
        bits = _target_bits(path, module, precision)
        current = getattr(module, "bits", None) if _is_quantized(module) else None
        if bits == current and getattr(module, "mode", "affine") == "affine":
            continue  # already at that width: kept as the file has it
        converted = _dequantized(module) if _is_quantized(module) else module
        if bits is not None and _quantizable(converted):
            converted = _quantized(converted, bits)
        if converted is not module:
            replaced.append((path, converted))
    if replaced:
        model.update_modules(tree_unflatten(replaced))
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())  # type: ignore[no-untyped-call]


def describe_precision(model: Module) -> str:
    """What the linear layers hold (the output projection aside, which `q4` keeps at 8 bits):
    `f32`, `q8`, `q4`, `gguf` (a file's own blocks, blocks.py), another float type, or `mixed`."""
    kinds = set()
    for path, module in _modules(model):
        if path.split(".")[-1] in _EIGHT_BIT_NAMES:
            continue
        if isinstance(module, QuantizedLinear):
            kinds.add(f"q{module.bits}")
        elif isinstance(module, BlockLinear):
            kinds.add("gguf")
        elif isinstance(module, Linear):
            kinds.add(
                {mx.float32: "f32", mx.float16: "f16", mx.bfloat16: "bf16"}.get(module.weight.dtype, "float")
            )
    return kinds.pop() if len(kinds) == 1 else "mixed"


# The kernel module of kernels.py, once `use_cpu_kernel` has installed it, and the integer width
# its products round their input rows to (0: none; see `use_cpu_kernel`).
_kernel: ModuleType | None = None
_activations = 0


def cpu_kernel() -> ModuleType | None:
    """The kernel module `use_cpu_kernel` installed, if any."""
    return _kernel


def input_bits() -> int:
    """The integer width the kernel's products round their input rows to: 8, or 0 (they
    multiply floats), see `use_cpu_kernel`."""
    return _activations


def set_input_bits(bits: int) -> int:
    """Switch the installed kernel's input rows to `bits` (8 where the kernel has int8 products, else 0) and
    return what was in force: bench.py measures both on one loaded model between requests."""
    global _activations
    before = _activations
    _activations = bits if bits == 8 and _kernel is not None and _kernel.vnni() else 0
    return before


def use_cpu_kernel(model: Module, kernel: ModuleType, *, dense: bool = True, activations: int = 0) -> int:
    """Route the affine 4- and 8-bit layers of `model` through `kernel` (kernels.py); return how
    many layers now use it. `dense`: keep float32 copies of the linear layers for prefill (on
    OpenBLAS; the server no longer does, loading.py says why); without them the kernel
    computes prefill too.
    `activations` 8 (where the CPU has AVX-512 VNNI, or AVX2 for 4-bit weights; else 0): the
    kernel rounds each 32 input values to int8 with a scale of their own and multiplies in
    integers, as llama.cpp does (cpu/qmm_int8.cpp); 0: it multiplies the float input by the
    weights widened to float."""
    global _kernel, _activations
    _kernel = kernel
    _activations = activations if activations == 8 and kernel.vnni() else 0
    if activations and not _activations:
        _log.warning("integer input rows need AVX-512 VNNI or AVX2, which this CPU lacks; multiplying floats")
    count = 0
    for _, module in _modules(model):
        swapped: type[Module] | None = None
        if type(module) is QuantizedLinear:
            swapped = CpuQuantizedLinear
        elif type(module) is QuantizedEmbedding:
            swapped = CpuQuantizedEmbedding
        if swapped is None or module.mode != "affine" or module.bits not in (4, 8) or module.group_size % 32:
            continue
        # The kernel reads float16 (a GGUF file's) or float32 scales; bfloat16 is widened exactly.
        keep = module.scales.dtype if module.scales.dtype in (mx.float16, mx.float32) else mx.float32
        module.scales = mx.contiguous(module.scales.astype(keep))
        module.biases = mx.contiguous(module.biases.astype(keep))
        module.weight = mx.contiguous(module.weight)
        if swapped is CpuQuantizedLinear and dense:
            # Prefill (hundreds of rows) runs on OpenBLAS, 3x faster there than the kernel, on
            # float32 weights: computed once here (dequantizing per call made prefill 1.5x
            # slower). The embedding needs none: a prompt's logits are never computed.
            module.dense = _dequantized(module).weight
        # Same parameters, another `__call__`: what nn.quantize's replacement would copy anyway.
        module.__class__ = swapped
        count += 1
    mx.eval(model.parameters())  # type: ignore[no-untyped-call]
    return count


def kernel_matmul(
    x: mx.array,
    weight: mx.array,
    scales: mx.array,
    biases: mx.array,
    group_size: int,
    bits: int,
    *,
    norm: mx.array | None = None,
    eps: float = 0.0,
    swiglu: bool = False,
    residual: mx.array | None = None,
    dense: mx.array | None = None,
) -> mx.array:
    """`residual + f(x) @ dequantize(weight).T`, where f is `mx.fast.rms_norm(x, norm, eps)` with
    `norm`, `silu(gate) * up` of x = [gate | up] with `swiglu`, else nothing: the kernel for a
    few rows (it applies f and adds the residual itself), else MLX operations and an SGEMM on
    `dense` (the weight in float32) or on the weight dequantized for the call."""
    few = x.size <= KERNEL_MAX_ROWS * x.shape[-1]
    if _kernel is not None and x.dtype == mx.float32 and (few or dense is None):
        result: mx.array = _kernel.quantized_matmul(
            x, weight, scales, biases, group_size, bits, norm, eps, swiglu, residual, _activations
        )
        return result
    if dense is not None:
        return float_matmul(x, dense, norm=norm, eps=eps, swiglu=swiglu, residual=residual)
    # float32 scales, so that s * q + b is computed in float32 (as the kernel does), not float16.
    weights = mx.dequantize(
        weight, scales.astype(mx.float32), biases.astype(mx.float32), group_size=group_size, bits=bits
    )
    return float_matmul(x, weights, norm=norm, eps=eps, swiglu=swiglu, residual=residual)


def float_matmul(
    x: mx.array,
    weight: mx.array,
    *,
    norm: mx.array | None = None,
    eps: float = 0.0,
    swiglu: bool = False,
    residual: mx.array | None = None,
) -> mx.array:
    """What `kernel_matmul` computes, for a float weight, in MLX operations."""
    if norm is not None:
        x = mx.fast.rms_norm(x, norm, eps)
    if swiglu:
        gate, up = mx.split(x, 2, axis=-1)
        x = silu(gate) * up
    out = x @ weight.T
    return out if residual is None else residual + out


def linear_parts(layer: Module, *, bias: bool = False) -> tuple[tuple[mx.array, ...], tuple[int, int] | None]:
    """A bias-free linear layer's arrays and, when it runs on the kernel, (group size, bits).
    `bias`: a bias is allowed (and left out: the caller adds it)."""
    if "bias" in layer and not bias:
        raise TypeError(f"a linear layer with a bias: {type(layer).__name__}")
    if type(layer) is CpuQuantizedLinear:
        return (layer["weight"], layer["scales"], layer["biases"]), (layer.group_size, layer.bits)
    if type(layer) is BlockLinear:
        # Block rows carry their scales: the weight stands in the scales' and biases' places
        # too (never read there), so every kernel format is a triple; group size 0 says so.
        return (layer["weight"],) * 3, (0, layer.kind)
    if type(layer) is Linear:
        return (layer["weight"],), None
    raise TypeError(f"not a bias-free float32 or kernel linear layer: {type(layer).__name__}")


def concatenate_linears(layers: list[Module]) -> Module:
    """One layer computing what `layers` compute, their outputs side by side (their weights'
    rows concatenated: quantization groups run along rows, so each output is unchanged)."""
    parts = [linear_parts(layer) for layer in layers]
    formats = {quantized for _, quantized in parts}
    if len(formats) != 1:
        raise TypeError("the layers to fuse differ in format")
    quantized = formats.pop()
    if quantized is not None and quantized[0] == 0:
        return BlockLinear(mx.concatenate([p[0][0] for p in parts], axis=0), quantized[1])
    arrays = [mx.concatenate([p[0][i] for p in parts], axis=0) for i in range(len(parts[0][0]))]
    if quantized is None:
        fused = Linear(int(arrays[0].shape[1]), int(arrays[0].shape[0]), bias=False)
        fused.weight = arrays[0]
        return fused
    layer = CpuQuantizedLinear.__new__(CpuQuantizedLinear)
    Module.__init__(layer)  # type: ignore[no-untyped-call]
    layer.group_size, layer.bits = quantized
    layer.mode = "affine"
    layer.weight, layer.scales, layer.biases = arrays
    dense = [part["dense"] for part in layers if "dense" in part]
    if len(dense) == len(layers):
        layer.dense = mx.concatenate(dense, axis=0)
    layer.freeze()
    return layer


class CpuQuantizedLinear(QuantizedLinear):
    """`QuantizedLinear` whose product runs on the kernel (see `use_cpu_kernel`); a bias (qwen2's
    query, key and value projections) is added after it."""

    def __call__(self, x: mx.array) -> mx.array:
        weight, scales, biases = self["weight"], self["scales"], self["biases"]
        out = kernel_matmul(x, weight, scales, biases, self.group_size, self.bits, dense=self.get("dense"))
        return out + self["bias"] if "bias" in self else out


class BlockLinear(Module):
    """A linear layer on GGML block rows (blocks.py serves a GGUF file's so): `weight` (N, K / 32 *
    bytes) uint8 of type `kind`, an optional float32 `bias`; its product is the kernel's
    (cpu/blocks.cpp)."""

    kind: int

    def __init__(self, weight: mx.array, kind: int, bias: mx.array | None = None) -> None:
        Module.__init__(self)  # type: ignore[no-untyped-call]
        self.weight = weight
        self.kind = kind
        if bias is not None:
            self.bias = bias
        self.freeze()

    def __call__(self, x: mx.array) -> mx.array:
        weight = self["weight"]
        out = kernel_matmul(x, weight, weight, weight, 0, self.kind)
        return out + self["bias"] if "bias" in self else out


class CpuQuantizedEmbedding(QuantizedEmbedding):
    """`QuantizedEmbedding` whose `as_linear` (a tied output projection) runs on the kernel."""

    def as_linear(self, x: mx.array) -> mx.array:
        return kernel_matmul(x, self["weight"], self["scales"], self["biases"], self.group_size, self.bits)


def _modules(model: Module) -> list[tuple[str, Any]]:
    modules: list[tuple[str, Any]] = model.named_modules()  # type: ignore[no-untyped-call]
    return modules


def _is_quantized(module: Module) -> bool:
    return isinstance(module, QuantizedLinear | QuantizedEmbedding)


def _target_bits(path: str, module: Module, precision: Precision) -> int | None:
    if precision == "f32":
        return None
    if precision == "q8":
        return 8
    embedding = isinstance(module, Embedding | QuantizedEmbedding)
    return 8 if embedding or path.split(".")[-1] in _EIGHT_BIT_NAMES else 4


def _quantizable(module: Module) -> bool:
    # Groups run along the input dimension; a width that is not a multiple stays float.
    return int(module.weight.shape[-1]) % GROUP_SIZE == 0


def _quantized(module: Module, bits: int) -> Module:
    quantized: Module
    if isinstance(module, Embedding):
        quantized = QuantizedEmbedding.from_embedding(module, GROUP_SIZE, bits)
    else:
        quantized = QuantizedLinear.from_linear(module, GROUP_SIZE, bits)
    return quantized


def _dequantized(module: Any) -> Module:
    # Scales widened first, so the float32 weights are exact (no float16 rounding of s * q + b).
    biases = module.get("biases")
    weight = mx.dequantize(
        module["weight"],
        module["scales"].astype(mx.float32),
        biases.astype(mx.float32) if biases is not None else None,
        group_size=module.group_size,
        bits=module.bits,
        mode=module.mode,
    )
    out_features, in_features = weight.shape
    if isinstance(module, QuantizedEmbedding):
        embedding = Embedding(out_features, in_features)
        embedding.weight = weight
        return embedding
    linear = Linear(in_features, out_features, bias="bias" in module)
    linear.weight = weight
    if "bias" in module:
        linear.bias = module["bias"].astype(mx.float32)
    return linear
