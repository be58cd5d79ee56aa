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

  // A job is published open; a helper joins it (one CAS on state_, which also gives it its
  // worker number) only while it is open and short of helpers, then claims items until none are
  // left. When the caller has run out of items it closes the job and waits only for the helpers
  // that joined: each of those holds at most the item it claimed. A helper that wakes after the
  // close finds the job closed and waits for the next one. So a helper the system has
  // descheduled (a machine busier than its cores) never holds the caller for a time slice.
  void run(int64_t items, int threads, const std::function<void(int64_t, int)>& body) {
    std::lock_guard<std::mutex> one_job_at_a_time(job_mutex_);
    int helpers = static_cast<int>(std::min<int64_t>({threads, items, kMaxHelpers + 1})) - 1;
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
      next_.store(0, std::memory_order_relaxed);
      error_ = nullptr;
      wanted_.store(helpers, std::memory_order_relaxed);
      // publishes the job (what precedes this store) to helpers: a new generation, open, none joined
      state_.store(uint64_t(uint32_t(++generation_)) << kGenerationShift, std::memory_order_release);
    }
    wake_.notify_all();
    work(0);
    // every item is claimed: close the job, then wait for the helpers that joined it
    const uint64_t closed = state_.fetch_or(kClosed, std::memory_order_acq_rel) | kClosed;
    const auto finished = [this] { return active(state_.load(std::memory_order_acquire)) == 0; };
    const auto awake = [this] { return awake_.load(std::memory_order_relaxed) > 0; };
    if (active(closed) != 0 && !poll_until(finished, awake)) {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, finished);
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
    return poll_until(ready, [] { return false; });
  }

  // ... and past kPollFor while keep_polling() holds, yielding the core between checks.
  template <class Ready, class Keep>
  static bool poll_until(Ready ready, Keep keep_polling) {
    using Clock = std::chrono::steady_clock;
    const auto give_up = Clock::now() + kPollFor;
    do {
      for (int i = 0; i < 64; ++i)
        if (ready()) return true;
    } while (Clock::now() < give_up);
    while (keep_polling()) {
      for (int i = 0; i < 64; ++i)
        if (ready()) return true;
      std::this_thread::yield();  // natively, a busy machine's other threads run (wasm has no yield)
    }
    return ready();
  }

 public:
  // KeepHelpersAwake's count of open scopes
  void keep_awake(int delta) { awake_.fetch_add(delta, std::memory_order_relaxed); }

 private:
  // state_ = generation << 32 | closed << 31 | joined << 16 | active: the job's generation, whether
  // the caller has closed it, how many helpers joined it (their worker numbers are 1, 2, ...), and
  // how many of those are still in it. One word, so that a join sees the generation, the close and
  // the count at once (read apart, a helper once paired one job's generation with the next job's
  // helper count and decremented a count too often: the caller waited for ever).
  static constexpr int kGenerationShift = 32;
  static constexpr uint64_t kClosed = uint64_t(1) << 31;
  static constexpr uint64_t kOneJoined = uint64_t(1) << 16, kOneActive = 1;
  static constexpr int64_t kMaxHelpers = (int64_t(1) << 15) - 1;
  static uint32_t generation_of(uint64_t state) { return uint32_t(state >> kGenerationShift); }
  static int joined(uint64_t state) { return int((state >> 16) & 0x7FFF); }
  static int active(uint64_t state) { return int(state & 0xFFFF); }

  void loop(int /*id*/) {
    uint32_t seen = 0;  // the generation of the last job this helper saw
    uint64_t state = 0;
    const auto ready = [&] {
      state = state_.load(std::memory_order_acquire);
      return stopping_.load(std::memory_order_relaxed) || generation_of(state) != seen;
    };
    const auto awake = [this] { return awake_.load(std::memory_order_relaxed) > 0; };  // a scope is open
    for (;;) {
      if (!poll_until(ready, awake)) {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, ready);
      }
      if (stopping_.load(std::memory_order_relaxed)) return;
      seen = generation_of(state);
      // join while the job is open and short of helpers (a failed CAS reloads state)
      int worker = 0;
      while (!(state & kClosed) && generation_of(state) == seen &&
             joined(state) < wanted_.load(std::memory_order_relaxed)) {
        if (state_.compare_exchange_weak(state, state + kOneJoined + kOneActive, std::memory_order_acq_rel,
                                         std::memory_order_acquire)) {
          worker = 1 + joined(state);
          break;
        }
      }
      if (worker == 0) continue;  // closed, or had its helpers, before this one came
      work(worker);
      const uint64_t before = state_.fetch_sub(kOneActive, std::memory_order_acq_rel);
      if (active(before) == 1 && (before & kClosed)) {
        std::lock_guard<std::mutex> lock(mutex_);  // the caller checks state_ under this lock
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
  // the job: written by the caller before it publishes state_, read by the helpers that join
  const std::function<void(int64_t, int)>* body_ = nullptr;
  int64_t items_ = 0;
  std::atomic<int64_t> next_{0};  // the next item to claim
  std::atomic<int> wanted_{0};    // helpers the job takes at most
  uint64_t generation_ = 0;       // the caller's count of jobs (under job_mutex_)
  std::atomic<uint64_t> state_{0};
  std::atomic<bool> stopping_{false};
  std::atomic<int> awake_{0};  // open KeepHelpersAwake scopes
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

KeepHelpersAwake::KeepHelpersAwake(int threads) : open_(threads > 1) {
  if (open_) pool().keep_awake(1);
}

KeepHelpersAwake::~KeepHelpersAwake() {
  if (open_) pool().keep_awake(-1);
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
