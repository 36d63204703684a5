#include "tools/hubbench/loops.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace hubbench {

void StreamBoard::SetWindow(const Window& window) {
  window_end_ns_ = absl::ToUnixNanos(window.end);
  window_start_ns_ = absl::ToUnixNanos(window.start);
}

bool StreamBoard::InWindow(absl::Time t) const {
  const int64_t ns = absl::ToUnixNanos(t);
  return ns >= window_start_ns_.load(std::memory_order_relaxed) &&
         ns < window_end_ns_.load(std::memory_order_relaxed);
}

void StreamBoard::Established() {
  absl::MutexLock lock(&mu_);
  ++established_;
}

void StreamBoard::Failed(const grpc::Status& status, bool before_established) {
  absl::MutexLock lock(&mu_);
  ++failed_;
  if (before_established) ++failed_early_;
  if (first_error_.ok()) first_error_ = status;
}

void StreamBoard::Finished() {
  absl::MutexLock lock(&mu_);
  ++finished_;
}

bool StreamBoard::WaitEstablished(int n, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return established_ + failed_early_ >= n;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&reached), deadline);
}

bool StreamBoard::WaitFinished(int n, absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return finished_ >= n;
  };
  return mu_.AwaitWithDeadline(absl::Condition(&reached), deadline);
}

int StreamBoard::failed() const {
  absl::MutexLock lock(&mu_);
  return failed_;
}

grpc::Status StreamBoard::first_error() const {
  absl::MutexLock lock(&mu_);
  return first_error_;
}

namespace {

// One client of a unary loop. Only its own op's callbacks touch it, one at a
// time (the next op starts from the previous one's callback).
struct UnaryClient {
  UnaryOp* op = nullptr;
  absl::Time started;
  int64_t done = 0;
  int64_t lost = 0;
  int64_t errors = 0;
  grpc::Status first_error;
  std::vector<int64_t> versions;
  LatencySamples latency;
};

// Counts the clients that stopped, so the caller can wait for them all.
class Countdown {
 public:
  explicit Countdown(int n) : left_(n) {}
  void Decrement() {
    absl::MutexLock lock(&mu_);
    --left_;
  }
  bool Wait(absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    auto zero = [this]()
                    ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return left_ == 0; };
    return mu_.AwaitWithDeadline(absl::Condition(&zero), deadline);
  }

 private:
  absl::Mutex mu_;
  int left_ ABSL_GUARDED_BY(mu_);
};

// How long a loop waits for its calls in flight after its window.
absl::Time InFlightDeadline(const Window& window) {
  return window.end + absl::Seconds(30);
}

// Callbacks still hold pointers into a loop's clients: never return under
// them.
[[noreturn]] void AbortInFlight() {
  std::fprintf(stderr,
               "hubbench: calls still in flight 30 s after the window; "
               "aborting\n");
  std::abort();
}

void Issue(UnaryClient* client, const Window* window, Countdown* countdown) {
  client->started = absl::Now();
  client->op->Start([client, window, countdown](Outcome outcome,
                                                const grpc::Status& status,
                                                int64_t version) {
    const absl::Time now = absl::Now();
    if (outcome == Outcome::kFailed) {
      ++client->errors;
      if (client->first_error.ok()) client->first_error = status;
      countdown->Decrement();  // A failing client stops: no hot error loop.
      return;
    }
    if (window->Contains(now)) {
      if (outcome == Outcome::kDone) {
        ++client->done;
        client->latency.Add(now - client->started);
        if (version >= 0) client->versions.push_back(version);
      } else {
        ++client->lost;
      }
    }
    if (now < window->end) {
      Issue(client, window, countdown);
    } else {
      countdown->Decrement();
    }
  });
}

}  // namespace

UnaryTotals RunUnaryLoop(const std::vector<std::unique_ptr<UnaryOp>>& ops,
                         const Window& window, bool shared_key) {
  std::vector<UnaryClient> clients(ops.size());
  Countdown countdown(static_cast<int>(ops.size()));
  for (size_t i = 0; i < ops.size(); ++i) {
    clients[i].op = ops[i].get();
    Issue(&clients[i], &window, &countdown);
  }
  UnaryTotals totals;
  if (!countdown.Wait(InFlightDeadline(window))) AbortInFlight();
  auto count_duplicates = [&totals](std::vector<int64_t>* versions) {
    std::sort(versions->begin(), versions->end());
    for (size_t i = 1; i < versions->size(); ++i) {
      if ((*versions)[i] == (*versions)[i - 1]) ++totals.dup_versions;
    }
  };
  std::vector<int64_t> all_versions;
  for (UnaryClient& client : clients) {
    totals.done += client.done;
    totals.lost += client.lost;
    totals.errors += client.errors;
    if (totals.first_error.ok()) totals.first_error = client.first_error;
    totals.latency.Merge(client.latency);
    if (shared_key) {
      all_versions.insert(all_versions.end(), client.versions.begin(),
                          client.versions.end());
    } else {
      count_duplicates(&client.versions);
    }
  }
  count_duplicates(&all_versions);
  return totals;
}

PacedTotals RunPacedLoop(const std::vector<std::unique_ptr<UnaryOp>>& ops,
                         const Window& window, double per_second) {
  struct Client {
    UnaryOp* op = nullptr;
    absl::Time started;
    bool busy = false;
  };
  absl::Mutex mu;
  std::vector<Client> clients(ops.size());
  for (size_t i = 0; i < ops.size(); ++i) clients[i].op = ops[i].get();
  PacedTotals totals;
  int in_flight = 0;
  const absl::Duration interval = absl::Seconds(1) / per_second;
  const absl::Time first = absl::Now();
  size_t next = 0;
  for (int64_t slot = 0;; ++slot) {
    const absl::Time at = first + interval * slot;
    if (at >= window.end) break;
    absl::SleepFor(at - absl::Now());
    Client* client = nullptr;
    {
      absl::MutexLock lock(&mu);
      for (size_t k = 0; k < clients.size() && client == nullptr; ++k) {
        Client& c = clients[(next + k) % clients.size()];
        if (!c.busy) client = &c;
      }
      if (client == nullptr) {
        if (window.Contains(at)) ++totals.late;
        continue;
      }
      next = (client - clients.data() + 1) % clients.size();
      client->busy = true;
      client->started = absl::Now();
      ++in_flight;
    }
    client->op->Start(
        [client, &mu, &totals, &in_flight, &window](
            Outcome outcome, const grpc::Status& status, int64_t) {
          const absl::Time now = absl::Now();
          absl::MutexLock lock(&mu);
          UnaryTotals& u = totals.unary;
          if (outcome == Outcome::kFailed) {
            ++u.errors;
            if (u.first_error.ok()) u.first_error = status;
          } else if (window.Contains(now)) {
            if (outcome == Outcome::kDone) {
              ++u.done;
              u.latency.Add(now - client->started);
            } else {
              ++u.lost;
            }
          }
          client->busy = false;
          --in_flight;
        });
  }
  absl::MutexLock lock(&mu);
  auto idle = [&in_flight]() { return in_flight == 0; };
  if (!mu.AwaitWithDeadline(absl::Condition(&idle), InFlightDeadline(window))) {
    AbortInFlight();
  }
  return totals;
}

}  // namespace hubbench
