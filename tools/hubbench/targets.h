// The servers hubbench measures, behind one interface: each target maps the
// workloads onto its own RPCs.
//   noop: the ceiling (noop.proto): Unary for register and cas, Stream echo.
//   etcd: etcd 3.4's API: LeaseGrant, LeaseKeepAlive, Txn on mod_revision.
//   hub:  hub.v1: RegisterAgent, Attach (hello, heartbeat -> lease_ack),
//         ReserveRole + CompareAndSetRole, Reserve + ReleaseReservation.
#ifndef TOOLS_HUBBENCH_TARGETS_H_
#define TOOLS_HUBBENCH_TARGETS_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tools/hubbench/loops.h"

namespace hubbench {

// How long a single setup or measured call may take before it fails.
inline constexpr absl::Duration kCallTimeout = absl::Seconds(10);

class Target {
 public:
  virtual ~Target() = default;

  // A registration loop for client `client` (register workload).
  virtual std::unique_ptr<UnaryOp> NewRegisterOp(
      std::shared_ptr<grpc::Channel> channel, int client) = 0;

  // A compare-and-set loop for `client` on key number `key` (all clients
  // share key 0 in the one-key layout). May make blocking setup calls.
  virtual absl::StatusOr<std::unique_ptr<UnaryOp>> NewCasOp(
      std::shared_ptr<grpc::Channel> channel, int client, int key) = 0;

  // A lock loop for client `client` (lock workload): each op takes a lock
  // of the client's own and releases it, two round trips (hub: Reserve +
  // ReleaseReservation of one path; etcd: v3lock Lock + Unlock of one name
  // under a lease granted at setup; noop: two echoes). May make blocking
  // setup calls.
  virtual absl::StatusOr<std::unique_ptr<UnaryOp>> NewLockOp(
      std::shared_ptr<grpc::Channel> channel, int client) = 0;

  // Stream number `index`, to be started on its own channel by Go().
  // Blocking setup calls (registering the agent, granting the lease) go over
  // `setup`, so the stream's connection carries only the stream. `hold`:
  // answer once, then stay open until Close(). Thread-safe (setup runs in
  // parallel).
  virtual absl::StatusOr<std::unique_ptr<PingStreamBase>> NewStream(
      std::shared_ptr<grpc::Channel> setup, int index, StreamBoard* board,
      bool hold, absl::Duration max_life) = 0;
};

// `payload_bytes`: the size of the opaque payload each unary echo carries
// (the ceiling beside a publish of that many payload bytes).
std::unique_ptr<Target> NewNoopTarget(int payload_bytes = 0);
std::unique_ptr<Target> NewEtcdTarget();
// `run_id` (8 base64url characters) keeps agent ids and role keys of different
// runs apart.
std::unique_ptr<Target> NewHubTarget(const std::string& run_id);

// gRPC status -> absl::Status, keeping the code and message.
absl::Status ToAbsl(const grpc::Status& status);

// A client context whose deadline is kCallTimeout from now.
std::unique_ptr<grpc::ClientContext> NewCallContext();

}  // namespace hubbench

#endif  // TOOLS_HUBBENCH_TARGETS_H_
