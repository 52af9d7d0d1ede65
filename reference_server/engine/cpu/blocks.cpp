// The quantized product on GGML block rows: a GGUF file's own quantization, read as the file
// stores it (qmm.h's `block_product`, reached through `quantized_product` with group size 0).
//
// Why: a decode step reads every weight once, so its time is the bytes it reads (this 2-core
// machine streams about 16 GB/s through the kernels, llama.cpp as much). Requantized to MLX's
// affine layout in groups of 32 (4 bits, else 8, plus float32 scale and bias: 2 bits more per
// weight), Qwen2.5-Coder-0.5B's Q4_K_M read 590 MB a token where llama.cpp reads the file's
// blocks, 392 MB. Kept as blocks, the Q5_0 products read 5.5 bits a weight, Q8_0 8.5.
//
// A block is 32 consecutive weights of a row with a float16 scale d in front (ggml's layouts):
//   Q4_0 (type 2, 18 bytes): d, 16 bytes of nibbles;            w = d (q - 8)
//   Q4_1 (type 3, 20 bytes): d, m, 16 bytes of nibbles;         w = d q + m
//   Q5_0 (type 6, 22 bytes): d, 4 bytes of fifth bits, nibbles; w = d (q - 16)
//   Q5_1 (type 7, 24 bytes): d, m, fifth bits, nibbles;         w = d q + m
//   Q8_0 (type 8, 34 bytes): d, 32 int8;                        w = d q
// The nibbles' byte j holds weight j (low) and weight j + 16 (high); fifth bit i is bit i of
// the little-endian 32-bit word. A row is K / 32 blocks, the rows one after another.
//
// The input rows are rounded to int8 per 32 values (dx = max|x| / 127, as qmm_int8.cpp and
// llama.cpp's q8 activations), and per block
//   sum_i x_i w_i ~ d dx sum_i xq_i q'_i  (+ m dx sum_i xq_i for the _1 types),
// the integer sum by `vpmaddubsw` (unsigned times signed bytes, pairs added) and `vpmaddwd`: the
// 4- and 5-bit q as they are (their offsets apart, see `Rows8`), Q8_0's signed q as |q| times x
// with q's sign, so no pair can saturate (2 * 128 * 127 < 2^15). Each output sums its blocks in
// order, lanes kept apart to the end, whatever the tile or thread: a row's result never depends
// on its batch.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "common.h"
#include "qmm.h"

