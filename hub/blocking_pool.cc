#include "hub/blocking_pool.h"

#include <pthread.h>

#include <utility>

namespace hub {

BlockingPool::BlockingPool(int threads) {
  if (threads < 1) threads = 1;
  threads_.reserve(threads);
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

BlockingPool::~BlockingPool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    ready_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
}

void BlockingPool::Schedule(std::function<void()> task) {
  absl::MutexLock lock(&mu_);
  tasks_.push_back(std::move(task));
  ready_.Signal();
}

void BlockingPool::Work() {
  pthread_setname_np(pthread_self(), "hub-pool");  // for top -H, perf
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      while (tasks_.empty() && !stopping_) ready_.Wait(&mu_);
      if (tasks_.empty()) return;  // stopping and drained
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

}  // namespace hub
