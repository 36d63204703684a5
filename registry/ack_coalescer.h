// AckCoalescer: one agent's acknowledgements that arrive while earlier ones
// are being written go to the store together, as one write.
//
// An agent acknowledges as it works through its messages: a message_ack
// frame or an Ack call with a few ids each, often many of them while the
// previous ones are still being committed. Written one by one, each pays a
// store write of its own (on PostgreSQL two statements and their round
// trip), and a recipient that is sent messages faster than that falls
// behind with its acks until its inbox reaches its limit. Here at most
// `max_in_flight` writes per agent run at once; the requests that come
// meanwhile wait, merged into one write of up to `max_ids` distinct ids (a
// request is never split), which starts as soon as one of the running
// writes is done. Each request is answered for its own ids only, once the
// write that carried them is durable; a failed write fails every request it
// carried, each as it would have failed alone (the same agent, generation
// and store). Requests with different presence generations are never
// merged. An agent acknowledging one request at a time waits for nothing.
//
// Quiesce() ends it: later requests are refused at once, the ones still
// waiting are failed, and it returns once every write in flight has been
// answered, so nothing calls into the coalescer (or its owner's write
// function) afterwards.
//
// docs/design/messages.md, "Acknowledgements". Thread-safe.
#ifndef HUB_REGISTRY_ACK_COALESCER_H_
#define HUB_REGISTRY_ACK_COALESCER_H_

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace hub {

class AckCoalescer {
 public:
  // Per id of a write, in the order given: acknowledged by the agent.
  using Written =
      absl::AnyInvocable<void(absl::StatusOr<std::vector<bool>>) &&>;
  // Writes `ids` (distinct) as acknowledged by `agent_id` and calls `done`
  // exactly once, on any thread (possibly before returning). `ids` stays
  // valid until `done` has run.
  using Write = std::function<void(
      const std::string& agent_id, const std::vector<std::string>& ids,
      std::optional<int64_t> presence_generation, Written done)>;
  // A request's answer: its own ids, handed back, and one bool per id (or
  // the write's error).
  using Done = absl::AnyInvocable<void(std::vector<std::string> ids,
                                       absl::StatusOr<std::vector<bool>>) &&>;

  AckCoalescer(Write write, int max_in_flight, size_t max_ids);
  // Quiesces (below): waits for the writes in flight.
  ~AckCoalescer();
  AckCoalescer(const AckCoalescer&) = delete;
  AckCoalescer& operator=(const AckCoalescer&) = delete;

  // `ids`: distinct, already validated. `done` gets them back with one
  // bool per id, in their order, or the write's error; once quiescing,
  // UNAVAILABLE / HUB_SHUTTING_DOWN at once, on the calling thread.
  void Ack(const std::string& agent_id, std::vector<std::string> ids,
           std::optional<int64_t> presence_generation, Done done);

  // Stops taking requests and fails those waiting behind a running write
  // (UNAVAILABLE / HUB_SHUTTING_DOWN: nothing of theirs was written, the
  // agent acknowledges again), then blocks until every write in flight has
  // been answered and its callback has left the coalescer. The owner calls
  // it before tearing down anything its write function uses. REQUIRES: the
  // Write function answers every write it was given, on some other thread
  // or before returning. Idempotent.
  void Quiesce();

  // Writes issued so far (a merged one counts once), and requests.
  int64_t writes() const;
  int64_t requests() const;

 private:
  struct Request {
    std::vector<std::string> ids;
    Done done;
  };
  // Requests written together.
  struct Batch {
    std::optional<int64_t> generation;
    std::vector<std::string> ids;  // distinct, in the order they came
    absl::flat_hash_map<std::string, size_t> index;  // id -> place in ids
    std::vector<Request> requests;
  };
  struct Agent {
    int in_flight = 0;
    std::deque<std::unique_ptr<Batch>> waiting;
  };

  static void Add(Batch* batch, Request request);
  // Runs `batch` and, as each write is done, the next waiting one.
  void Issue(const std::string& agent_id, std::unique_ptr<Batch> batch);
  // Answers each request of `batch` from its write's answer.
  static void Answer(Batch& batch,
                     const absl::StatusOr<std::vector<bool>>& written);

  const Write write_;
  const int max_in_flight_;
  const size_t max_ids_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Agent> agents_ ABSL_GUARDED_BY(mu_);
  bool quiescing_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar drained_;  // agents_ became empty (Quiesce waits for it)
  int64_t writes_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t requests_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hub

#endif  // HUB_REGISTRY_ACK_COALESCER_H_