namespace plumbline {

int block_bytes(int kind) {
  switch (kind) {
    case kBlockQ4_0: return 18;
    case kBlockQ4_1: return 20;
    case kBlockQ5_0: return 22;
    case kBlockQ5_1: return 24;
    case kBlockQ8_0: return 34;
    case kBlockQ5_0Pairs: return 22;
    default: return 0;
  }
}

namespace {

// Q4_0 and Q5_0 are multiplied as unsigned q with their offset (-8 or -16) taken apart: two
// `vpsignb` fewer per block and row than a signed product.
constexpr int symmetric_offset(int kind) {
  return kind == kBlockQ4_0 ? 8 : kind == kBlockQ5_0 || kind == kBlockQ5_0Pairs ? 16 : 0;
}

// Input rows rounded to int8 per block of 32: values, scale dx, and per block 8 lanes whose sum
// is the block's offset term, added to the product's lanes (no scalar accumulator: spilled to
// the stack, its loop-carried store and load held the loop to a third of its speed):
// - Q4_0 / Q5_0: int32 lanes, -offset * sum(values) in the first, exact;
// - Q4_1 / Q5_1: float lanes, dx * sum(values) in the first (times the block's m): the rounded
//   values' sum, so the m term carries the product's rounding and their errors cancel
//   (qmm_int8.cpp measured 10x less error so).
struct Rows8 {
  std::vector<int8_t> q;
  std::vector<float> d;
  std::vector<uint32_t> extra;
  int blocks;
};

void round_rows(const View& x, const Transform& t, int M, int K, int kind, Rows8& r) {
  r.blocks = K / 32;
  r.q.resize((size_t)M * K);
  r.d.resize((size_t)M * r.blocks);
  r.extra.assign((size_t)M * r.blocks * 8, 0);
  const int offset = symmetric_offset(kind);
  const bool paired = kind == kBlockQ5_0Pairs;
  std::vector<float> row;
  for (int m = 0; m < M; m++) {
    transform_row(x, t, m, K, row);
    for (int b = 0; b < r.blocks; b++) {
      const float* v = row.data() + b * 32;
      float peak = 0;
      for (int k = 0; k < 32; k++) peak = std::max(peak, std::fabs(v[k]));
      float step = peak / 127.0f, inverse = step > 0 ? 1.0f / step : 0.0f;
      int8_t* q = r.q.data() + (size_t)m * K + b * 32;
      int total = 0;
      for (int k = 0; k < 32; k++) {
        int8_t value = static_cast<int8_t>(std::lrintf(v[k] * inverse));
        total += value;
        if (paired)  // see tile_pairs: per pair, the first halves of both blocks, then the second
          q[-(b % 2) * 32 + (k / 16) * 32 + (b % 2) * 16 + k % 16] = value;
        else
          q[k] = value;
      }
      const size_t at = (size_t)m * r.blocks + b;
      r.d[at] = step;
      if (paired) {
        int32_t lane = -offset * total;
        std::memcpy(&r.extra[(at - b % 2) * 8 + (b % 2) * 4], &lane, 4);
      } else if (offset != 0) {
        int32_t lane = -offset * total;
        std::memcpy(&r.extra[at * 8], &lane, 4);
      } else {
        float lane = step * static_cast<float>(total);
        std::memcpy(&r.extra[at * 8], &lane, 4);
      }
    }
  }
}

struct Problem {
  const Rows8* x;
  const uint8_t* w;
  const float* residual;
  float* out;
  int M, N, K, kind, bytes;
};

// A tile's outputs: each accumulator's lanes summed, plus the residual.
template <int MT, int NT>
__attribute__((target("avx2"))) void store(const Problem& p, int m0, int n0, const __m256 (&acc)[MT][NT]) {
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++) {
      size_t at = (size_t)(m0 + i) * p.N + n0 + j;
      float value = hsum_avx2(acc[i][j]);
      p.out[at] = p.residual != nullptr ? p.residual[at] + value : value;
    }
}

// Byte i is 0xFF where bit i of `bits` is set, else 0.
__attribute__((target("avx2"))) inline __m256i bit_bytes(uint32_t bits) {
  const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i select = _mm256_set1_epi64x(0x8040201008040201LL);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), spread);
  return _mm256_cmpeq_epi8(_mm256_and_si256(v, select), select);
}

// The 32 weights of a block as bytes in order: signed for Q8_0, else unsigned (q, the offset
// left to the caller); `d` and `m` its scale and offset (the _1 types').
template <int KIND>
__attribute__((target("avx2,f16c"))) inline __m256i unpack(const uint8_t* block, float& d, float& m) {
  uint16_t half;
  std::memcpy(&half, block, 2);
  d = _cvtsh_ss(half);
  if constexpr (KIND == kBlockQ8_0) {
    return _mm256_loadu_si256((const __m256i*)(block + 2));
  } else {
    constexpr bool offset = KIND == kBlockQ4_1 || KIND == kBlockQ5_1;
    constexpr bool fifth = KIND == kBlockQ5_0 || KIND == kBlockQ5_1;
    int at = 2;
    if constexpr (offset) {
      std::memcpy(&half, block + 2, 2);
      m = _cvtsh_ss(half);
      at = 4;
    }
    uint32_t high = 0;
    if constexpr (fifth) {
      std::memcpy(&high, block + at, 4);
      at += 4;
    }
    __m128i packed = _mm_loadu_si128((const __m128i*)(block + at));
    __m256i q = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(packed, 4), packed), _mm256_set1_epi8(0x0F));
    if constexpr (fifth) q = _mm256_or_si256(q, _mm256_and_si256(bit_bytes(high), _mm256_set1_epi8(0x10)));
    return q;
  }
}

// MT input rows times NT weight rows, one accumulator each (AVX2's 16 registers).
// Bytes ahead of each weight row's current block to prefetch: without, one core kept too few
// reads in flight and a decode step's Q5_0 product ran at 10 GB/s; 1 KiB ahead, 17 GB/s (2 KiB
// the same, 512 bytes 15).
constexpr int kPrefetch = 1024;

