// An MLX primitive: x @ dequantize(w).T for MLX's affine-quantized weights, on the CPU.
//
// MLX's own CPU kernel for `quantized_matmul` is scalar and single-threaded on x86-64 (its
// SIMD types are only defined for Apple's Accelerate), about 1.9 G multiply-adds per second
// here whatever the bit width, so quantized weights were slower than float32 on OpenBLAS.
// This computes the very same sum, sum_k x[m, k] * (scale * q + bias), with AVX-512 (or AVX2)
// over the pool's threads, for the few rows of a decode step.
//
// Layout (MLX's, `mx.quantize`): w is (N, K * bits / 32) uint32, each word holding 32 / bits
// consecutive values of one row, lowest bits first; scales and biases are (N, K / group)
// float32 or float16 (a GGUF file's own, read as they are: a sixth fewer bytes per step). x is
// (..., K) float32 (any strides), the output (..., N) float32.
//
// Each product can also transform its input rows first, sparing MLX's CPU graph the separate
// operations (each costs microseconds of scheduling in a decode step):
// - `norm`: x * rsqrt(mean(x^2) + eps) * norm, as mx.fast.rms_norm;
// - `swiglu`: x holds [gate | up] (2K wide), the input is silu(gate) * up;
// and add a `residual` (..., N) to its output.

#include <algorithm>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "common.h"
#include "qmm.h"
#include "mlx/allocator.h"
#include "mlx/array.h"
#include "mlx/backend/cpu/encoder.h"
#include "mlx/ops.h"
#include "mlx/primitives.h"

namespace mx = mlx::core;

namespace plumbline {
namespace {

struct Problem {
  const float* x;  // (M, K) prepared rows; for 4 bits, each chunk reordered (see `prepare`)
  const uint8_t* w;  // (N, K * bits / 8) bytes
  const float* scales;  // (N, K / group), from weight row `row_base` on
  const float* biases;
  int row_base;
  const uint16_t* half_scales;  // float16 (a GGUF file's own), or null: `scales` are given
  const uint16_t* half_biases;
  const float* residual;  // (M, N) contiguous, or null
  float* out;  // (M, N)
  int M, N, K, group, bits;

  void store(int m, int n, float value) const {
    size_t at = (size_t)m * N + n;
    out[at] = residual != nullptr ? residual[at] + value : value;
  }
};

// Rows of x handled together share each decoded weight vector: MT rows times NT weight rows,
// one accumulator each. Every output sums its chunks in the same order whatever the tile (and
// the thread), so a row's result never depends on the batch it is computed in.
template <int MT, int NT, int BITS>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma"))) void tile_avx512(
    const Problem& p, int m0, int n0) {
  __m512 acc[MT][NT];
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++) acc[i][j] = _mm512_setzero_ps();
  const int row_bytes = p.K * BITS / 8;
  const int groups = p.K / p.group;
  const __m512i low4 = _mm512_set1_epi32(0xF);
  for (int g = 0; g < groups; g++) {
    __m512 scale[NT], bias[NT];
    for (int j = 0; j < NT; j++) {
      scale[j] = _mm512_set1_ps(p.scales[(n0 + j - p.row_base) * groups + g]);
      bias[j] = _mm512_set1_ps(p.biases[(n0 + j - p.row_base) * groups + g]);
    }
    for (int k = g * p.group; k < (g + 1) * p.group; k += 32) {
      __m512 w0[NT], w1[NT];
      for (int j = 0; j < NT; j++) {
        const uint8_t* row = p.w + (size_t)(n0 + j) * row_bytes;
        __m512i q0, q1;
        if constexpr (BITS == 8) {
          q0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(row + k)));
          q1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(row + k + 16)));
        } else {
          // 16 bytes hold 32 values: low nibbles are the even positions, high nibbles the odd.
          __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)(row + k / 2)));
          q0 = _mm512_and_si512(bytes, low4);
          q1 = _mm512_srli_epi32(bytes, 4);
        }
        // scale * q + bias: exactly MLX's dequantized value.
        w0[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q0), scale[j], bias[j]);
        w1[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(q1), scale[j], bias[j]);
      }
      for (int i = 0; i < MT; i++) {
        const float* xr = p.x + (size_t)(m0 + i) * p.K + k;
        __m512 x0 = _mm512_loadu_ps(xr);
        __m512 x1 = _mm512_loadu_ps(xr + 16);
        for (int j = 0; j < NT; j++) acc[i][j] = _mm512_fmadd_ps(x1, w1[j], _mm512_fmadd_ps(x0, w0[j], acc[i][j]));
      }
    }
  }
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++)
      p.store(m0 + i, n0 + j, _mm512_reduce_add_ps(acc[i][j]));
}

