// BlockingPool: a fixed set of threads for handlers that wait on a durable
// write.
//
// gRPC's callback API runs handlers on a handful of threads; a handler that
// waits there for its group commit holds one of them, so at most that many
// writes can share a commit and throughput collapses to a few per fsync.
// Handing the wait to this pool lets as many writes join one group as there
// are pool threads. Streams never use it: they stay on reactors.
#ifndef HUB_HUB_BLOCKING_POOL_H_
#define HUB_HUB_BLOCKING_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace hub {

class BlockingPool {
 public:
  explicit BlockingPool(int threads);
  // Runs every task already scheduled, then joins the threads.
  ~BlockingPool();
  BlockingPool(const BlockingPool&) = delete;
  BlockingPool& operator=(const BlockingPool&) = delete;

  // Runs `task` on a pool thread. Thread-safe.
  void Schedule(std::function<void()> task);

 private:
  void Work();

  absl::Mutex mu_;
  // Signalled once per task. A CondVar wakes one waiter; Mutex::Await would
  // re-evaluate every idle thread's condition on each unlock.
  absl::CondVar ready_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace hub

#endif  // HUB_HUB_BLOCKING_POOL_H_
