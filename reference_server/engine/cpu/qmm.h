// The quantized product of qmm.cpp, for the primitives built on it (projection.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "mlx/array.h"

namespace plumbline {

namespace mx = mlx::core;

// A strided view's element: offset of row `row` (all axes but the last) in elements.
struct View {
  const float* data;
  std::vector<int> shape;
  std::vector<int64_t> strides;
  bool contiguous;

  explicit View(const mx::array& a)
      : data(a.data<float>()),
        shape(a.shape().begin(), a.shape().end()),
        strides(a.strides().begin(), a.strides().end()),
        contiguous(a.flags().row_contiguous) {}

  // Contiguous rows of `width` floats.
  View(const float* rows_data, int rows, int width)
      : data(rows_data), shape{rows, width}, strides{width, 1}, contiguous(true) {}

  void row(int64_t index, int width, float* out) const {
    if (contiguous) {
      std::memcpy(out, data + index * width, sizeof(float) * width);
      return;
    }
    int64_t offset = 0, rest = index;
    for (int axis = static_cast<int>(shape.size()) - 2; axis >= 0; axis--) {
      offset += (rest % shape[axis]) * strides[axis];
      rest /= shape[axis];
    }
    int64_t step = strides.back();
    for (int k = 0; k < width; k++) out[k] = data[offset + k * step];
  }
};

struct Transform {
  const float* norm;  // RMS norm weight (K), or null
  float eps;
  bool swiglu;
  // 0: multiply the float rows; 8: round the transformed rows to int8 per 32 values first and
  // multiply in integers (qmm_int8.cpp), where the CPU has AVX-512 VNNI.
  int activations = 0;
};

// Row m of x, transformed (SwiGLU, then RMS norm), into row[0, K) (`row` is resized).
void transform_row(const View& x, const Transform& t, int m, int K, std::vector<float>& row);

// GGML block types (blocks.cpp): Weights with group 0 hold rows of these blocks, `bits` the type;
// kBlockQ5_0Pairs (ours, not GGML's) is Q5_0 with each two blocks' bytes regrouped.
enum BlockKind : int {
  kBlockQ4_0 = 2,
  kBlockQ4_1 = 3,
  kBlockQ5_0 = 6,
  kBlockQ5_1 = 7,
  kBlockQ8_0 = 8,
  kBlockQ5_0Pairs = 106
};
// Bytes of one 32-weight block of `kind`; 0 for anything else.
int block_bytes(int kind);

// The weights of one product: MLX's affine layout (see qmm.cpp), scales and biases float32 or
// float16 (`half`); or with `group` 0, rows of GGML blocks of type `bits` (scales and biases
// unused).
struct Weights {
  const uint8_t* w;
  const void* scales;
  const void* biases;
  bool half;
  int N, K, group, bits;
};

// out (M, N) = [residual +] transform(x) @ dequantize(w).T, over the pool's threads. Runs in
// the calling thread (a dispatched task of MLX's CPU stream).
// The product on integer input rows (qmm_int8.cpp); false, having done nothing, where the CPU
// lacks AVX-512 VNNI or the group size is not 32, 64 or 128.
bool integer_product(const View& x, const Transform& t, const Weights& w, int M, const float* residual, float* out);
bool vnni_available();
bool int8_eight_bit();

// out = [residual +] transform(x) @ blocks.T on int8 input rows (blocks.cpp); w.group is 0.
void block_product(const View& x, const Transform& t, const Weights& w, int M, const float* residual, float* out);

// Bytes of the smallest whole unit of block rows of `kind` (a pair of blocks for kBlockQ5_0Pairs).
inline int block_unit(int kind) {
  return block_bytes(kind) * (kind == kBlockQ5_0Pairs ? 2 : 1);
}

// K of a weight array: its columns of 32-bit words (MLX's layout) or bytes (block rows).
inline int weight_columns(int64_t columns, int group, int bits) {
  return group == 0 ? static_cast<int>(columns / block_bytes(bits) * 32) : static_cast<int>(columns * 32 / bits);
}

void quantized_product(const View& x, const Transform& t, const Weights& w, int M, const float* residual,
                       float* out);

}  // namespace plumbline
