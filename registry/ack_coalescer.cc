#include "registry/ack_coalescer.h"

#include <utility>

namespace hub {

AckCoalescer::AckCoalescer(Write write, int max_in_flight, size_t max_ids)
    : write_(std::move(write)),
      max_in_flight_(max_in_flight < 1 ? 1 : max_in_flight),
      max_ids_(max_ids) {}

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
  {
    absl::MutexLock lock(&mu_);
    ++requests_;
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
