// An MLX primitive: a decode step's attention inputs, from the residual stream to the rotated,
// scaled queries and the keys and values for the KV cache, in one operation.
//
// In MLX's CPU graph this was the fused q/k/v product, then reshapes, slices, a matmul with a
// pairing permutation and the fused rotation: eleven operations per layer, each paying a few
// microseconds of scheduling. Here: RMS norm and the product (qmm.cpp's), then per row the
// rotary embedding from precomputed tables (out = x * cos + partner(x) * sin, as decode.py's
// tables are laid out), the queries scaled for attention, written in the layouts attention
// reads: queries (B, KV, G, D), keys and values (B, KV, 1, D).

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <vector>

#include "common.h"
#include "decode.h"
#include "mlx/allocator.h"
#include "mlx/array.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/primitives.h"
#include "qmm.h"

namespace mx = mlx::core;

namespace plumbline {
namespace {

using Layout = Heads;

class DecodeProjection : public mx::Primitive {
 public:
  DecodeProjection(mx::Stream stream, int group, int bits, float eps, Layout layout, int activations)
      : mx::Primitive(stream), group_(group), bits_(bits), eps_(eps), layout_(layout), activations_(activations) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override {
    const mx::array &w = inputs[1], &scales = inputs[2], &biases = inputs[3], &norm = inputs[4];
    const mx::array &cos = inputs[5], &sin = inputs[6], &positions = inputs[7];
    for (size_t i = 1; i < 7; i++) {
      if (!inputs[i].flags().row_contiguous)
        throw std::runtime_error("plumbline projection: weights and tables must be row contiguous");
    }
    auto& encoder = mx::cpu::get_command_encoder(stream());
    for (const auto& a : inputs) encoder.set_input_array(a);
    for (auto& out : outputs) {
      out.set_data(mx::allocator::malloc(out.nbytes()));
      encoder.set_output_array(out);
    }
    int N = w.shape(0), K = static_cast<int>(w.shape(1)) * 32 / bits_;
    int M = static_cast<int>(inputs[0].size() / K);
    Weights weights{w.data<uint8_t>(), scales.data<void>(), biases.data<void>(), scales.dtype() == mx::float16,
                    N, K, group_, bits_};
    encoder.dispatch([x = View(inputs[0]), t = Transform{norm.data<float>(), eps_, false, activations_}, weights, M,
                      layout = layout_, cos = cos.data<float>(), sin = sin.data<float>(), table = cos.shape(0),
                      positions, q = outputs[0].data<float>(), k = outputs[1].data<float>(),
                      v = outputs[2].data<float>()]() {
      std::vector<float> y((size_t)M * weights.N);
      quantized_product(x, t, weights, M, nullptr, y.data());
      const int D = layout.dim, H = layout.heads, KV = layout.kv_heads;
      for (int m = 0; m < M; m++) {
        rotate(y.data() + (size_t)m * weights.N, layout, cos, sin, position(positions, m, table),
               q + (size_t)m * H * D, k + (size_t)m * KV * D, v + (size_t)m * KV * D);
      }
    });
  }

  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw std::runtime_error("plumbline projection runs on the CPU only");
  }

  const char* name() const override {
    return "PlumblineDecodeProjection";
  }

  bool is_equivalent(const mx::Primitive& other) const override {
    auto* o = dynamic_cast<const DecodeProjection*>(&other);
    return o != nullptr && o->group_ == group_ && o->bits_ == bits_ && o->eps_ == eps_ &&
        o->layout_.heads == layout_.heads && o->layout_.kv_heads == layout_.kv_heads &&
        o->layout_.dim == layout_.dim && o->layout_.traditional == layout_.traditional &&
        o->layout_.scale == layout_.scale && o->activations_ == activations_;
  }

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return shapes(static_cast<int>(inputs[0].size() / inputs[0].shape(-1)), layout_);
  }

  static std::vector<mx::Shape> shapes(int rows, const Layout& l) {
    int G = l.heads / l.kv_heads;
    return {{rows, l.kv_heads, G, l.dim}, {rows, l.kv_heads, 1, l.dim}, {rows, l.kv_heads, 1, l.dim}};
  }

 private:
  int group_, bits_;
  float eps_;
  Layout layout_;
  int activations_;
};

}  // namespace

std::vector<mx::array> decode_projection(const mx::array& x, const mx::array& w, const mx::array& scales,
                                         const mx::array& biases, int group_size, int bits, const mx::array& norm,
                                         float eps, const mx::array& cos, const mx::array& sin,
                                         const mx::array& positions, int heads, int kv_heads, int dim,
                                         bool traditional, float scale, int activations) {
  if (bits != 4 && bits != 8) throw std::invalid_argument("plumbline projection: bits must be 4 or 8");
  if (group_size % 32 != 0) throw std::invalid_argument("plumbline projection: group size must be a multiple of 32");
  int K = static_cast<int>(w.shape(1)) * 32 / bits;
  if (x.dtype() != mx::float32 || x.shape(-1) != K || K % group_size != 0 || scales.shape(1) * group_size != K)
    throw std::invalid_argument("plumbline projection: x (..., K) float32 against w's K");
  if (kv_heads < 1 || heads % kv_heads != 0 || dim % 2 != 0 || w.shape(0) != (heads + 2 * kv_heads) * dim)
    throw std::invalid_argument("plumbline projection: w must have (heads + 2 kv_heads) * dim rows");
  if (norm.dtype() != mx::float32 || norm.ndim() != 1 || norm.shape(0) != K)
    throw std::invalid_argument("plumbline projection: the norm weight must be (K,) float32");
  if (cos.dtype() != mx::float32 || cos.ndim() != 2 || cos.shape(1) != dim || sin.shape() != cos.shape())
    throw std::invalid_argument("plumbline projection: cos and sin tables must be (positions, dim) float32");
  int rows = static_cast<int>(x.size() / K);
  if (positions.ndim() != 1 || positions.shape(0) != rows ||
      (positions.dtype() != mx::int32 && positions.dtype() != mx::int64))
    throw std::invalid_argument("plumbline projection: positions must be (rows,) int32 or int64");
  if ((scales.dtype() != mx::float32 && scales.dtype() != mx::float16) || biases.dtype() != scales.dtype())
    throw std::invalid_argument("plumbline projection: scales and biases both float32 or float16");
  auto stream = mx::default_stream(mx::Device::cpu);
  Layout layout{heads, kv_heads, dim, traditional, scale};
  return mx::array::make_arrays(DecodeProjection::shapes(rows, layout), {mx::float32, mx::float32, mx::float32},
                                std::make_shared<DecodeProjection>(stream, group_size, bits, eps, layout, activations),
                                {x, w, scales, biases, norm, cos, sin, positions});
}

}  // namespace plumbline
