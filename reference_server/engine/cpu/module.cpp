// Python bindings of the CPU primitives (engine/kernels.py builds and loads them).
//
// Built in nanobind domain "mlx", MLX's own, so that these functions take and return MLX's
// Python array objects.

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/vector.h>

#include <optional>
#include <vector>

#include "common.h"
#include "mlx/array.h"

namespace mx = mlx::core;
namespace nb = nanobind;

namespace plumbline {
mx::array quantized_matmul(const mx::array& x, const mx::array& w, const mx::array& scales,
                           const mx::array& biases, int group_size, int bits,
                           const std::optional<mx::array>& norm, float eps, bool swiglu,
                           const std::optional<mx::array>& residual, int activations);
mx::array decode_attention(const mx::array& queries, const mx::array& keys, const mx::array& values, int length,
                           const std::optional<mx::array>& left_padding);
std::vector<mx::array> decode_projection(const mx::array& x, const mx::array& w, const mx::array& scales,
                                         const mx::array& biases, int group_size, int bits, const mx::array& norm,
                                         float eps, const mx::array& cos, const mx::array& sin,
                                         const mx::array& positions, int heads, int kv_heads, int dim,
                                         bool traditional, float scale, int activations);
bool vnni_available();
bool int8_eight_bit();
std::vector<mx::array> decode_layer(const std::vector<mx::array>& arrays, const std::vector<int>& formats, float eps,
                                    int heads, int kv_heads, int dim, bool traditional, float scale, int length,
                                    int activations, bool biased, bool chain);
}  // namespace plumbline

NB_MODULE(_plumbline_cpu, m) {
  m.doc() = "CPU primitives for MLX: quantized products and decode attention (reference_server)";
  m.def("quantized_matmul", &plumbline::quantized_matmul, nb::arg("x"), nb::arg("w"), nb::arg("scales"),
        nb::arg("biases"), nb::arg("group_size"), nb::arg("bits"), nb::arg("norm") = nb::none(),
        nb::arg("eps") = 0.0f, nb::arg("swiglu") = false, nb::arg("residual") = nb::none(), nb::arg("activations") = 0,
        "x @ dequantize(w).T (x first RMS-normalised by `norm`, or silu(gate) * up when `swiglu`), plus "
        "`residual`; `activations` 8: x rounded to int8 per 32 values first, where the CPU has AVX-512 VNNI");
  m.def("decode_attention", &plumbline::decode_attention, nb::arg("queries"), nb::arg("keys"), nb::arg("values"),
        nb::arg("length"), nb::arg("left_padding") = nb::none(),
        "softmax(q k^T) v of one query per row over the first `length` cache positions");
  m.def("decode_projection", &plumbline::decode_projection, nb::arg("x"), nb::arg("w"), nb::arg("scales"),
        nb::arg("biases"), nb::arg("group_size"), nb::arg("bits"), nb::arg("norm"), nb::arg("eps"), nb::arg("cos"),
        nb::arg("sin"), nb::arg("positions"), nb::arg("heads"), nb::arg("kv_heads"), nb::arg("dim"),
        nb::arg("traditional"), nb::arg("scale"), nb::arg("activations") = 0,
        "[queries (B, KV, G, D) rotated and scaled, keys and values (B, KV, 1, D)] of a decode step");
  m.def("decode_layer", &plumbline::decode_layer, nb::arg("arrays"), nb::arg("formats"), nb::arg("eps"),
        nb::arg("heads"), nb::arg("kv_heads"), nb::arg("dim"), nb::arg("traditional"), nb::arg("scale"),
        nb::arg("length"), nb::arg("activations") = 0, nb::arg("biased") = false, nb::arg("chain") = false,
        "[h, keys, values] of a whole llama decoder layer for one token per row (layer.cpp): arrays are x, the "
        "two norm weights, (weight, scales, biases) of q/k/v, o, gate/up and down, the cos and sin tables, the "
        "rows' positions, the cache's keys and values (written at column `length`) and optionally its left "
        "padding, then with `biased` the q/k/v product's bias; formats are (group size, bits) per product; with "
        "`chain` the rows are consecutive tokens of the cache's one row, at columns `length` on");
  m.def("set_threads", [](int n) { plumbline::pool().resize(n < 1 ? 1 : n); }, nb::arg("threads"));
  m.def("threads", []() { return plumbline::pool().threads(); });
  m.def("vnni", &plumbline::vnni_available,
        "whether integer `activations` run here (AVX-512 VNNI, or AVX2 for 4-bit weights)");
  m.def("int8_eight_bit", &plumbline::int8_eight_bit,
        "whether 8-bit weights take int8 activations too (VNNI; AVX2 keeps them in float)");
  m.def("isa", []() { return plumbline::detect() == plumbline::Isa::avx512 ? "avx512" : "avx2"; });
}
