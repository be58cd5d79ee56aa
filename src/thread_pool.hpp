// A small persistent pool of worker threads. parallel_for hands out item indices from an
// atomic counter; each item is computed by exactly one thread, so a kernel whose items are
// independent gives the same bits in any thread count. Threads are started once and
// reused (thread start-up is slow, in wasm especially); between jobs they poll briefly, then sleep,
// or, while a KeepHelpersAwake is open, poll until it closes.
// A job waits only for the helpers that joined it while it had items left, never for one that
// is slow to wake (descheduled on a busy machine): the caller then runs the items itself.
#pragma once

#include <cstdint>
#include <functional>

namespace qkv {

// Runs body(item, worker) for item in [0, items) on up to `threads` threads (the caller is
// worker 0; fewer where threads cannot be started, e.g. a wasm build without pthreads).
// worker < threads identifies per-thread scratch. Exceptions from body are rethrown in the
// caller after all items finish.
void parallel_for(int64_t items, int threads, const std::function<void(int64_t item, int worker)>& body);

// The default floor on work per thread: 2^18 multiply-adds, ~10-20 us of compute in wasm,
// about what waking a sleeping thread costs.
constexpr int64_t kMinWorkPerThread = int64_t(1) << 18;

// How many of `threads` are worth using on `items` items of `work` multiply-adds in all: no
// more than there are items, and each gets at least min_work_per_thread (0: no such floor).
int useful_threads(int threads, int64_t items, int64_t work, int64_t min_work_per_thread);

// Row-wise work (a model's norms, rotary embedding, activations, residual adds; the integer
// products' rounding of x): rows of a prefill hold enough elements to share over the threads
// (~30 us of work in wasm a thread at least); a decoding step's single row runs on the caller.
constexpr int64_t kMinRowElementsPerThread = int64_t(1) << 15;

// Runs fn(r0, r1) on rows [r0, r1) covering [0, rows), each row `width` elements, in one call on
// the caller or split over up to `threads` threads (one range each).
template <class Fn>
void for_rows(int64_t rows, int64_t width, int threads, const Fn& fn) {
  if (rows <= 0) return;
  threads = useful_threads(threads, rows, rows * width, kMinRowElementsPerThread);
  if (threads <= 1) return fn(int64_t(0), rows);
  parallel_for(threads, threads, [&](int64_t t, int) { fn(rows * t / threads, rows * (t + 1) / threads); });
}

// While one is open, the pool's helpers poll between jobs instead of sleeping once they have
// polled kPollFor (50 us) without a job. A model's forward pass opens one: its jobs (a dozen a
// layer) are separated by serial steps (norms, rope, quantizing a matrix product's input) that
// often outlast the short poll, and a helper woken from sleep starts a job tens of microseconds
// late. A job still never waits for a helper that has not joined it. Scopes nest; with threads
// <= 1 one does nothing.
class KeepHelpersAwake {
 public:
  explicit KeepHelpersAwake(int threads);
  ~KeepHelpersAwake();
  KeepHelpersAwake(const KeepHelpersAwake&) = delete;
  KeepHelpersAwake& operator=(const KeepHelpersAwake&) = delete;

 private:
  bool open_;
};

}  // namespace qkv
