"""Weight precision of a served model: float32, or MLX affine quantization at 8 or 4 bits.

- `f32`: every weight float32 (a quantized file is dequantized): the CPU path of the past, on
  OpenBLAS's SGEMM.
- `q8`: linear and embedding weights 8-bit, groups of `GROUP_SIZE` (`mx.quantize`).
- `q4`: linear weights 4-bit, the embedding and the output projection 8-bit (what llama.cpp's
  4-bit files do: the output projection is the most sensitive). Weights a file already holds at
  that width (SmolLM2's GGUF: Q4_1 layers and a Q8_0 embedding, which MLX reads as affine 4-
  and 8-bit) are kept as they are, so for the default model `q4` serves exactly the weights
  that `f32` dequantizes.
- `q4-int8`: `q4`'s weights, and the CPU kernel's products round their input rows to int8 per
  32 values (llama.cpp's arithmetic for these files: its q8_1 activations), where the CPU has
  AVX-512 VNNI, or AVX2 for the 4-bit products (else as `q4`). About 10% faster a decode step
  here, and the answers change:
  SmolLM2 answers "What is the capital of France?" with a loop of French words, as llama.cpp
  does, where float input rows (and float32) answer "Paris". Opt-in for that reason.
- `auto`: `q4` for real text models on the CPU when the quantized kernel (kernels.py) is
  available, else `f32`; the tiny random models and vision models stay `f32` on the CPU; on a
  GPU (Metal) the weights stay as loaded, as MLX's own quantized kernels are fast there.

The conversion itself is in quantized.py (it imports MLX; this module does not, so that the
server can name precisions before `blas.enable_fast_blas` runs).
"""

from __future__ import annotations

from typing import Literal

__all__ = ["PRECISION_CHOICES", "Precision", "PrecisionChoice", "choose_precision", "input_rows"]

Precision = Literal["f32", "q8", "q4"]
PrecisionChoice = Literal["auto", "f32", "q8", "q4", "q4-int8"]
PRECISION_CHOICES: tuple[PrecisionChoice, ...] = ("auto", "f32", "q8", "q4", "q4-int8")


def choose_precision(requested: PrecisionChoice, *, kind: str, cpu: bool, kernel: bool) -> Precision | None:
    """The precision to serve; None: leave the weights as loaded (`auto` on a GPU)."""
    if requested == "q4-int8":  # the weights of q4 (the int8 input rows: loading.py)
        return "q4"
    if requested != "auto":
        return requested
    if not cpu:
        return None
    if kind in ("tiny-random", "tiny-random-qwen", "tiny-random-vlm", "vlm-dir") or not kernel:
        return "f32"
    return "q4"


def input_rows(requested: PrecisionChoice) -> int:
    """The integer width the CPU kernel rounds its products' input rows to: 8 for `q4-int8`
    (quantized.use_cpu_kernel: where the CPU has AVX-512 VNNI), else 0 (floats)."""
    return 8 if requested == "q4-int8" else 0
