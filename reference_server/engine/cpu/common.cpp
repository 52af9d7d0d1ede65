// The thread pool and the scalar tails shared by the CPU primitives (common.h).
#include "common.h"

#include <algorithm>

namespace plumbline {

Isa detect() {
  static const Isa isa = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")
      ? Isa::avx512
      : Isa::avx2;
  return isa;
}

__attribute__((target("avx512f,avx512dq,fma"))) static void exp_wide(float* x, int n) {
  int i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, exp_avx512(_mm512_loadu_ps(x + i)));
  if (i < n) {
    __mmask16 tail = static_cast<__mmask16>((1u << (n - i)) - 1);
    _mm512_mask_storeu_ps(x + i, tail, exp_avx512(_mm512_maskz_loadu_ps(tail, x + i)));
  }
}

__attribute__((target("avx2,fma"))) static void exp_narrow(float* x, int n) {
  int i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp_avx2(_mm256_loadu_ps(x + i)));
  for (; i < n; i++) x[i] = std::exp(x[i]);
}

void exp_inplace(float* x, int n) {
  if (detect() == Isa::avx512)
    exp_wide(x, n);
  else
    exp_narrow(x, n);
}

void Pool::resize(int threads) {
  std::lock_guard<std::mutex> lock(mutex_);
  stop();
  for (int i = 1; i < threads; i++) helpers_.emplace_back([this] { serve(); });
}

int Pool::threads() const {
  return static_cast<int>(helpers_.size()) + 1;
}

void Pool::run(int chunks, Task task, const void* context) {
  // One task at a time (two MLX CPU streams could call at once); uncontended, it is cheap.
  std::lock_guard<std::mutex> lock(mutex_);
  if (helpers_.empty() || chunks <= 1) {
    for (int c = 0; c < chunks; c++) task(context, c);
    return;
  }
  task_ = task;
  context_ = context;
  chunks_ = chunks;
  done_.store(0, std::memory_order_relaxed);
  uint32_t generation = generation_.load(std::memory_order_relaxed) + 1;
  next_.store(uint64_t(generation) << 32, std::memory_order_relaxed);
  // Sequentially consistent with `serve`'s sleepers_ / generation_ pair: either a helper sees
  // the new generation before it sleeps, or this sees it asleep and wakes it.
  generation_.store(generation);
  if (sleepers_.load() > 0) wake();
  work(generation);
  // Chunks a helper claimed may still be running.
  for (int spins = 0; done_.load(std::memory_order_acquire) < chunks; spins++) {
    if (spins < 4096)
      _mm_pause();
    else
      std::this_thread::yield();
  }
}

void Pool::wake() {
  // Under the mutex, so that no helper is between its check of the generation and its wait.
  std::lock_guard<std::mutex> lock(sleep_mutex_);
  awake_.notify_all();
}

// Claims chunks of `generation` until none is left (or the pool has moved to another task).
void Pool::work(uint32_t generation) {
  while (true) {
    uint64_t seen = next_.load(std::memory_order_acquire);
    if (uint32_t(seen >> 32) != generation || int(seen & 0xFFFFFFFF) >= chunks_) return;
    if (!next_.compare_exchange_weak(seen, seen + 1, std::memory_order_acq_rel)) continue;
    task_(context_, int(seen & 0xFFFFFFFF));
    done_.fetch_add(1, std::memory_order_release);
  }
}

void Pool::serve() {
  uint32_t seen = generation_.load();
  // `stopping_` is checked as well as the generation: a helper that starts after stop() has
  // bumped the generation reads the new one as `seen` and would otherwise wait forever.
  while (!stopping_.load()) {
    uint32_t now = generation_.load(std::memory_order_acquire);
    for (int spins = 0; now == seen && spins < kSpins; spins++) {
      _mm_pause();
      now = generation_.load(std::memory_order_acquire);
    }
    if (now == seen) {
      std::unique_lock<std::mutex> lock(sleep_mutex_);
      sleepers_.fetch_add(1);
      awake_.wait(lock, [&] { return stopping_.load() || generation_.load() != seen; });
      sleepers_.fetch_sub(1);
      continue;
    }
    seen = now;
    if (!stopping_.load()) work(now);
  }
}

void Pool::stop() {
  if (helpers_.empty()) return;
  stopping_.store(true);
  generation_.fetch_add(1);
  wake();
  for (auto& t : helpers_) t.join();
  helpers_.clear();
  stopping_.store(false, std::memory_order_release);
}

Pool::~Pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  stop();
}

Pool& pool() {
  // Never destroyed: at interpreter exit MLX's stream thread may still be finishing a task
  // that uses it, and joining helpers from a static destructor races with that.
  static Pool* instance = new Pool();
  return *instance;
}

}  // namespace plumbline
