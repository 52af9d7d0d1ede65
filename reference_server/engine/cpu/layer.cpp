// An MLX primitive: a whole llama decoder layer of a decode step (one token per row).
//
// A step of engine/decode.py's blocks was, per layer, the projection (projection.cpp), the
// KV-cache update (two slice updates), the attention (attention.cpp) and the output projection,
// gate/up and down products (qmm.cpp): nine MLX operations and their scheduling, 293 a step on
// SmolLM2. Here they are one operation, in order:
//   RMS norm, q/k/v product, rotary embedding (queries scaled)  -> the new key and value are
//   written into the cache buffers at column `length`; attention of each row over
//   [left_padding, length]; h = x + attention @ o; out = h + down(swiglu(gate_up(norm(h)))).
// With `biased` (qwen2), the last input is the q/k/v product's bias, added before the rotation.
// With `chain`, the rows are consecutive tokens of one sequence (a speculative draft being
// verified, engine/speculative.py): row m is at column `length + m` of the cache's only row and
// attends over [left_padding, length + m], each row exactly as a decode step at that position.
// Each product is qmm.h's (on integer input rows where asked and available), so the numbers
// are the ones the separate primitives give.
//
// The cache buffers are written in place, and returned as the outputs `keys` and `values`
// (sharing the inputs' memory): the caller guarantees that nothing else can read the buffers'
// positions at `length` and beyond (decode.py: mlx-lm's caches own the spare capacity they
// allocate; anything else holding the buffer only ever sees positions below its length).

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <string>
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

// Input positions.
enum : int {
  kX,
  kNorm1,
  kQkv,  // weight, scales, biases
  kO = kQkv + 3,
  kNorm2 = kO + 3,
  kGateUp,
  kDown = kGateUp + 3,
  kCos = kDown + 3,
  kSin,
  kPositions,
  kKeys,
  kValues,
  kPadding,  // optional
};

struct Format {
  int group, bits;
};

Weights weights_at(const std::vector<mx::array>& inputs, int at, Format f) {
  const mx::array &w = inputs[at], &scales = inputs[at + 1], &biases = inputs[at + 2];
  return Weights{w.data<uint8_t>(), scales.data<void>(), biases.data<void>(), scales.dtype() == mx::float16,
                 static_cast<int>(w.shape(0)), weight_columns(w.shape(1), f.group, f.bits), f.group, f.bits};
}

class DecodeLayer : public mx::Primitive {
 public:
  DecodeLayer(mx::Stream stream, std::vector<Format> formats, float eps, Heads heads, int length, bool padded,
              bool biased, int activations, bool chain)
      : mx::Primitive(stream),
        formats_(std::move(formats)),
        eps_(eps),
        heads_(heads),
        length_(length),
        padded_(padded),
        biased_(biased),
        activations_(activations),
        chain_(chain) {}