// The same in 8-lane AVX2: each 32-value chunk in four 8-value parts. Two accumulators per
// output (the first and second 8 values of each 16), so that twice as many FMAs are in flight:
// with one, each accumulator was a chain of dependent FMAs (4 cycles each), which held a tile
// of four rows to half the FMA units' rate.
template <int MT, int NT, int BITS>
__attribute__((target("avx2,fma"))) void tile_avx2(const Problem& p, int m0, int n0) {
  __m256 acc[MT][NT], acc1[MT][NT];
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++) acc[i][j] = acc1[i][j] = _mm256_setzero_ps();
  const int row_bytes = p.K * BITS / 8;
  const int groups = p.K / p.group;
  const __m256i low4 = _mm256_set1_epi32(0xF);
  for (int g = 0; g < groups; g++) {
    __m256 scale[NT], bias[NT];
    for (int j = 0; j < NT; j++) {
      scale[j] = _mm256_set1_ps(p.scales[(n0 + j - p.row_base) * groups + g]);
      bias[j] = _mm256_set1_ps(p.biases[(n0 + j - p.row_base) * groups + g]);
    }
    for (int k = g * p.group; k < (g + 1) * p.group; k += 16) {
      __m256 w0[NT], w1[NT];
      for (int j = 0; j < NT; j++) {
        const uint8_t* row = p.w + (size_t)(n0 + j) * row_bytes;
        __m256i q0, q1;
        if constexpr (BITS == 8) {
          q0 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(row + k)));
          q1 = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(row + k + 8)));
        } else {
          // 8 bytes: 16 values of a 32-value chunk, whose x is reordered evens then odds;
          // see `prepare` for which halves of the chunk these are.
          __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(row + k / 2)));
          q0 = _mm256_and_si256(bytes, low4);
          q1 = _mm256_srli_epi32(bytes, 4);
        }
        w0[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q0), scale[j], bias[j]);
        w1[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(q1), scale[j], bias[j]);
      }
      for (int i = 0; i < MT; i++) {
        const float* xr = p.x + (size_t)(m0 + i) * p.K + k;
        __m256 x0 = _mm256_loadu_ps(xr);
        __m256 x1 = _mm256_loadu_ps(xr + 8);
        for (int j = 0; j < NT; j++) {
          acc[i][j] = _mm256_fmadd_ps(x0, w0[j], acc[i][j]);
          acc1[i][j] = _mm256_fmadd_ps(x1, w1[j], acc1[i][j]);
        }
      }
    }
  }
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++)
      p.store(m0 + i, n0 + j, hsum_avx2(_mm256_add_ps(acc[i][j], acc1[i][j])));
}

// Weight rows per tile, by rows of x per tile: accumulators, decoded weights, scales and x
// within the registers (AVX-512 has 32, AVX2 16). Measured on SmolLM2's shapes, 4 x 4 tiles
// beat 8 x 2 ones (46 against 38 G multiply-adds/s on one core): 8-row tiles are not used.
template <int MT, bool WIDE>
constexpr int weight_rows() {
  if constexpr (WIDE) return 4;
  return MT == 1 ? 2 : 1;
}

