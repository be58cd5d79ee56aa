#include "thread_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace qkv {
namespace {

class Pool {
 public:
  ~Pool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }

  void run(int64_t items, int threads, const std::function<void(int64_t, int)>& body) {
    std::lock_guard<std::mutex> one_job_at_a_time(job_mutex_);
    const int helpers = static_cast<int>(std::min<int64_t>(threads, items)) - 1;
    while (static_cast<int>(workers_.size()) < helpers) {
      const int id = static_cast<int>(workers_.size()) + 1;
      workers_.emplace_back([this, id] { loop(id); });
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      items_ = items;
      next_.store(0);
      active_helpers_ = helpers;
      pending_ = helpers;
      error_ = nullptr;
      ++generation_;
    }
    wake_.notify_all();
    work(0);
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [this] { return pending_ == 0; });
    body_ = nullptr;
    if (error_) std::rethrow_exception(error_);
  }

 private:
  void loop(int id) {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stopping_ || (generation_ != seen && id <= active_helpers_); });
        if (stopping_) return;
        seen = generation_;
      }
      work(id);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
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

  std::mutex job_mutex_;  // serialises callers
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;
  const std::function<void(int64_t, int)>* body_ = nullptr;
  int64_t items_ = 0;
  std::atomic<int64_t> next_{0};
  int active_helpers_ = 0, pending_ = 0;
  uint64_t generation_ = 0;
  bool stopping_ = false;
  std::exception_ptr error_;
};

Pool& pool() {
  static Pool instance;
  return instance;
}

}  // namespace

void parallel_for(int64_t items, int threads, const std::function<void(int64_t, int)>& body) {
  if (items <= 0) return;
  if (threads <= 1 || items == 1) {
    for (int64_t i = 0; i < items; ++i) body(i, 0);
    return;
  }
  pool().run(items, threads, body);
}

}  // namespace qkv
