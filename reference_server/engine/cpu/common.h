// Shared by the CPU primitives of this directory: instruction-set detection, a vectorised
// exp, and the small thread pool they split their work over. See engine/kernels.py.
#pragma once

#include <immintrin.h>

#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

namespace plumbline {

enum class Isa { avx512, avx2 };

// AVX-512 (F, BW, VL, DQ) when the CPU has it, else AVX2 with FMA (kernels.py builds only for
// x86-64, and checks the answers once loaded).
Isa detect();

// exp(x) for 16 (AVX-512) or 8 (AVX2) floats: x = n ln2 + r with |r| <= ln2 / 2, a degree-7
// Taylor polynomial of e^r (relative error below 1e-7 there), times 2^n. Very negative inputs
// give 0, as in a softmax of masked scores. MLX's CPU exp is one element at a time (about 12 ns
// here), which made softmax and SiLU a large part of a batched decode step.
__attribute__((target("avx512f,avx512dq,fma"))) inline __m512 exp_avx512(__m512 x) {
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);
  const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(88.7f));
  __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, x);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  __m512 p = _mm512_set1_ps(1.0f / 5040);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
  const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 ln2_hi = _mm256_set1_ps(0.693359375f);
  const __m256 ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
  // Below -87.3 e^x is under float's smallest normal: flushed to 0 (the mask keeps 2^n valid).
  __m256 tiny = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.7f));
  __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
  r = _mm256_fnmadd_ps(n, ln2_lo, r);
  __m256 p = _mm256_set1_ps(1.0f / 5040);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // 2^n as a float: n + 127 in the exponent bits (n is within [-126, 128] after the clamp).
  __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  __m256 result = _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
  return _mm256_andnot_ps(tiny, result);
}

// The sum of 8 floats (halves, then pairs, then the last two: the same order everywhere, so
// every kernel's outputs sum alike).
__attribute__((target("avx2"))) inline float hsum_avx2(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// out[i] = exp(x[i]) for n floats, in place allowed.
void exp_inplace(float* x, int n);

// Helper threads. Work is split into chunks that any thread claims from a shared counter, the
// calling thread (MLX's CPU stream) included: a helper that the OS has descheduled (a busy
// machine) never stalls a step, the caller just takes its chunks. After a task, helpers spin
// briefly (a decode step's products come microseconds apart) and then sleep, so they do not
// keep a core from OpenBLAS's threads during a prefill, nor from other processes.
class Pool {
 public:
  using Task = void (*)(const void* context, int chunk);

  // `threads` in all, the caller included.
  void resize(int threads);
  int threads() const;
  // Runs task(context, c) for every c in [0, chunks), then returns.
  void run(int chunks, Task task, const void* context);
  ~Pool();

 private:
  void work(uint32_t generation);
  void serve();
  void stop();
  void wake();

  // About a millisecond of pause instructions.
  static constexpr int kSpins = 20000;
  std::mutex mutex_;
  // Sleeping helpers wait on `awake_`.
  std::mutex sleep_mutex_;
  std::condition_variable awake_;
  std::vector<std::thread> helpers_;
  std::atomic<uint32_t> generation_{0};
  std::atomic<uint64_t> next_{0};  // generation << 32 | next chunk to claim
  std::atomic<int> done_{0};
  std::atomic<int> sleepers_{0};
  std::atomic<bool> stopping_{false};
  Task task_ = nullptr;
  const void* context_ = nullptr;
  int chunks_ = 0;
};

Pool& pool();

}  // namespace plumbline