template <int MT, int BITS, bool WIDE>
void tiles(const Problem& p, int m0, int n_begin, int n_end) {
  constexpr int NT = weight_rows<MT, WIDE>();
  int n = n_begin;
  for (; n + NT <= n_end; n += NT) {
    if constexpr (WIDE)
      tile_avx512<MT, NT, BITS>(p, m0, n);
    else
      tile_avx2<MT, NT, BITS>(p, m0, n);
  }
  for (; n < n_end; n++) {
    if constexpr (WIDE)
      tile_avx512<MT, 1, BITS>(p, m0, n);
    else
      tile_avx2<MT, 1, BITS>(p, m0, n);
  }
}

template <int BITS, bool WIDE>
void rows(const Problem& p, int n_begin, int n_end) {
  int m = 0;
  for (; m + 4 <= p.M; m += 4) tiles<4, BITS, WIDE>(p, m, n_begin, n_end);
  switch (p.M - m) {
    case 3: tiles<3, BITS, WIDE>(p, m, n_begin, n_end); break;
    case 2: tiles<2, BITS, WIDE>(p, m, n_begin, n_end); break;
    case 1: tiles<1, BITS, WIDE>(p, m, n_begin, n_end); break;
    default: break;
  }
}

// Weight rows per chunk of work a thread claims (a multiple of every tile's rows).
constexpr int kChunkRows = 64;

// float16 to float32, 16 (or 8) at a time.
__attribute__((target("avx512f,f16c"))) void widen_avx512(const uint16_t* in, float* out, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)(in + i))));
  for (; i < n; i++) out[i] = _cvtsh_ss(in[i]);
}

__attribute__((target("avx2,f16c"))) void widen_avx2(const uint16_t* in, float* out, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(in + i))));
  for (; i < n; i++) out[i] = _cvtsh_ss(in[i]);
}

void run_chunk(const void* context, int chunk) {
  const Problem& p = *static_cast<const Problem*>(context);
  int begin = chunk * kChunkRows, end = std::min(p.N, begin + kChunkRows);
  bool wide = detect() == Isa::avx512;
  Problem q = p;
  // float16 scales are widened per chunk into a buffer that stays in the core's cache: one
  // vector conversion per 16 values instead of a scalar one per group and weight row.
  thread_local std::vector<float> widened;
  if (p.half_scales != nullptr) {
    int groups = p.K / p.group, count = (end - begin) * groups;
    widened.resize(2 * (size_t)count);
    auto widen = wide ? widen_avx512 : widen_avx2;
    widen(p.half_scales + (size_t)begin * groups, widened.data(), count);
    widen(p.half_biases + (size_t)begin * groups, widened.data() + count, count);
    q.scales = widened.data();
    q.biases = widened.data() + count;
    q.row_base = begin;
  }
  if (p.bits == 8)
    wide ? rows<8, true>(q, begin, end) : rows<8, false>(q, begin, end);
  else
    wide ? rows<4, true>(q, begin, end) : rows<4, false>(q, begin, end);
}

}  // namespace

void transform_row(const View& x, const Transform& t, int m, int K, std::vector<float>& row) {
  int width = t.swiglu ? 2 * K : K;
  row.resize(width);
  x.row(m, width, row.data());
  if (t.swiglu) {
    // silu(gate) * up, with silu(g) = g * sigmoid(g) = g / (1 + e^-g), as nn.silu.
    std::vector<float> e(K);
    for (int k = 0; k < K; k++) e[k] = -row[k];
    exp_inplace(e.data(), K);
    for (int k = 0; k < K; k++) row[k] = row[k] * (1.0f / (1.0f + e[k])) * row[K + k];
  }
  if (t.norm != nullptr) {
    float sum = 0;
    for (int k = 0; k < K; k++) sum += row[k] * row[k];
    float scale = 1.0f / std::sqrt(sum / K + t.eps);
    for (int k = 0; k < K; k++) row[k] = t.norm[k] * (row[k] * scale);
  }
}

