#include "registry/ack_coalescer.h"

#include <utility>

#include "status/status.h"

namespace hub {
namespace {

absl::Status ShuttingDown() {
  return UnavailableError("HUB_SHUTTING_DOWN",
                          "the hub is shutting down: acknowledge again");
}

}  // namespace

AckCoalescer::AckCoalescer(Write write, int max_in_flight, size_t max_ids)
    : write_(std::move(write)),
      max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight),
      max_ids_(max_ids) {}

AckCoalescer::~AckCoalescer() { Quiesce(); }

void AckCoalescer::Quiesce() {
  std::vector<std::unique_ptr<Batch>> refused;
  {
    absl::MutexLock lock(&mu_);
    quiescing_ = true;
    for (auto& [agent_id, agent] : agents_) {
      for (std::unique_ptr<Batch>& batch : agent.waiting) {
        refused.push_back(std::move(batch));
      }
      agent.waiting.clear();
    }
  }
  for (std::unique_ptr<Batch>& batch : refused) Answer(*batch, ShuttingDown());
  // A write's callback erases its agent under mu_ as the last thing it does
  // with the coalescer: once the map is empty no callback is still inside.
  // (A CondVar, not Await: the condition is then read in this function,
  // where ThreadSanitizer sees the lock held.)
  absl::MutexLock lock(&mu_);
  while (!agents_.empty()) drained_.Wait(&mu_);
}

void AckCoalescer::Add(Batch* batch, Request request) {
  for (const std::string& id : request.ids) {
    if (batch->index.emplace(id, batch->ids.size()).second) {
      batch->ids.push_back(id);
    }
  }
  batch->requests.push_back(std::move(request));
}

void AckCoalescer::Ack(const std::string& agent_id,
                       std::vector<std::string> ids,
                       std::optional<int64_t> presence_generation, Done done) {
  auto batch = std::make_unique<Batch>();
  batch->generation = presence_generation;
  bool refused = false;
  {
    absl::MutexLock lock(&mu_);
    ++requests_;
    if (quiescing_) {
      refused = true;
    } else {
      Agent& agent = agents_[agent_id];
      if (agent.in_flight >= max_in_flight_ || !agent.waiting.empty()) {
        // Waits for a running write to finish, with the requests that came
        // since it started.
        Batch* last =
            agent.waiting.empty() ? nullptr : agent.waiting.back().get();
        if (last == nullptr || last->generation != presence_generation ||
            last->ids.size() + ids.size() > max_ids_) {
          agent.waiting.push_back(std::move(batch));
          last = agent.waiting.back().get();
        }
        Add(last, {std::move(ids), std::move(done)});
        return;
      }
      ++agent.in_flight;
      ++writes_;
    }
  }
  if (refused) {
    std::move(done)(std::move(ids), ShuttingDown());
    return;
  }
  Add(batch.get(), {std::move(ids), std::move(done)});
  Issue(agent_id, std::move(batch));
}

void AckCoalescer::Issue(const std::string& agent_id,
                         std::unique_ptr<Batch> batch) {
  // Shared with the callback, held here too: `ids` outlives the write call
  // even when the store answers before it returns.
  std::shared_ptr<Batch> held = std::move(batch);
  write_(agent_id, held->ids, held->generation,
         [this, agent_id, held](absl::StatusOr<std::vector<bool>> acked) {
           // Answered before the next write starts: one agent's answers
           // keep the order of its writes even when a store answers
           // before its write call returns.
           Answer(*held, acked);
           std::unique_ptr<Batch> next;
           {
             absl::MutexLock lock(&mu_);
             auto it = agents_.find(agent_id);
             if (it == agents_.end()) return;  // not reached: it is ours
             Agent& agent = it->second;
             --agent.in_flight;
             if (!agent.waiting.empty()) {
               next = std::move(agent.waiting.front());
               agent.waiting.pop_front();
               ++agent.in_flight;
               ++writes_;
             } else if (agent.in_flight == 0) {
               agents_.erase(it);
               if (agents_.empty()) drained_.SignalAll();
             }
           }
           if (next != nullptr) Issue(agent_id, std::move(next));
         });
}

void AckCoalescer::Answer(Batch& batch,
                          const absl::StatusOr<std::vector<bool>>& written) {
  for (Request& request : batch.requests) {
    if (!written.ok()) {
      std::move(request.done)(std::move(request.ids), written.status());
      continue;
    }
    std::vector<bool> acked;
    acked.reserve(request.ids.size());
    for (const std::string& id : request.ids) {
      auto it = batch.index.find(id);
      acked.push_back(it != batch.index.end() && it->second < written->size() &&
                      (*written)[it->second]);
    }
    std::move(request.done)(std::move(request.ids), std::move(acked));
  }
}

int64_t AckCoalescer::writes() const {
  absl::MutexLock lock(&mu_);
  return writes_;
}

int64_t AckCoalescer::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

}  // namespace hub
