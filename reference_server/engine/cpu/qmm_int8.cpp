// The quantized product with int8 activations (qmm.h's `integer_product`): AVX-512 VNNI, or
// AVX2 (`vpmaddubsw`, as llama.cpp's AVX2 kernels) where the CPU has no VNNI.
//
// The float kernel (qmm.cpp) widens every 4-bit weight to a float and multiplies it in float:
// about ten instructions per 32 weights per row of x, which made the products most of a decode
// step. Here each 32 input values (a block) are rounded to int8 with a scale of their own,
// xq = round(x / dx), dx = max|x| / 127, as llama.cpp's q8_1 activations are, and
//   sum_k x_k (s q_k + b) ~ s dx sum_k xq_k q_k + b sum_k x_k
// per block: the integer sums are `vpdpbusd` (64 products of unsigned weight bytes and signed
// activation bytes per instruction), and sum_k x_k is taken of the rounded values too, so the
// result is exactly the rounded x times the dequantized weights. The only error is the rounding
// of x to 8 bits (1/254 of the block's largest value at most), the same as llama.cpp's; rows
// are quantized one by one, so a row's result never depends on its batch.
//
// Weights stay in MLX's layout. 4 bits: 64 bytes hold four blocks; their low nibbles are the
// blocks' even positions, the high nibbles the odd ones, so the activations of 128 values are
// laid out as [evens of blocks 0..3 | odds of blocks 0..3] (16 bytes a block) and each 32-bit
// lane of the products belongs to one block (lanes 4b..4b+3). 8 bits: 64 bytes are two blocks
// in order (lanes 8b..8b+7).
//
// AVX2 reads the same layouts 32 bytes at a time. 4 bits: the first 32 bytes of a superblock are
// blocks 0 and 1 (evens at activation bytes 0..31, odds at 64..95), the next 32 blocks 2 and 3;
// `vpmaddubsw` multiplies weight nibbles by activation bytes and adds pairs (a pair of one
// block: at most 2 * 15 * 127, no saturation), `vpmaddwd` by ones sums four, so lanes 0-3 are the
// first block's and 4-7 the second's, the very lanes of the dx vector. 8 bits: a weight byte
// (0..255) times an activation could saturate a pair, so the weight is taken as q - 128 (signed):
// |q - 128| times the activation carrying q - 128's sign, and 128 * sum(x) goes to the bias term
// (b + 128 s per group).

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "common.h"
#include "qmm.h"

