// An MLX primitive: attention of one query position per row (a decode step) over a KV cache.
//
// In MLX's CPU graph a decode step's attention is a slice of each cache buffer, a transpose,
// two matmuls, a masked select and a softmax whose exp runs one element at a time: nine
// operations per layer, each paying microseconds of scheduling, and at 8 rows x 260 positions
// the exps alone took about 7 ms of a step over 30 layers. This reads the cache buffers in
// place (the first `length` positions, from each row's `left_padding` on: the positions a
// left-padded batch row masks out are skipped, which gives the same result as weighting them
// by exactly zero), with a vectorised exp, over the pool's threads.
//
// queries (B, KV, G, D): the grouped heads of each KV head, already scaled; keys and values
// (B, KV, capacity, D), any strides; left_padding (B,) integers or absent; out (B, KV, G, D).

#include <algorithm>
#include <cstring>
#include <limits>
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

namespace mx = mlx::core;

namespace plumbline {
namespace {

// Position s of row b, head h: D floats, copied into `scratch` unless they are contiguous.
const float* at(const CacheView& c, int b, int h, int s, int D, float* scratch) {
  const float* p = c.data + b * c.stride_b + h * c.stride_h + s * c.stride_s;
  if (c.stride_d == 1) return p;
  for (int d = 0; d < D; d++) scratch[d] = p[d * c.stride_d];
  return scratch;
}

struct Problem {
  const float* queries;  // contiguous (B, KV, G, D)
  CacheView keys, values;
  const int* starts;  // per row: the first position it attends to
  float* out;
  int B, KV, G, D, length;
  const int* lengths;  // per row: the end of its positions, or null (`length` for every row)
};

__attribute__((target("avx512f,avx512dq,fma"))) float dot_avx512(const float* a, const float* b, int D) {
  __m512 acc = _mm512_setzero_ps();
  int d = 0;
  for (; d + 16 <= D; d += 16) acc = _mm512_fmadd_ps(_mm512_loadu_ps(a + d), _mm512_loadu_ps(b + d), acc);
  float sum = _mm512_reduce_add_ps(acc);
  for (; d < D; d++) sum += a[d] * b[d];
  return sum;
}

__attribute__((target("avx512f,avx512dq,fma"))) void axpy_avx512(float w, const float* x, float* y, int D) {
  __m512 wv = _mm512_set1_ps(w);
  int d = 0;
  for (; d + 16 <= D; d += 16) _mm512_storeu_ps(y + d, _mm512_fmadd_ps(wv, _mm512_loadu_ps(x + d), _mm512_loadu_ps(y + d)));
  for (; d < D; d++) y[d] += w * x[d];
}

// Each of `rows` rows of `count` scores becomes its softmax, in place.
void softmax_rows(float* scores, int rows, int count) {
  for (int g = 0; g < rows; g++) {
    float* row = scores + (size_t)g * count;
    float peak = *std::max_element(row, row + count);
    for (int s = 0; s < count; s++) row[s] -= peak;
    exp_inplace(row, count);
    float total = 0;
    for (int s = 0; s < count; s++) total += row[s];
    float inverse = 1.0f / total;
    for (int s = 0; s < count; s++) row[s] *= inverse;
  }
}

__attribute__((target("avx2,fma"))) float dot_avx2(const float* a, const float* b, int D) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int d = 0;
  for (; d + 16 <= D; d += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d + 8), _mm256_loadu_ps(b + d + 8), acc1);
  }
  for (; d + 8 <= D; d += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + d), _mm256_loadu_ps(b + d), acc0);
  float sum = hsum_avx2(_mm256_add_ps(acc0, acc1));
  for (; d < D; d++) sum += a[d] * b[d];
  return sum;
}

__attribute__((target("avx2,fma"))) void axpy_avx2(float w, const float* x, float* y, int D) {
  __m256 wv = _mm256_set1_ps(w);
  int d = 0;
  for (; d + 8 <= D; d += 8) _mm256_storeu_ps(y + d, _mm256_fmadd_ps(wv, _mm256_loadu_ps(x + d), _mm256_loadu_ps(y + d)));
  for (; d < D; d++) y[d] += w * x[d];
}

float dot_plain(const float* a, const float* b, int D) {
  float sum = 0;
  for (int d = 0; d < D; d++) sum += a[d] * b[d];
  return sum;
}

void axpy_plain(float w, const float* x, float* y, int D) {
  for (int d = 0; d < D; d++) y[d] += w * x[d];
}

