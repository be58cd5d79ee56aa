#include "thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace qkv {
namespace {

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_.store(true);
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void run(int64_t items, int threads, const std::function<void(int64_t, int)>& body) {
    std::lock_guard<std::mutex> one_job_at_a_time(job_mutex_);
    int helpers = static_cast<int>(std::min<int64_t>({threads, items, int64_t(1) << kHelperBits})) - 1;  // fits job_
    while (static_cast<int>(workers_.size()) < helpers && !no_more_threads_) {
      const int id = static_cast<int>(workers_.size()) + 1;
      try {
        workers_.emplace_back([this, id] { loop(id); });
      } catch (const std::system_error&) {
        // no threads to be had (a wasm build without pthreads, or the system's limit): the
        // items run on the threads there are (the caller alone at worst), with the same bits
        no_more_threads_ = true;
      }
    }
    helpers = std::min(helpers, static_cast<int>(workers_.size()));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      items_ = items;
      next_.store(0);
      pending_.store(helpers, std::memory_order_relaxed);
      error_ = nullptr;
      // publishes the job to polling helpers: its generation and helper count in one word
      job_.store((++generation_ << kHelperBits) | uint64_t(helpers), std::memory_order_release);
    }
    wake_.notify_all();
    work(0);
    if (!poll_until([this] { return pending_.load(std::memory_order_acquire) == 0; })) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
    }
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  // Callers often issue jobs back to back (a model's forward pass is a dozen small matmuls):
  // a waiting thread first polls for kPollFor, so the next job often needs no futex wake-up,
  // then sleeps on its condition variable. Measured on the tiny GPT's 128-token prefill with
  // 2 threads: native 3.7 -> 3.2 ms, wasm a few % (within this machine's noise). Polling for
  // 200 us instead made back-to-back short calls slower in wasm (the poller competes with
  // V8's own threads on 2 cores); callers keep such calls on one thread (useful_threads).
  template <class Ready>
  static bool poll_until(Ready ready) {
    using Clock = std::chrono::steady_clock;
    const auto give_up = Clock::now() + kPollFor;
    do {
      for (int i = 0; i < 64; ++i)
        if (ready()) return true;
    } while (Clock::now() < give_up);
    return false;
  }

  // Whether helper `id` takes part in `job` (a job_ word), having last taken part in generation
  // `seen`. The generation and the helper count come from one load: read apart, a helper left
  // out of one job could pair its generation with the next job's larger count, take part in
  // the wrong job and decrement pending_ once too often (seen once, as a hang of the native
  // tests under load: the count skipped 0 and the caller waited for ever).
  static bool takes_part(uint64_t job, int id, uint64_t seen) {
    return (job >> kHelperBits) != seen && uint64_t(id) <= (job & ((uint64_t(1) << kHelperBits) - 1));
  }

  void loop(int id) {
    uint64_t seen = 0;  // the generation of the last job this helper took part in
    uint64_t job = 0;
    const auto ready = [&] {
      job = job_.load(std::memory_order_acquire);
      return stopping_.load(std::memory_order_relaxed) || takes_part(job, id, seen);
    };
    for (;;) {
      if (!poll_until(ready)) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, ready);
      }
      if (stopping_.load(std::memory_order_relaxed)) return;
      seen = job >> kHelperBits;
      work(id);
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        std::lock_guard<std::mutex> lock(mutex_);  // the caller checks pending_ under this lock
        done_.notify_one();
      }
    }
  }

  void work(int worker) {
    for (int64_t item; (item = next_.fetch_add(1)) < items_;) {
      try {
        (*body_)(item, worker);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!error_) error_ = std::current_exception();
        next_.store(items_);  // stop handing out items
      }
    }
  }

  static constexpr std::chrono::microseconds kPollFor{50};

  std::mutex job_mutex_;  // serialises callers
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  bool no_more_threads_ = false;  // a thread failed to start: stop trying
  const std::function<void(int64_t, int)>* body_ = nullptr;
  int64_t items_ = 0;
  std::atomic<int64_t> next_{0};
  std::atomic<int> pending_{0};
  static constexpr int kHelperBits = 16;  // job_ = generation << 16 | helpers
  uint64_t generation_ = 0;               // the caller's count of jobs (under job_mutex_)
  std::atomic<uint64_t> job_{0};
  std::atomic<bool> stopping_{false};
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool instance;
  return instance;
}

}  // namespace

int useful_threads(int threads, int64_t items, int64_t work, int64_t min_work_per_thread) {
  int64_t n = std::min<int64_t>(threads, items);
  if (min_work_per_thread > 0) n = std::min(n, work / min_work_per_thread);
  return static_cast<int>(std::max<int64_t>(1, n));
}

void parallel_for(int64_t items, int threads, const std::function<void(int64_t, int)>& body) {
  if (items <= 0) return;
  if (threads <= 1 || items == 1) {
    for (int64_t i = 0; i < items; ++i) body(i, 0);
    return;
  }
  pool().run(items, threads, body);
}

}  // namespace qkv