namespace plumbline {
namespace {

bool has_vnni() {
  static const bool vnni = detect() == Isa::avx512 && __builtin_cpu_supports("avx512vnni");
  return vnni;
}

// The AVX2 tiles: where there is no VNNI.
bool use_avx2() {
  static const bool avx2 = !has_vnni();
  return avx2;
}

// A superblock: the values one 64-byte weight load covers.
constexpr int superblock(int bits) {
  return bits == 4 ? 128 : 64;
}

// x, prepared: per row, the int8 values (`stride` bytes, superblock order, zero-padded), per
// superblock a vector of each lane's block scale dx (zero past K), and per group the sum of the
// row's values (zero-padded to a multiple of 16 groups).
struct Activations {
  std::vector<int8_t> q;
  std::vector<float> dx;
  std::vector<float> sums;
  int stride, superblocks, groups, padded_groups;
};

struct Problem {
  const Activations* x;
  const uint8_t* w;
  const float* scales;  // (N, groups), from weight row `row_base` on
  const float* biases;
  int row_base;
  const uint16_t* half_scales;
  const uint16_t* half_biases;
  const float* residual;
  float* out;
  int M, N, K, group, bits;
};

// Which group (relative to the superblock's first) each 32-bit lane's block is in.
__attribute__((target("avx512f"))) __m512i lane_groups(int bits, int group) {
  alignas(64) int index[16];
  int lanes_per_block = bits == 4 ? 4 : 8;
  for (int l = 0; l < 16; l++) index[l] = (32 * (l / lanes_per_block)) / group;
  return _mm512_load_si512(index);
}

template <int MT, int NT, int BITS>
__attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,fma"))) void tile(const Problem& p, int m0,
                                                                                       int n0) {
  const Activations& x = *p.x;
  constexpr int SB = superblock(BITS);
  const int row_bytes = p.K * BITS / 8;
  const int groups = p.K / p.group;
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  const __m512i index = lane_groups(BITS, p.group);
  // Groups per superblock (at least 1: a 128-value group spans two 8-bit superblocks).
  const int per_superblock = std::max(1, SB / p.group);
  __m512 acc[MT][NT];
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++) acc[i][j] = _mm512_setzero_ps();
  for (int sb = 0; sb < x.superblocks; sb++) {
    const int k0 = sb * SB;
    const int values = std::min(SB, p.K - k0);
    const int first_group = k0 / p.group;
    const int count = std::min(per_superblock, groups - first_group);
    const __mmask16 group_mask = static_cast<__mmask16>((1u << count) - 1);
    const int bytes = values * BITS / 8;
    const __mmask64 byte_mask = bytes >= 64 ? ~__mmask64(0) : ((__mmask64(1) << bytes) - 1);
    __m512i w_lo[NT], w_hi[NT];
    __m512 scale[NT];
    for (int j = 0; j < NT; j++) {
      const uint8_t* row = p.w + (size_t)(n0 + j) * row_bytes + k0 * BITS / 8;
      __m512i raw = _mm512_maskz_loadu_epi8(byte_mask, row);
      if constexpr (BITS == 4) {
        w_lo[j] = _mm512_and_si512(raw, low4);
        w_hi[j] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low4);
      } else {
        w_lo[j] = raw;
      }
      __m512 s = _mm512_maskz_loadu_ps(group_mask, p.scales + (size_t)(n0 + j - p.row_base) * groups + first_group);
      scale[j] = _mm512_permutexvar_ps(index, s);
    }
    for (int i = 0; i < MT; i++) {
      const int8_t* xq = x.q.data() + (size_t)(m0 + i) * x.stride + k0;
      const __m512 dx = _mm512_loadu_ps(x.dx.data() + ((size_t)(m0 + i) * x.superblocks + sb) * 16);
      __m512i x_lo = _mm512_loadu_si512(xq);
      __m512i x_hi;
      if constexpr (BITS == 4) x_hi = _mm512_loadu_si512(xq + 64);
      for (int j = 0; j < NT; j++) {
        __m512i dot = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w_lo[j], x_lo);
        if constexpr (BITS == 4) dot = _mm512_dpbusd_epi32(dot, w_hi[j], x_hi);
        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(scale[j], dx), acc[i][j]);
      }
    }
  }
  // The bias terms, sum_g b_g * (sum of the group's x), into the same accumulators.
  for (int j = 0; j < NT; j++) {
    const float* b = p.biases + (size_t)(n0 + j - p.row_base) * groups;
    for (int g = 0; g < groups; g += 16) {
      const __mmask16 mask = static_cast<__mmask16>(groups - g >= 16 ? 0xFFFF : (1u << (groups - g)) - 1);
      __m512 bias = _mm512_maskz_loadu_ps(mask, b + g);
      for (int i = 0; i < MT; i++) {
        const __m512 sums = _mm512_loadu_ps(x.sums.data() + (size_t)(m0 + i) * x.padded_groups + g);
        acc[i][j] = _mm512_fmadd_ps(bias, sums, acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++) {
      size_t at = (size_t)(m0 + i) * p.N + n0 + j;
      float value = _mm512_reduce_add_ps(acc[i][j]);
      p.out[at] = p.residual != nullptr ? p.residual[at] + value : value;
    }
}

// Which group (relative to the superblock's first) each of 8 lanes is in, for the half `half`
// of a superblock (AVX2: 32 weight bytes at a time).
__attribute__((target("avx2"))) __m256i lane_groups_avx2(int bits, int group, int half) {
  alignas(32) int index[8];
  int lanes_per_block = bits == 4 ? 4 : 8;
  for (int l = 0; l < 8; l++) index[l] = (32 * (half * (8 / lanes_per_block) + l / lanes_per_block)) / group;
  return _mm256_load_si256((const __m256i*)index);
}

template <int MT, int NT, int BITS>
__attribute__((target("avx2,fma"))) void tile_avx2(const Problem& p, int m0, int n0) {
  const Activations& x = *p.x;
  constexpr int SB = superblock(BITS);
  const int row_bytes = p.K * BITS / 8;
  const int groups = p.K / p.group;
  const __m256i low4 = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i index[2] = {lane_groups_avx2(BITS, p.group, 0), lane_groups_avx2(BITS, p.group, 1)};
  const int per_superblock = std::max(1, SB / p.group);
  __m256 acc[MT][NT];
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++) acc[i][j] = _mm256_setzero_ps();
  for (int sb = 0; sb < x.superblocks; sb++) {
    const int k0 = sb * SB;
    const int first_group = k0 / p.group;
    const int count = std::min(per_superblock, groups - first_group);
    // The superblock's group scales (at most 4: groups of 32 or more in 128 values), masked.
    const __m128i take = _mm_cmpgt_epi32(_mm_set1_epi32(count), _mm_setr_epi32(0, 1, 2, 3));
    __m256 group_scales[NT];
    for (int j = 0; j < NT; j++) {
      const float* scales = p.scales + (size_t)(n0 + j - p.row_base) * groups + first_group;
      group_scales[j] = _mm256_castps128_ps256(_mm_maskload_ps(scales, take));
    }
    // Past K (a last, partial superblock) the activations are zero: whatever the weight bytes
    // read there (within the row's bytes, or zero), they add nothing.
    const int bytes = std::min(SB, p.K - k0) * BITS / 8;
    for (int half = 0; half < 2; half++) {
      if (half * 32 >= bytes) break;
      __m256i w_lo[NT], w_hi[NT];
      __m256 scale[NT];
      for (int j = 0; j < NT; j++) {
        const uint8_t* row = p.w + (size_t)(n0 + j) * row_bytes + k0 * BITS / 8 + half * 32;
        __m256i raw;
        if (bytes - half * 32 >= 32) {
          raw = _mm256_loadu_si256((const __m256i*)row);
        } else {
          alignas(32) uint8_t tail[32] = {};
          std::memcpy(tail, row, bytes - half * 32);
          raw = _mm256_load_si256((const __m256i*)tail);
        }
        if constexpr (BITS == 4) {
          w_lo[j] = _mm256_and_si256(raw, low4);
          w_hi[j] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low4);
        } else {
          w_lo[j] = _mm256_xor_si256(raw, _mm256_set1_epi8((char)0x80));  // q - 128, signed
        }
        scale[j] = _mm256_permutevar8x32_ps(group_scales[j], index[half]);
      }
      for (int i = 0; i < MT; i++) {
        const int8_t* xq = x.q.data() + (size_t)(m0 + i) * x.stride + k0 + half * 32;
        const __m256 dx = _mm256_loadu_ps(x.dx.data() + ((size_t)(m0 + i) * x.superblocks + sb) * 16 + half * 8);
        const __m256i x_lo = _mm256_loadu_si256((const __m256i*)xq);
        __m256i x_hi;
        if constexpr (BITS == 4) x_hi = _mm256_loadu_si256((const __m256i*)(xq + 64));
        for (int j = 0; j < NT; j++) {
          __m256i pairs;
          if constexpr (BITS == 4) {
            pairs = _mm256_add_epi16(_mm256_maddubs_epi16(w_lo[j], x_lo), _mm256_maddubs_epi16(w_hi[j], x_hi));
          } else {
            pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(w_lo[j], w_lo[j]), _mm256_sign_epi8(x_lo, w_lo[j]));
          }
          __m256i dot = _mm256_madd_epi16(pairs, ones);
          acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_mul_ps(scale[j], dx), acc[i][j]);
        }
      }
    }
  }
  // The bias terms, sum_g b_g * (sum of the group's x) (8 bits: b_g + 128 s_g, see the header).
  for (int j = 0; j < NT; j++) {
    const float* b = p.biases + (size_t)(n0 + j - p.row_base) * groups;
    const float* sc = p.scales + (size_t)(n0 + j - p.row_base) * groups;
    for (int g = 0; g < groups; g += 8) {
      const __m256i take8 = _mm256_cmpgt_epi32(_mm256_set1_epi32(groups - g), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
      __m256 bias = _mm256_maskload_ps(b + g, take8);
      if constexpr (BITS == 8) bias = _mm256_fmadd_ps(_mm256_set1_ps(128.0f), _mm256_maskload_ps(sc + g, take8), bias);
      for (int i = 0; i < MT; i++) {
        const __m256 sums = _mm256_loadu_ps(x.sums.data() + (size_t)(m0 + i) * x.padded_groups + g);
        acc[i][j] = _mm256_fmadd_ps(bias, sums, acc[i][j]);
      }
    }
  }
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++) {
      size_t at = (size_t)(m0 + i) * p.N + n0 + j;
      float value = hsum_avx2(acc[i][j]);
      p.out[at] = p.residual != nullptr ? p.residual[at] + value : value;
    }
}