  void eval_cpu(const std::vector<mx::array>& inputs, std::vector<mx::array>& outputs) override {
    for (int i = kNorm1; i <= kSin; i++) {
      if (!inputs[i].flags().row_contiguous)
        throw std::runtime_error("plumbline layer: weights and tables must be row contiguous");
    }
    auto& encoder = mx::cpu::get_command_encoder(stream());
    for (const auto& a : inputs) encoder.set_input_array(a);
    outputs[0].set_data(mx::allocator::malloc(outputs[0].nbytes()));
    // The cache buffers, written in place (see the header comment).
    outputs[1].copy_shared_buffer(inputs[kKeys]);
    outputs[2].copy_shared_buffer(inputs[kValues]);
    for (auto& out : outputs) encoder.set_output_array(out);
    const int hidden = static_cast<int>(inputs[kX].shape(-1));
    const int rows = static_cast<int>(inputs[kX].size() / hidden);
    std::optional<mx::array> padding;
    if (padded_) padding = inputs[kPadding];
    const float* qkv_bias = biased_ ? inputs.back().data<float>() : nullptr;
    encoder.dispatch([x = View(inputs[kX]), norm1 = inputs[kNorm1].data<float>(),
                      norm2 = inputs[kNorm2].data<float>(), qkv = weights_at(inputs, kQkv, formats_[0]),
                      o = weights_at(inputs, kO, formats_[1]), gate_up = weights_at(inputs, kGateUp, formats_[2]),
                      down = weights_at(inputs, kDown, formats_[3]), cos = inputs[kCos].data<float>(),
                      sin = inputs[kSin].data<float>(), table = inputs[kCos].shape(0),
                      positions = inputs[kPositions], keys = CacheView(inputs[kKeys]),
                      values = CacheView(inputs[kValues]), padding = std::move(padding),
                      out = outputs[0].data<float>(), rows, hidden, eps = eps_, heads = heads_, length = length_,
                      activations = activations_, qkv_bias, chain = chain_]() {
      const int H = heads.heads, KV = heads.kv_heads, D = heads.dim, G = H / KV;
      // The residual stream's rows, contiguous: the output projection adds them.
      std::vector<float> residual((size_t)rows * hidden);
      for (int m = 0; m < rows; m++) x.row(m, hidden, residual.data() + (size_t)m * hidden);
      // Norm, q/k/v product, rotation; the new keys and values go into the cache at `length`.
      std::vector<float> y((size_t)rows * qkv.N), queries((size_t)rows * H * D), fresh(2 * (size_t)KV * D);
      quantized_product(x, Transform{norm1, eps, false, activations}, qkv, rows, nullptr, y.data());
      if (qkv_bias != nullptr) {
        for (int m = 0; m < rows; m++) {
          float* row = y.data() + (size_t)m * qkv.N;
          for (int j = 0; j < qkv.N; j++) row[j] += qkv_bias[j];
        }
      }
      for (int m = 0; m < rows; m++) {
        float* k = fresh.data();
        float* v = fresh.data() + (size_t)KV * D;
        rotate(y.data() + (size_t)m * qkv.N, heads, cos, sin, position(positions, m, table),
               queries.data() + (size_t)m * H * D, k, v);
        // A chain's tokens share the cache's row 0, one column each.
        const int64_t b = chain ? 0 : m, column = chain ? length + m : length;
        for (int h = 0; h < KV; h++) {
          float* kd = const_cast<float*>(keys.data) + b * keys.stride_b + h * keys.stride_h + column * keys.stride_s;
          float* vd =
              const_cast<float*>(values.data) + b * values.stride_b + h * values.stride_h + column * values.stride_s;
          for (int d = 0; d < D; d++) {
            kd[d * keys.stride_d] = k[h * D + d];
            vd[d * values.stride_d] = v[h * D + d];
          }
        }
      }
      const int sequences = chain ? 1 : rows;
      std::vector<int> starts(sequences, 0);
      if (padding) {
        for (int b = 0; b < sequences; b++) {
          int64_t value = padding->dtype() == mx::int64 ? padding->data<int64_t>()[b] : padding->data<int32_t>()[b];
          starts[b] = static_cast<int>(std::clamp<int64_t>(value, 0, length + 1));
        }
      }
      std::vector<float> attention((size_t)rows * H * D);
      if (chain) {
        // Each row over the cache's one row up to its own column (a decode step's very
        // arithmetic), all in one pass over the pool: the views' row stride is 0.
        CacheView one_keys = keys, one_values = values;
        one_keys.stride_b = one_values.stride_b = 0;
        std::vector<int> row_starts(rows, starts[0]), row_lengths(rows);
        for (int m = 0; m < rows; m++) row_lengths[m] = length + m + 1;
        attend(queries.data(), one_keys, one_values, row_starts.data(), attention.data(), rows, KV, G, D, length + 1,
               row_lengths.data());
      } else {
        attend(queries.data(), keys, values, starts.data(), attention.data(), rows, KV, G, D, length + 1);
      }
      // h = x + attention @ o; out = h + down(swiglu(gate_up(norm(h)))).
      std::vector<float> h((size_t)rows * hidden), wide((size_t)rows * gate_up.N);
      quantized_product(View(attention.data(), rows, H * D), Transform{nullptr, 0.0f, false, activations}, o, rows,
                        residual.data(), h.data());
      quantized_product(View(h.data(), rows, hidden), Transform{norm2, eps, false, activations}, gate_up, rows, nullptr,
                        wide.data());
      quantized_product(View(wide.data(), rows, gate_up.N), Transform{nullptr, 0.0f, true, activations}, down, rows,
                        h.data(), out);
    });
  }