namespace {

// The kernel's input rows: read through their strides, transformed, and for 4 bits each chunk
// of values reordered to line up with the decoded nibbles: AVX-512 decodes 16 bytes into the
// 16 even then the 16 odd positions of 32 values; AVX2 decodes 8 bytes, so per 16 values the 8
// even then the 8 odd positions.
void prepare(const View& x, const Transform& t, int M, int K, int bits, float* out) {
  std::vector<float> row;
  int span = bits == 4 ? (detect() == Isa::avx512 ? 16 : 8) : 0;
  for (int m = 0; m < M; m++) {
    transform_row(x, t, m, K, row);
    float* o = out + (size_t)m * K;
    if (span == 0) {
      std::memcpy(o, row.data(), sizeof(float) * K);
      continue;
    }
    for (int k = 0; k < K; k += 2 * span) {
      for (int i = 0; i < span; i++) {
        o[k + i] = row[k + 2 * i];
        o[k + span + i] = row[k + 2 * i + 1];
      }
    }
  }
}

class QuantizedMatmul : public mx::UnaryPrimitive {
 public:
  QuantizedMatmul(mx::Stream stream, int group, int bits, bool norm, float eps, bool swiglu, bool residual,
                  int activations)
      : mx::UnaryPrimitive(stream),
        group_(group),
        bits_(bits),
        norm_(norm),
        eps_(eps),
        swiglu_(swiglu),
        residual_(residual),
        activations_(activations) {}

  void eval_cpu(const std::vector<mx::array>& inputs, mx::array& out) override {
    const mx::array &w = inputs[1], &scales = inputs[2], &biases = inputs[3];
    for (size_t i = 1; i < 4; i++) {
      if (!inputs[i].flags().row_contiguous) throw std::runtime_error("plumbline qmm: weights must be row contiguous");
    }
    out.set_data(mx::allocator::malloc(out.nbytes()));
    auto& encoder = mx::cpu::get_command_encoder(stream());
    for (const auto& a : inputs) encoder.set_input_array(a);
    encoder.set_output_array(out);
    int K = weight_columns(w.shape(1), group_, bits_), N = w.shape(0);
    int M = static_cast<int>(out.size() / N);
    size_t next = 4;
    if (norm_ && !inputs[next].flags().row_contiguous)
      throw std::runtime_error("plumbline qmm: the norm weight must be row contiguous");
    const float* norm = norm_ ? inputs[next++].data<float>() : nullptr;
    std::optional<View> residual;
    if (residual_) residual.emplace(inputs[next++]);
    Weights weights{w.data<uint8_t>(), scales.data<void>(), biases.data<void>(), scales.dtype() == mx::float16,
                    N, K, group_, bits_};
    encoder.dispatch([x = View(inputs[0]), t = Transform{norm, eps_, swiglu_, activations_}, weights,
                      residual = std::move(residual), op = out.data<float>(), M]() {
      std::vector<float> added;
      const float* add = nullptr;
      if (residual && residual->contiguous) {
        add = residual->data;
      } else if (residual) {
        added.resize((size_t)M * weights.N);
        for (int m = 0; m < M; m++) residual->row(m, weights.N, added.data() + (size_t)m * weights.N);
        add = added.data();
      }
      quantized_product(x, t, weights, M, add, op);
    });
  }

  void eval_gpu(const std::vector<mx::array>&, mx::array&) override {
    throw std::runtime_error("plumbline qmm runs on the CPU only");
  }

  const char* name() const override {
    return "PlumblineQuantizedMatmul";
  }

  bool is_equivalent(const mx::Primitive& other) const override {
    auto* o = dynamic_cast<const QuantizedMatmul*>(&other);
    return o != nullptr && o->group_ == group_ && o->bits_ == bits_ && o->norm_ == norm_ && o->eps_ == eps_ &&
        o->swiglu_ == swiglu_ && o->residual_ == residual_ && o->activations_ == activations_;
  }

  std::vector<mx::Shape> output_shapes(const std::vector<mx::array>& inputs) override {
    mx::Shape shape = inputs[0].shape();
    shape.back() = inputs[1].shape(0);
    return {shape};
  }

 private:
  int group_, bits_;
  bool norm_;
  float eps_;
  bool swiglu_, residual_;
  int activations_;
};

}  // namespace

