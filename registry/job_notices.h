// JobNotices: what a job's change tells whom, as messages through the
// inbox (docs/design/jobs.md, "Notices"), as triflux's assign jobs do: the
// worker hears of a job it can claim (topic `assign.job`, a handoff), the
// supervisor of the end of its job and of a superseded attempt's late
// result (`assign.result`), and the worker holding an attempt of its
// cancellation (`assign.cancel`). Messages are durable and reach a
// recipient on whichever hub its stream is attached to, or its next
// ListPending; a role address waits as the role's backlog. Sent after the
// job's write committed; a hub that stops in between does not send them.
#ifndef HUB_REGISTRY_JOB_NOTICES_H_
#define HUB_REGISTRY_JOB_NOTICES_H_

#include <functional>
#include <optional>
#include <string>

#include "records/job.h"
#include "registry/jobs.h"
#include "registry/messaging.h"

namespace hub {

class JobNotices {
 public:
  // `messaging` is read at each send (it is built after the jobs); while
  // it returns null nothing is sent.
  explicit JobNotices(std::function<Messaging*()> messaging)
      : messaging_(std::move(messaging)) {}

  // Sends what `event` of `job` tells (JobBook's observer). Blocks for the
  // write. A failure is counted, not retried.
  void Send(const JobRecord& job, JobEvent event,
            const std::optional<JobLateResult>& late);

  int64_t failures() const { return failures_.load(); }

 private:
  void Publish(const std::string& to, const std::string& topic,
               const std::string& type, int priority, absl::Duration ttl,
               const JobRecord& job, const std::string& payload_json);

  const std::function<Messaging*()> messaging_;
  std::atomic<int64_t> failures_{0};
};

// The address of the job's worker for an offer ("" for a pool without a
// topic: its agents claim without being told), and of its supervisor.
std::string WorkerAddress(const JobRecord& job);
std::string SupervisorAddress(const JobRecord& job);

}  // namespace hub

#endif  // HUB_REGISTRY_JOB_NOTICES_H_
