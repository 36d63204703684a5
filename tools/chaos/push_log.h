// PushLog: what the hubs pushed to the chaos load's attached agents on their
// presence streams, and the checks on it:
//   - no message is pushed reading ACKED: a hub never pushes a message after
//     its recipient acknowledged it (at least once allows a repeat before the
//     ack, never after);
//   - a hub paused past its lease pushes nothing once resumed: no stream that
//     was attached to it before the pause carries a message whose publish
//     began during or after the pause (the hub could only have read it after
//     it resumed, by which time its seat's deadline had passed);
//   - such a stream, if it lived through the pause, ends with the fencing
//     notice HUB_SEAT_LOST.
// Times are absl::GetCurrentTimeNanos() of the driver's machine. Not
// responsible for the streams (attached_agent.h) or the pauses (the runs).
// Thread-safe.
#ifndef TOOLS_CHAOS_PUSH_LOG_H_
#define TOOLS_CHAOS_PUSH_LOG_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "proto/hub/v1/message.pb.h"

namespace hub::chaos {

class PushLog {
 public:
  // A publish acknowledged with `message_id`, sent at `started_ns`.
  void Published(const std::string& message_id, int64_t started_ns);
  // Hub `slot` was SIGSTOPped at `from_ns` and SIGCONTed at `to_ns`.
  void Paused(int slot, int64_t from_ns, int64_t to_ns);
  // `delivery` arrived at `received_ns` for `agent` on a stream to hub
  // `slot` that attached at `attached_ns`.
  void Pushed(const std::string& agent, int slot, int64_t attached_ns,
              int64_t received_ns, const hub::v1::MessageDelivery& delivery);

  // The stream of `agent` to hub `slot` that attached at `attached_ns` ended
  // at `ended_ns`, for `reason` (the fencing notice's, "" when none).
  void StreamEnded(const std::string& agent, int slot, int64_t attached_ns,
                   int64_t ended_ns, const std::string& reason);

  // Appends one line per violation so far to `violations`.
  void Check(std::vector<std::string>* violations) const;
  // "pushes=N repeated=N ..." for the summary.
  std::string Summary() const;

 private:
  struct Push {
    std::string agent;
    std::string message_id;
    int slot = 0;
    int64_t attached_ns = 0;
    int64_t received_ns = 0;
  };
  struct Ended {
    std::string agent;
    int slot = 0;
    int64_t attached_ns = 0;
    int64_t ended_ns = 0;
    std::string reason;
  };
  struct Pause {
    int slot = 0;
    int64_t from_ns = 0;
    int64_t to_ns = 0;
  };

  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> publish_started_ ABSL_GUARDED_BY(mu_);
  std::vector<Push> pushes_ ABSL_GUARDED_BY(mu_);
  std::vector<Pause> pauses_ ABSL_GUARDED_BY(mu_);
  std::vector<Ended> ended_ ABSL_GUARDED_BY(mu_);
  // Frames that read ACKED, as violation lines.
  std::vector<std::string> acked_pushes_ ABSL_GUARDED_BY(mu_);
  // (agent, message id) -> times pushed.
  std::map<std::pair<std::string, std::string>, int> times_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace hub::chaos

#endif  // TOOLS_CHAOS_PUSH_LOG_H_