void quantized_product(const View& x, const Transform& t, const Weights& w, int M, const float* residual,
                       float* out) {
  if (w.group == 0) return block_product(x, t, w, M, residual, out);
  if (t.activations != 0 && integer_product(x, t, w, M, residual, out)) return;
  Problem p{x.data,
            w.w,
            w.half ? nullptr : static_cast<const float*>(w.scales),
            w.half ? nullptr : static_cast<const float*>(w.biases),
            0,
            w.half ? static_cast<const uint16_t*>(w.scales) : nullptr,
            w.half ? static_cast<const uint16_t*>(w.biases) : nullptr,
            residual,
            out,
            M,
            w.N,
            w.K,
            w.group,
            w.bits};
  std::vector<float> rows;
  if (w.bits == 4 || !x.contiguous || t.norm != nullptr || t.swiglu) {
    rows.resize((size_t)M * w.K);
    prepare(x, t, M, w.K, w.bits, rows.data());
    p.x = rows.data();
  }
  pool().run((w.N + kChunkRows - 1) / kChunkRows, run_chunk, &p);
}

mx::array quantized_matmul(const mx::array& x, const mx::array& w, const mx::array& scales,
                           const mx::array& biases, int group_size, int bits,
                           const std::optional<mx::array>& norm, float eps, bool swiglu,
                           const std::optional<mx::array>& residual, int activations) {
  if (x.dtype() != mx::float32) throw std::invalid_argument("plumbline qmm: x must be float32");
  if (x.ndim() < 1) throw std::invalid_argument("plumbline qmm: x must have at least one dimension");
  if (group_size == 0) {
    // GGML block rows (blocks.cpp); scales and biases are not read.
    if (block_bytes(bits) == 0) throw std::invalid_argument("plumbline qmm: unknown GGML block type");
    if (w.dtype() != mx::uint8 || w.ndim() != 2 || w.shape(1) % block_unit(bits) != 0)
      throw std::invalid_argument("plumbline qmm: block rows must be (N, K / 32 * block bytes) uint8");
  } else {
    if (bits != 4 && bits != 8) throw std::invalid_argument("plumbline qmm: bits must be 4 or 8");
    if (group_size % 32 != 0) throw std::invalid_argument("plumbline qmm: group size must be a multiple of 32");
    if ((scales.dtype() != mx::float32 && scales.dtype() != mx::float16) || biases.dtype() != scales.dtype())
      throw std::invalid_argument("plumbline qmm: scales and biases must be both float32 or float16");
    if (w.dtype() != mx::uint32 || w.ndim() != 2 || scales.ndim() != 2 || biases.shape() != scales.shape())
      throw std::invalid_argument("plumbline qmm: w must be (N, K * bits / 32) uint32, scales (N, K / group)");
  }
  int K = weight_columns(w.shape(1), group_size, bits);
  if (x.shape(-1) != (swiglu ? 2 * K : K) ||
      (group_size != 0 &&
       (K % group_size != 0 || scales.shape(1) * group_size != K || scales.shape(0) != w.shape(0))))
    throw std::invalid_argument("plumbline qmm: shapes do not match");
  auto stream = mx::default_stream(mx::Device::cpu);
  mx::Shape shape = x.shape();
  shape.back() = w.shape(0);
  std::vector<mx::array> inputs = {x, w, scales, biases};
  if (norm) {
    if (norm->dtype() != mx::float32 || norm->ndim() != 1 || norm->shape(0) != K)
      throw std::invalid_argument("plumbline qmm: the norm weight must be (K,) float32");
    inputs.push_back(*norm);
  }
  if (residual) {
    if (residual->dtype() != mx::float32 || residual->shape() != shape)
      throw std::invalid_argument("plumbline qmm: the residual must be float32 of the output's shape");
    inputs.push_back(*residual);
  }
  return mx::array(
      shape, mx::float32,
      std::make_shared<QuantizedMatmul>(stream, group_size, bits, norm.has_value(), eps, swiglu, residual.has_value(),
                                        activations),
      std::move(inputs));
}

}  // namespace plumbline