// Weight rows per tile by rows of x: accumulators, weights and scales within 32 registers
// (AVX2: 16).
template <int MT>
constexpr int weight_rows() {
  return MT <= 2 ? 4 : 2;
}

template <int MT>
constexpr int weight_rows_avx2() {
  return MT == 1 ? 2 : 1;
}

template <int MT, int BITS>
void tiles(const Problem& p, int m0, int n_begin, int n_end) {
  int n = n_begin;
  if (use_avx2()) {
    constexpr int NT = weight_rows_avx2<MT>();
    for (; n + NT <= n_end; n += NT) tile_avx2<MT, NT, BITS>(p, m0, n);
    for (; n < n_end; n++) tile_avx2<MT, 1, BITS>(p, m0, n);
    return;
  }
  constexpr int NT = weight_rows<MT>();
  for (; n + NT <= n_end; n += NT) tile<MT, NT, BITS>(p, m0, n);
  for (; n < n_end; n++) tile<MT, 1, BITS>(p, m0, n);
}

template <int BITS>
void rows(const Problem& p, int n_begin, int n_end) {
  int m = 0;
  for (; m + 4 <= p.M; m += 4) tiles<4, BITS>(p, m, n_begin, n_end);
  switch (p.M - m) {
    case 3: tiles<3, BITS>(p, m, n_begin, n_end); break;
    case 2: tiles<2, BITS>(p, m, n_begin, n_end); break;
    case 1: tiles<1, BITS>(p, m, n_begin, n_end); break;
    default: break;
  }
}