template <int KIND, int MT, int NT>
__attribute__((target("avx2,fma,f16c"))) void tile(const Problem& p, int m0, int n0) {
  constexpr bool affine = KIND == kBlockQ4_1 || KIND == kBlockQ5_1;
  constexpr bool symmetric = symmetric_offset(KIND) != 0;
  const Rows8& x = *p.x;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[MT][NT];
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++) acc[i][j] = _mm256_setzero_ps();
  const size_t row_bytes = (size_t)x.blocks * p.bytes;
  for (int b = 0; b < x.blocks; b++) {
    __m256i w[NT];
    float d[NT], m[NT] = {};
    for (int j = 0; j < NT; j++) {
      const uint8_t* block = p.w + (size_t)(n0 + j) * row_bytes + (size_t)b * p.bytes;
      _mm_prefetch((const char*)block + kPrefetch, _MM_HINT_T0);
      w[j] = unpack<KIND>(block, d[j], m[j]);
    }
    for (int i = 0; i < MT; i++) {
      const size_t at = (size_t)(m0 + i) * x.blocks + b;
      const __m256i xq = _mm256_loadu_si256((const __m256i*)(x.q.data() + (size_t)(m0 + i) * p.K + b * 32));
      const float dx = x.d[at];
      const void* extra = x.extra.data() + at * 8;
      for (int j = 0; j < NT; j++) {
        __m256i dot;
        if constexpr (KIND == kBlockQ8_0)
          dot = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(w[j], w[j]), _mm256_sign_epi8(xq, w[j])), ones);
        else
          dot = _mm256_madd_epi16(_mm256_maddubs_epi16(w[j], xq), ones);
        if constexpr (symmetric) dot = _mm256_add_epi32(dot, _mm256_loadu_si256((const __m256i*)extra));
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(d[j] * dx), acc[i][j]);
        if constexpr (affine)
          acc[i][j] = _mm256_fmadd_ps(_mm256_set1_ps(m[j]), _mm256_loadu_ps((const float*)extra), acc[i][j]);
      }
    }
  }
  store(p, m0, n0, acc);
}

// Q5_0 blocks in pairs (kBlockQ5_0Pairs, blocks.py writes them at load: the same bytes, moved):
// per two blocks, their two float16 scales, their two 32-bit words of fifth bits, then their
// nibbles, 44 bytes. One 32-byte load then gives both blocks' nibbles, and one mask and shift
// split them into weights 0-15 of both and 16-31 of both (the input rows are laid out to match,
// see round_rows): about a third fewer instructions per block than ggml's layout, on the
// products (gate/up) that were bound by them.
__attribute__((target("avx2"))) inline __m256i pair_bit_bytes(uint64_t bits, __m256i spread) {
  const __m256i select = _mm256_set1_epi64x(0x8040201008040201LL);
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi64x(static_cast<long long>(bits)), spread);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, select), select), _mm256_set1_epi8(0x10));
}

