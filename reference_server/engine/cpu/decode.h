// The pieces of a decode step (one token per row) shared by the primitives built on them:
// the rotary embedding of projection.cpp and the attention of attention.cpp, which layer.cpp
// chains with the products of qmm.cpp into a whole decoder layer.
#pragma once

#include <algorithm>
#include <cstdint>

#include "mlx/array.h"

namespace plumbline {

namespace mx = mlx::core;

// A KV-cache buffer (B, KV, capacity, D) read through its strides.
struct CacheView {
  const float* data;
  int64_t stride_b, stride_h, stride_s, stride_d;

  explicit CacheView(const mx::array& a)
      : data(a.data<float>()),
        stride_b(a.strides()[0]),
        stride_h(a.strides()[1]),
        stride_s(a.strides()[2]),
        stride_d(a.strides()[3]) {}
};

// softmax(q k^T) v for one query position per row: queries (B, KV, G, D) contiguous, already
// scaled; row b attends to positions [starts[b], length) (or [starts[b], lengths[b]) where
// `lengths` is given); out (B, KV, G, D). Over the pool.
void attend(const float* queries, const CacheView& keys, const CacheView& values, const int* starts, float* out,
            int B, int KV, int G, int D, int length, const int* lengths = nullptr);

// The attention heads of a llama layer and their rotary embedding.
struct Heads {
  int heads, kv_heads, dim;
  bool traditional;  // rotation pairs (2i, 2i + 1), else (i, i + dim / 2)
  float scale;
};

// One row's fused q/k/v product y ((heads + 2 kv_heads) * dim) at position `at` of the tables:
// queries rotated and scaled into q (heads * dim), keys rotated into k and values copied into v
// (kv_heads * dim each). out = x * cos + partner(x) * sin, as decode.py's tables are laid out.
inline void rotate(const float* y, const Heads& l, const float* cos, const float* sin, int64_t at, float* q, float* k,
                   float* v) {
  const int D = l.dim, H = l.heads, KV = l.kv_heads;
  const float* c = cos + at * D;
  const float* s = sin + at * D;
  for (int h = 0; h < H + KV; h++) {
    const float* src = y + h * D;
    float* dst = h < H ? q + h * D : k + (h - H) * D;
    float factor = h < H ? l.scale : 1.0f;
    for (int d = 0; d < D; d++) {
      int partner = l.traditional ? d ^ 1 : (d + D / 2) % D;
      dst[d] = (src[d] * c[d] + src[partner] * s[d]) * factor;
    }
  }
  std::copy(y + (H + KV) * D, y + (H + 2 * KV) * D, v);
}

// Row m's position from a (rows,) int32 or int64 array, clamped into a table of `table` rows.
inline int64_t position(const mx::array& positions, int m, int64_t table) {
  int64_t index = m * positions.strides()[0];
  int64_t at = positions.dtype() == mx::int64 ? positions.data<int64_t>()[index] : positions.data<int32_t>()[index];
  return std::clamp<int64_t>(at, 0, table - 1);
}

}  // namespace plumbline