// The common shape (head dimension 64, up to 4 queries per KV head: SmolLM2 has 3) with the
// queries and the output accumulators in registers: each key and value row is loaded once for
// all the group's queries.
template <int G>
__attribute__((target("avx512f,avx512dq,fma"))) void attend_64(const Problem& p, int b, int h, int start, int count,
                                                               float* scores, float* scratch, float* out) {
  const float* q = p.queries + ((size_t)b * p.KV + h) * G * 64;
  __m512 qv[G][4];
  for (int g = 0; g < G; g++)
    for (int c = 0; c < 4; c++) qv[g][c] = _mm512_loadu_ps(q + g * 64 + c * 16);
  for (int s = 0; s < count; s++) {
    const float* k = at(p.keys, b, h, start + s, 64, scratch);
    __m512 k0 = _mm512_loadu_ps(k), k1 = _mm512_loadu_ps(k + 16), k2 = _mm512_loadu_ps(k + 32),
           k3 = _mm512_loadu_ps(k + 48);
    for (int g = 0; g < G; g++) {
      __m512 acc = _mm512_mul_ps(qv[g][0], k0);
      acc = _mm512_fmadd_ps(qv[g][1], k1, acc);
      acc = _mm512_fmadd_ps(qv[g][2], k2, acc);
      acc = _mm512_fmadd_ps(qv[g][3], k3, acc);
      scores[(size_t)g * count + s] = _mm512_reduce_add_ps(acc);
    }
  }
  softmax_rows(scores, G, count);
  __m512 acc[G][4];
  for (int g = 0; g < G; g++)
    for (int c = 0; c < 4; c++) acc[g][c] = _mm512_setzero_ps();
  for (int s = 0; s < count; s++) {
    const float* v = at(p.values, b, h, start + s, 64, scratch);
    __m512 v0 = _mm512_loadu_ps(v), v1 = _mm512_loadu_ps(v + 16), v2 = _mm512_loadu_ps(v + 32),
           v3 = _mm512_loadu_ps(v + 48);
    for (int g = 0; g < G; g++) {
      __m512 w = _mm512_set1_ps(scores[(size_t)g * count + s]);
      acc[g][0] = _mm512_fmadd_ps(w, v0, acc[g][0]);
      acc[g][1] = _mm512_fmadd_ps(w, v1, acc[g][1]);
      acc[g][2] = _mm512_fmadd_ps(w, v2, acc[g][2]);
      acc[g][3] = _mm512_fmadd_ps(w, v3, acc[g][3]);
    }
  }
  for (int g = 0; g < G; g++)
    for (int c = 0; c < 4; c++) _mm512_storeu_ps(out + g * 64 + c * 16, acc[g][c]);
}

// One (row, KV head): its G queries against the row's positions.
void attend_chunk(const void* context, int chunk) {
  const Problem& p = *static_cast<const Problem*>(context);
  int b = chunk / p.KV, h = chunk % p.KV;
  int start = p.starts[b], count = (p.lengths != nullptr ? p.lengths[b] : p.length) - start;
  bool wide = detect() == Isa::avx512;
  // AVX2 otherwise: the kernels are built only for CPUs with one of the two (kernels.py).
  auto dot = wide ? dot_avx512 : dot_avx2;
  auto axpy = wide ? axpy_avx512 : axpy_avx2;
  std::vector<float> scores((size_t)std::max(count, 0) * p.G), scratch(p.D);
  const float* q = p.queries + ((size_t)b * p.KV + h) * p.G * p.D;
  float* out = p.out + ((size_t)b * p.KV + h) * p.G * p.D;
  std::memset(out, 0, sizeof(float) * p.G * p.D);
  if (count <= 0) return;  // nothing to attend to: zeros (MLX's softmax would give NaN)
  if (wide && p.D == 64 && p.G <= 4) {
    switch (p.G) {
      case 1: return attend_64<1>(p, b, h, start, count, scores.data(), scratch.data(), out);
      case 2: return attend_64<2>(p, b, h, start, count, scores.data(), scratch.data(), out);
      case 3: return attend_64<3>(p, b, h, start, count, scores.data(), scratch.data(), out);
      default: return attend_64<4>(p, b, h, start, count, scores.data(), scratch.data(), out);
    }
  }
  for (int s = 0; s < count; s++) {
    const float* k = at(p.keys, b, h, start + s, p.D, scratch.data());
    for (int g = 0; g < p.G; g++) scores[(size_t)g * count + s] = dot(q + g * p.D, k, p.D);
  }
  softmax_rows(scores.data(), p.G, count);
  for (int s = 0; s < count; s++) {
    const float* v = at(p.values, b, h, start + s, p.D, scratch.data());
    for (int g = 0; g < p.G; g++) axpy(scores[(size_t)g * count + s], v, out + g * p.D, p.D);
  }
}