template <int MT, int NT>
__attribute__((target("avx2,fma,f16c"))) void tile_pairs(const Problem& p, int m0, int n0) {
  const Rows8& x = *p.x;
  const __m256i ones = _mm256_set1_epi16(1), low4 = _mm256_set1_epi8(0x0F);
  // Fifth bits 0-15 of both blocks (bytes 0-1 and 4-5 of the two words), then bits 16-31.
  const __m256i first = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                         4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5);
  const __m256i second = _mm256_add_epi8(first, _mm256_set1_epi8(2));
  const __m256i halves = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
  __m256 acc[MT][NT];
  for (int i = 0; i < MT; i++)
    for (int j = 0; j < NT; j++) acc[i][j] = _mm256_setzero_ps();
  const int pairs = x.blocks / 2;
  const size_t row_bytes = (size_t)pairs * 44;
  for (int pb = 0; pb < pairs; pb++) {
    __m256i lo[NT], hi[NT];
    __m128 d[NT];
    for (int j = 0; j < NT; j++) {
      const uint8_t* pair = p.w + (size_t)(n0 + j) * row_bytes + (size_t)pb * 44;
      _mm_prefetch((const char*)pair + kPrefetch, _MM_HINT_T0);
      int32_t scales;
      uint64_t bits;
      std::memcpy(&scales, pair, 4);
      std::memcpy(&bits, pair + 4, 8);
      d[j] = _mm_cvtph_ps(_mm_cvtsi32_si128(scales));
      __m256i raw = _mm256_loadu_si256((const __m256i*)(pair + 12));
      lo[j] = _mm256_or_si256(_mm256_and_si256(raw, low4), pair_bit_bytes(bits, first));
      hi[j] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), low4), pair_bit_bytes(bits, second));
    }
    for (int i = 0; i < MT; i++) {
      const size_t at = (size_t)(m0 + i) * x.blocks + 2 * pb;
      const int8_t* xq = x.q.data() + (size_t)(m0 + i) * p.K + pb * 64;
      const __m256i x_lo = _mm256_loadu_si256((const __m256i*)xq);
      const __m256i x_hi = _mm256_loadu_si256((const __m256i*)(xq + 32));
      const __m128 dx = _mm_castpd_ps(_mm_load_sd((const double*)(x.d.data() + at)));
      const __m256i extra = _mm256_loadu_si256((const __m256i*)(x.extra.data() + at * 8));
      for (int j = 0; j < NT; j++) {
        // Pairs of products: at most 2 * 31 * 127 each, two such summed: below 2^15.
        __m256i sums = _mm256_add_epi16(_mm256_maddubs_epi16(lo[j], x_lo), _mm256_maddubs_epi16(hi[j], x_hi));
        __m256i dot = _mm256_add_epi32(_mm256_madd_epi16(sums, ones), extra);
        __m256 scale = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_mul_ps(d[j], dx)), halves);
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), scale, acc[i][j]);
      }
    }
  }
  store(p, m0, n0, acc);
}

template <int MT>
constexpr int weight_rows() {
  return MT <= 2 ? 2 : 1;
}

template <int KIND, int MT>
void tiles(const Problem& p, int m0, int n_begin, int n_end) {
  constexpr int NT = weight_rows<MT>();
  int n = n_begin;
  if constexpr (KIND == kBlockQ5_0Pairs) {
    for (; n + NT <= n_end; n += NT) tile_pairs<MT, NT>(p, m0, n);
    for (; n < n_end; n++) tile_pairs<MT, 1>(p, m0, n);
  } else {
    for (; n + NT <= n_end; n += NT) tile<KIND, MT, NT>(p, m0, n);
    for (; n < n_end; n++) tile<KIND, MT, 1>(p, m0, n);
  }
}

template <int KIND>
void rows(const Problem& p, int n_begin, int n_end) {
  int m = 0;
  for (; m + 4 <= p.M; m += 4) tiles<KIND, 4>(p, m, n_begin, n_end);
  switch (p.M - m) {
    case 3: tiles<KIND, 3>(p, m, n_begin, n_end); break;
    case 2: tiles<KIND, 2>(p, m, n_begin, n_end); break;
    case 1: tiles<KIND, 1>(p, m, n_begin, n_end); break;
    default: break;
  }
}

constexpr int kChunkRows = 64;

void run_chunk(const void* context, int chunk) {
  const Problem& p = *static_cast<const Problem*>(context);
  int begin = chunk * kChunkRows, end = std::min(p.N, begin + kChunkRows);
  switch (p.kind) {
    case kBlockQ4_0: rows<kBlockQ4_0>(p, begin, end); break;
    case kBlockQ4_1: rows<kBlockQ4_1>(p, begin, end); break;
    case kBlockQ5_0: rows<kBlockQ5_0>(p, begin, end); break;
    case kBlockQ5_1: rows<kBlockQ5_1>(p, begin, end); break;
    case kBlockQ5_0Pairs: rows<kBlockQ5_0Pairs>(p, begin, end); break;
    default: rows<kBlockQ8_0>(p, begin, end); break;
  }
}

}  // namespace

void block_product(const View& x, const Transform& t, const Weights& w, int M, const float* residual, float* out) {
  if (block_bytes(w.bits) == 0 || w.K % (w.bits == kBlockQ5_0Pairs ? 64 : 32) != 0)
    throw std::invalid_argument("plumbline blocks: unknown block type, or K not whole blocks");
  Rows8 rows8;
  round_rows(x, t, M, w.K, w.bits, rows8);
  Problem p{&rows8, w.w, residual, out, M, w.N, w.K, w.bits, block_bytes(w.bits)};
  pool().run((w.N + kChunkRows - 1) / kChunkRows, run_chunk, &p);
}

}  // namespace plumbline
