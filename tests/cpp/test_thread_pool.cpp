// The thread pool: every item runs exactly once on a worker < threads, errors reach the caller,
// back-to-back jobs (the pool polls between them), jobs after a sleep and jobs in KeepHelpersAwake
// scopes all complete, and the helpers sleep once the scopes close; for_rows' ranges; and
// useful_threads' floor on work per thread, which attention() applies.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <future>
#include <stdexcept>
#include <thread>
#include <vector>

#include "attention.hpp"
#include "thread_pool.hpp"

using namespace qkv;

TEST_CASE("parallel_for runs every item once, on workers below the thread count") {
  for (int threads : {1, 2, 3, 8}) {
    for (int64_t items : {1, 2, 7, 100}) {
      CAPTURE(threads);
      CAPTURE(items);
      std::vector<std::atomic<int>> runs(static_cast<size_t>(items));
      std::atomic<int> bad_worker{0};
      parallel_for(items, threads, [&](int64_t item, int worker) {
        runs[static_cast<size_t>(item)]++;
        if (worker < 0 || worker >= threads) bad_worker++;
      });
      for (auto& r : runs) CHECK(r.load() == 1);
      CHECK(bad_worker.load() == 0);
    }
  }
}

TEST_CASE("parallel_for: many jobs back to back, and after the workers went to sleep") {
  std::atomic<int64_t> sum{0};
  for (int job = 0; job < 2000; ++job) parallel_for(4, 2, [&](int64_t item, int) { sum += item; });
  CHECK(sum.load() == 2000 * 6);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // past the polling window
  parallel_for(4, 2, [&](int64_t item, int) { sum += item; });
  CHECK(sum.load() == 2001 * 6);
}

TEST_CASE("parallel_for: jobs with few helpers then many, back to back (a helper left out of one job joins the next)") {
  // A job with 1 helper, then one with 7: the helpers left out of the first poll for the
  // second. They once read the second job's helper count before its generation was published
  // and took part in the first job's place: a decrement too many, a count that skipped 0, and
  // the caller waited for ever. Run on a thread of its own so that a hang fails the test.
  auto run = std::async(std::launch::async, [] {
    int64_t wrong = 0;
    for (int job = 0; job < 20000; ++job) {
      const int threads = job % 2 ? 8 : 2;
      std::vector<std::atomic<int>> runs(static_cast<size_t>(threads));
      parallel_for(threads, threads, [&](int64_t item, int) { runs[static_cast<size_t>(item)]++; });
      for (auto& r : runs) wrong += r.load() != 1;
    }
    return wrong;
  });
  if (run.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
    std::fprintf(stderr, "parallel_for: 20000 alternating jobs did not finish in 60 s (a lost helper)\n");
    std::_Exit(1);  // the pool is stuck; nothing after this could run
  }
  CHECK(run.get() == 0);
}

// the process's CPU time (every thread's), in ms
double process_cpu_ms() { return 1000.0 * double(std::clock()) / CLOCKS_PER_SEC; }

TEST_CASE("KeepHelpersAwake: jobs in nested scopes, with serial work between them, and after the last scope") {
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // the helpers asleep
  std::atomic<int64_t> sum{0};
  {
    const KeepHelpersAwake outer(2);
    for (int job = 0; job < 50; ++job) {
      const KeepHelpersAwake inner(2);  // a forward inside a forward (a patching sweep's runs)
      parallel_for(4, 2, [&](int64_t item, int) { sum += item; });
      std::this_thread::sleep_for(std::chrono::microseconds(200));  // past the 50 us poll
    }
    const KeepHelpersAwake one(1);  // nothing with one thread
    parallel_for(4, 2, [&](int64_t item, int) { sum += item; });
  }
  CHECK(sum.load() == 51 * 6);
  // every scope closed: the helpers sleep again after their short poll, so the process spends
  // almost no CPU time while this thread sleeps (a helper polling on would spend most of 100 ms)
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const double before = process_cpu_ms();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(process_cpu_ms() - before < 20.0);
  parallel_for(4, 2, [&](int64_t item, int) { sum += item; });
  CHECK(sum.load() == 52 * 6);
}

TEST_CASE("for_rows: ranges that cover every row once, one call where the rows are few") {
  for (int threads : {1, 2, 3}) {
    for (int64_t rows : {1, 5, 128}) {
      CAPTURE(threads);
      CAPTURE(rows);
      std::vector<std::atomic<int>> seen(static_cast<size_t>(rows));
      std::atomic<int> calls{0};
      for_rows(rows, kMinRowElementsPerThread, threads, [&](int64_t r0, int64_t r1) {
        calls++;
        for (int64_t r = r0; r < r1; ++r) seen[static_cast<size_t>(r)]++;
      });
      for (auto& r : seen) CHECK(r.load() == 1);
      CHECK(calls.load() == std::min<int64_t>(threads, rows));  // a row each holds a thread's share
    }
  }
  std::atomic<int> calls{0};  // 64 rows of 8: too little to share
  for_rows(64, 8, 4, [&](int64_t r0, int64_t r1) {
    calls++;
    CHECK(r0 == 0);
    CHECK(r1 == 64);
  });
  CHECK(calls.load() == 1);
  for_rows(0, 8, 4, [&](int64_t, int64_t) { calls++; });  // no rows: no call
  CHECK(calls.load() == 1);
}

TEST_CASE("parallel_for rethrows an item's exception in the caller") {
  CHECK_THROWS_WITH_AS(parallel_for(50, 3,
                                    [](int64_t item, int) {
                                      if (item == 17) throw std::runtime_error("item 17 failed");
                                    }),
                       "item 17 failed", std::runtime_error);
  std::atomic<int> after{0};  // and the pool still works
  parallel_for(10, 3, [&](int64_t, int) { after++; });
  CHECK(after.load() == 10);
}

TEST_CASE("useful_threads: at most the items, at least min_work_per_thread each, at least 1") {
  CHECK(useful_threads(4, 100, 1 << 30, 1 << 18) == 4);
  CHECK(useful_threads(4, 2, 1 << 30, 1 << 18) == 2);    // items
  CHECK(useful_threads(4, 100, 3 << 18, 1 << 18) == 3);  // work
  CHECK(useful_threads(4, 100, 1000, 1 << 18) == 1);     // too small for a second thread
  CHECK(useful_threads(4, 100, 1000, 0) == 4);           // no floor
  CHECK(useful_threads(1, 100, 1 << 30, 1 << 18) == 1);

  // attention() sizes its per-worker scratch by the same rule
  AttentionShape small{1, 8, 8, 16, 16, 16, 16};  // 8 items, 64k multiply-adds
  AttentionOptions o;
  o.threads = 4;
  const int64_t one = attention_workspace_bytes(small, o);
  o.min_work_per_thread = 0;
  CHECK(attention_workspace_bytes(small, o) == 4 * one);
}