  void eval_gpu(const std::vector<mx::array>&, std::vector<mx::array>&) override {
    throw std::runtime_error("plumbline layer runs on the CPU only");
  }

  const char* name() const override {
    return "PlumblineDecodeLayer";
  }

  bool is_equivalent(const mx::Primitive& other) const override {
    auto* o = dynamic_cast<const DecodeLayer*>(&other);
    if (o == nullptr || o->eps_ != eps_ || o->length_ != length_ || o->padded_ != padded_ || o->biased_ != biased_ ||
        o->activations_ != activations_ || o->chain_ != chain_)
      return false;
    for (size_t i = 0; i < formats_.size(); i++) {
      if (o->formats_[i].group != formats_[i].group || o->formats_[i].bits != formats_[i].bits) return false;
    }
    return o->heads_.heads == heads_.heads && o->heads_.kv_heads == heads_.kv_heads && o->heads_.dim == heads_.dim &&
        o->heads_.traditional == heads_.traditional && o->heads_.scale == heads_.scale;
  }

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {inputs[kX].shape(), inputs[kKeys].shape(), inputs[kValues].shape()};
  }

 private:
  std::vector<Format> formats_;
  float eps_;
  Heads heads_;
  int length_;
  bool padded_;
  bool biased_;
  int activations_;
  bool chain_;
};

void check_linear(const std::vector<mx::array>& inputs, int at, int group, int bits, int K, const char* name) {
  const mx::array &w = inputs[at], &scales = inputs[at + 1], &biases = inputs[at + 2];
  if (group == 0) {  // GGML block rows (blocks.cpp); scales and biases are not read
    if (block_bytes(bits) == 0 || w.dtype() != mx::uint8 || w.ndim() != 2 ||
        w.shape(1) != static_cast<int64_t>(K / 32) * block_bytes(bits) || K % 32 != 0 ||
        w.shape(1) % block_unit(bits) != 0)
      throw std::invalid_argument(std::string("plumbline layer: ") + name + ": block rows do not match");
    return;
  }
  if ((bits != 4 && bits != 8) || group % 32 != 0)
    throw std::invalid_argument(std::string("plumbline layer: ") + name + ": 4 or 8 bits, groups of 32k");
  if (w.dtype() != mx::uint32 || w.ndim() != 2 || w.shape(1) * 32 / bits != K || K % group != 0 ||
      scales.ndim() != 2 || scales.shape(0) != w.shape(0) || scales.shape(1) * group != K ||
      biases.shape() != scales.shape() || (scales.dtype() != mx::float32 && scales.dtype() != mx::float16) ||
      biases.dtype() != scales.dtype())
    throw std::invalid_argument(std::string("plumbline layer: ") + name + ": weights do not match");
}

}  // namespace