class DecodeAttention : public mx::UnaryPrimitive {
 public:
  DecodeAttention(mx::Stream stream, int length, bool padded)
      : mx::UnaryPrimitive(stream), length_(length), padded_(padded) {}

  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override {
    const mx::array &queries = inputs[0], &keys = inputs[1], &values = inputs[2];
    out.set_data(mx::allocator::malloc(out.nbytes()));
    auto& encoder = mx::cpu::get_command_encoder(stream());
    for (const auto& a : inputs) encoder.set_input_array(a);
    encoder.set_output_array(out);
    int B = queries.shape(0), KV = queries.shape(1), G = queries.shape(2), D = queries.shape(3);
    std::vector<int> starts(B, 0);
    std::optional<mx::array> padding;
    if (padded_) padding = inputs[3];
    encoder.dispatch([q = queries, keys = CacheView(keys), values = CacheView(values), padding = std::move(padding),
                      starts = std::move(starts), op = out.data<float>(), B, KV, G, D, length = length_]() mutable {
      if (padding) {
        for (int b = 0; b < B; b++) {
          int64_t value = padding->dtype() == mx::int64 ? padding->data<int64_t>()[b] : padding->data<int32_t>()[b];
          starts[b] = static_cast<int>(std::clamp<int64_t>(value, 0, length));
        }
      }
      std::vector<float> gathered;
      const float* qp = q.data<float>();
      if (!q.flags().row_contiguous) {
        gathered.resize(q.size());
        const auto& shape = q.shape();
        const auto& strides = q.strides();
        size_t i = 0;
        for (int b = 0; b < shape[0]; b++)
          for (int h = 0; h < shape[1]; h++)
            for (int g = 0; g < shape[2]; g++)
              for (int d = 0; d < shape[3]; d++)
                gathered[i++] = qp[b * strides[0] + h * strides[1] + g * strides[2] + d * strides[3]];
        qp = gathered.data();
      }
      attend(qp, keys, values, starts.data(), op, B, KV, G, D, length);
    });
  }

  void eval_gpu(const std::vector<mx::array>&, mx::array&) override {
    throw std::runtime_error("plumbline attention runs on the CPU only");
  }

  const char* name() const override {
    return "PlumblineDecodeAttention";
  }

  bool is_equivalent(const mx::Primitive& other) const override {
    auto* o = dynamic_cast<const DecodeAttention*>(&other);
    return o != nullptr && o->length_ == length_ && o->padded_ == padded_;
  }

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    return {inputs[0].shape()};
  }

 private:
  int length_;
  bool padded_;
};

}  // namespace

void attend(const float* queries, const CacheView& keys, const CacheView& values, const int* starts, float* out,
            int B, int KV, int G, int D, int length, const int* lengths) {
  Problem p{queries, keys, values, starts, out, B, KV, G, D, length, lengths};
  pool().run(B * KV, attend_chunk, &p);
}

mx::array decode_attention(const mx::array& queries, const mx::array& keys, const mx::array& values, int length,
                           const std::optional<mx::array>& left_padding) {
  if (queries.dtype() != mx::float32 || keys.dtype() != mx::float32 || values.dtype() != mx::float32)
    throw std::invalid_argument("plumbline attention: float32 only");
  if (queries.ndim() != 4 || keys.ndim() != 4 || values.shape() != keys.shape())
    throw std::invalid_argument("plumbline attention: queries (B, KV, G, D), keys and values (B, KV, S, D)");
  if (keys.shape(0) != queries.shape(0) || keys.shape(1) != queries.shape(1) || keys.shape(3) != queries.shape(3))
    throw std::invalid_argument("plumbline attention: the cache does not match the queries");
  if (length < 0 || length > keys.shape(2)) throw std::invalid_argument("plumbline attention: bad length");
  std::vector<mx::array> inputs = {queries, keys, values};
  if (left_padding) {
    if (left_padding->ndim() != 1 || left_padding->shape(0) != queries.shape(0) ||
        (left_padding->dtype() != mx::int32 && left_padding->dtype() != mx::int64))
      throw std::invalid_argument("plumbline attention: left_padding must be (B,) int32 or int64");
    inputs.push_back(*left_padding);
  }
  auto stream = mx::default_stream(mx::Device::cpu);
  return mx::array(queries.shape(), mx::float32,
                   std::make_shared<DecodeAttention>(stream, length, left_padding.has_value()), std::move(inputs));
}

}  // namespace plumbline
