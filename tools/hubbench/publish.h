// The publish workload against hubd: publishers in a closed loop (one
// Publish in flight each) to an agent, a topic or a role, and consumers on
// presence streams that time each message from the publisher's clock to
// its arrival on the stream (same machine, same clock).
#ifndef TOOLS_HUBBENCH_PUBLISH_H_
#define TOOLS_HUBBENCH_PUBLISH_H_

#include <string>

#include "absl/time/time.h"
#include "tools/hubbench/bench.h"

namespace hubbench {

struct PublishConfig {
  std::string addr;
  std::string run_id;  // keeps agent ids, topics and role keys apart
  // agent: one consumer, addressed by id; topic: `fanout` consumers
  // subscribed to one topic; role: one consumer, the role's active holder
  // (made so by EnsureRole and its activation ACK), addressed as
  // topic:role:<wire>.
  std::string to;
  int fanout = 10;
  // Each publish's payload carries a string of this many bytes besides its
  // send time (0: the send time alone).
  int payload_bytes = 0;
  int clients = 1;      // publishers
  int connections = 0;  // 0: one per publisher
  // > 0: publishes per second in all, paced (an open loop over the
  // publishers, RunPacedLoop) instead of each publisher's closed loop.
  double rate = 0;
  // Where the consumers attach; empty: the connection after the
  // publishers' on `addr` (with several hubs in `addr`, whichever that is).
  std::string recipient_addr;
  absl::Duration warmup;
  absl::Duration duration;
  int server_pid = 0;  // > 0: the server's CPU and memory too
};

// Fills `result`: ops = durable publishes in the window, p50/p99 = the
// Publish call, delivery_* = publish-to-arrival over the streams, late =
// paced publishes skipped for want of an idle publisher, server_* as
// ServerSampler reads them.
void RunHubPublish(const PublishConfig& config, Result* result);

}  // namespace hubbench

#endif  // TOOLS_HUBBENCH_PUBLISH_H_