std::vector<mx::array> decode_layer(const std::vector<mx::array>& arrays, const std::vector<int>& formats, float eps,
                                    int heads, int kv_heads, int dim, bool traditional, float scale, int length,
                                    int activations, bool biased, bool chain) {
  const size_t base = kPadding + (biased ? 1 : 0);
  if (arrays.size() != base && arrays.size() != base + 1)
    throw std::invalid_argument("plumbline layer: x, 2 norms, 4 x (weight, scales, biases), cos, sin, positions, "
                                "keys, values[, left_padding][, qkv bias]");
  if (formats.size() != 8) throw std::invalid_argument("plumbline layer: formats are 4 x (group size, bits)");
  const mx::array &x = arrays[kX], &keys = arrays[kKeys], &values = arrays[kValues];
  if (x.dtype() != mx::float32 || x.ndim() < 1) throw std::invalid_argument("plumbline layer: x must be float32");
  const int hidden = static_cast<int>(x.shape(-1)), rows = static_cast<int>(x.size() / hidden);
  const int wide = static_cast<int>(arrays[kGateUp].shape(0));
  if (kv_heads < 1 || heads % kv_heads != 0 || dim % 2 != 0 || wide % 2 != 0)
    throw std::invalid_argument("plumbline layer: heads must be a multiple of kv_heads, dim even");
  check_linear(arrays, kQkv, formats[0], formats[1], hidden, "qkv");
  check_linear(arrays, kO, formats[2], formats[3], heads * dim, "o");
  check_linear(arrays, kGateUp, formats[4], formats[5], hidden, "gate_up");
  check_linear(arrays, kDown, formats[6], formats[7], wide / 2, "down");
  if (arrays[kQkv].shape(0) != (heads + 2 * kv_heads) * dim || arrays[kO].shape(0) != hidden ||
      arrays[kDown].shape(0) != hidden)
    throw std::invalid_argument("plumbline layer: the products' shapes do not chain");
  for (int i : {kNorm1, kNorm2}) {
    if (arrays[i].dtype() != mx::float32 || arrays[i].ndim() != 1 || arrays[i].shape(0) != hidden)
      throw std::invalid_argument("plumbline layer: norm weights must be (hidden,) float32");
  }
  const mx::array &cos = arrays[kCos], &sin = arrays[kSin], &positions = arrays[kPositions];
  if (cos.dtype() != mx::float32 || cos.ndim() != 2 || cos.shape(1) != dim || sin.shape() != cos.shape() ||
      sin.dtype() != mx::float32)
    throw std::invalid_argument("plumbline layer: cos and sin tables must be (positions, dim) float32");
  if (positions.ndim() != 1 || positions.shape(0) != rows ||
      (positions.dtype() != mx::int32 && positions.dtype() != mx::int64))
    throw std::invalid_argument("plumbline layer: positions must be (rows,) int32 or int64");
  const int sequences = chain ? 1 : rows;
  if (keys.dtype() != mx::float32 || values.dtype() != mx::float32 || keys.ndim() != 4 ||
      values.shape() != keys.shape() || keys.shape(0) != sequences || keys.shape(1) != kv_heads ||
      keys.shape(3) != dim)
    throw std::invalid_argument(
        "plumbline layer: keys and values must be (rows, or 1 with chain, kv_heads, capacity, dim) float32");
  if (length < 0 || length + (chain ? rows : 1) > keys.shape(2))
    throw std::invalid_argument("plumbline layer: the cache has no room at `length`");
  bool padded = arrays.size() == base + 1;
  if (biased) {
    const mx::array& bias = arrays.back();
    if (bias.dtype() != mx::float32 || bias.ndim() != 1 || bias.shape(0) != arrays[kQkv].shape(0) ||
        !bias.flags().row_contiguous)
      throw std::invalid_argument("plumbline layer: the qkv bias must be (q/k/v outputs,) float32, contiguous");
  }
  if (padded) {
    const mx::array& padding = arrays[kPadding];
    if (padding.ndim() != 1 || padding.shape(0) != sequences ||
        (padding.dtype() != mx::int32 && padding.dtype() != mx::int64))
      throw std::invalid_argument("plumbline layer: left_padding must be (rows,) int32 or int64");
  }
  std::vector<Format> parsed;
  for (int i = 0; i < 4; i++) parsed.push_back(Format{formats[2 * i], formats[2 * i + 1]});
  auto stream = mx::default_stream(mx::Device::cpu);
  Heads layout{heads, kv_heads, dim, traditional, scale};
  return mx::array::make_arrays({x.shape(), keys.shape(), values.shape()}, {mx::float32, mx::float32, mx::float32},
                                std::make_shared<DecodeLayer>(stream, std::move(parsed), eps, layout, length, padded,
                                                              biased, activations, chain),
                                arrays);
}

}  // namespace plumbline