constexpr int kChunkRows = 64;

__attribute__((target("avx512f,f16c"))) void widen(const uint16_t* in, float* out, int n) {
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
  Problem q = p;
  thread_local std::vector<float> widened;
  if (p.half_scales != nullptr) {
    int groups = p.K / p.group, count = (end - begin) * groups;
    // 16 floats of slack: a tile's masked loads never read past what was widened.
    widened.resize(2 * (size_t)count + 16);
    auto convert = use_avx2() ? widen_avx2 : widen;
    convert(p.half_scales + (size_t)begin * groups, widened.data(), count);
    convert(p.half_biases + (size_t)begin * groups, widened.data() + count, count);
    q.scales = widened.data();
    q.biases = widened.data() + count;
    q.row_base = begin;
  }
  if (p.bits == 8)
    rows<8>(q, begin, end);
  else
    rows<4>(q, begin, end);
}

// Rounds each row of x (transformed) to int8 blocks; see `Activations`.
void quantize_rows(const View& x, const Transform& t, int M, int K, int bits, int group, Activations& a) {
  const int SB = superblock(bits);
  a.superblocks = (K + SB - 1) / SB;
  a.stride = a.superblocks * SB;
  a.groups = K / group;
  a.padded_groups = (a.groups + 15) / 16 * 16;
  a.q.assign((size_t)M * a.stride, 0);
  a.dx.assign((size_t)M * a.superblocks * 16, 0.0f);
  a.sums.assign((size_t)M * a.padded_groups, 0.0f);
  std::vector<float> row;
  for (int m = 0; m < M; m++) {
    transform_row(x, t, m, K, row);
    int8_t* q = a.q.data() + (size_t)m * a.stride;
    float* dx = a.dx.data() + (size_t)m * a.superblocks * 16;
    float* sums = a.sums.data() + (size_t)m * a.padded_groups;
    for (int block = 0; block < K / 32; block++) {
      const float* v = row.data() + block * 32;
      float peak = 0;
      for (int k = 0; k < 32; k++) peak = std::max(peak, std::fabs(v[k]));
      float step = peak / 127.0f;
      float inverse = step > 0 ? 1.0f / step : 0.0f;
      int sb = block * 32 / SB, in_sb = block % (SB / 32);
      int lanes = bits == 4 ? 4 : 8;
      for (int l = 0; l < lanes; l++) dx[sb * 16 + in_sb * lanes + l] = step;
      int8_t* out = q + sb * SB;
      int total = 0;
      for (int k = 0; k < 32; k++) {
        int8_t value = static_cast<int8_t>(std::lrintf(v[k] * inverse));
        total += value;
        if (bits == 8)
          out[in_sb * 32 + k] = value;
        else  // evens of the four blocks, then their odds (16 bytes a block)
          out[(k % 2) * 64 + in_sb * 16 + k / 2] = value;
      }
      // The rounded values' sum: the bias term's error then cancels the product's (with an
      // affine weight s q + b, b is a group's extreme, and an exact sum made it 10x larger).
      sums[block * 32 / group] += step * static_cast<float>(total);
    }
  }
}

}  // namespace

bool vnni_available() {
  return has_vnni() || use_avx2();
}

bool int8_eight_bit() {
  return has_vnni();
}

bool integer_product(const View& x, const Transform& t, const Weights& w, int M, const float* residual, float* out) {
  // AVX2 takes 4-bit weights only: on 8-bit ones (an output head) its products were no faster
  // than the float kernel's, and at one row (memory-bound) half as fast.
  if (!(has_vnni() || (use_avx2() && w.bits == 4)) || t.activations != 8 || (w.group != 32 && w.group != 64 && w.group != 128) || w.K % w.group != 0) return false;
  Activations a;
  quantize_rows(x, t, M, w.K, w.bits, w.group, a);
  Problem p{&a,
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
  pool().run((w.N + kChunkRows - 1) / kChunkRows, run_chunk, &p);
  return true;
}

}  // namespace plumbline
