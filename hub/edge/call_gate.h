// CallGate: the per-principal limits every RPC passes before its handler
// runs (docs/design/limits.md): request size, a token bucket of calls per
// second, a cap on open streams, and the idle timeout of presence streams.
//
// The principal is whoever a limit is counted against, named by a
// PrincipalFn. The gate's default is the peer's address without its port
// (every connection from one host shares the budget); HubServer installs
// LimitPrincipal (hub/edge/auth.h): a call with a valid bearer token counts
// against the token's principal, every other call against its peer host.
#ifndef HUB_HUB_EDGE_CALL_GATE_H_
#define HUB_HUB_EDGE_CALL_GATE_H_

#include <grpcpp/server_context.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"

namespace hub {

struct CallLimits {
  // A request message larger than this (serialized) is refused with
  // LIMIT_EXCEEDED / max_request_bytes. gRPC itself refuses anything above
  // twice this before it is parsed (RESOURCE_EXHAUSTED from gRPC's core).
  int64_t max_request_bytes = 2 * 1024 * 1024;
  // Token bucket per principal: sustained calls per second and burst. Every
  // unary call and every stream start takes one token. 0 disables it. The
  // defaults only stop floods: without tokens the principal is the peer
  // host, and every agent (and hubbench) on one machine shares this budget.
  double requests_per_second = 100000;
  int64_t request_burst = 200000;
  // Open Attach + WatchRoles streams per principal. 0 disables it.
  int64_t max_streams_per_principal = 20000;
  // A presence stream on which the client sent no frame for this long is
  // ended with LIMIT_EXCEEDED / idle_stream_timeout. Longer than the longest
  // lease TTL (2 h), so an agent that heartbeats within its lease is never
  // cut. Zero disables it.
  absl::Duration idle_stream_timeout = absl::Hours(3);
};

// Who a call counts against (see the file comment).
using PrincipalFn =
    std::function<std::string(const grpc::CallbackServerContext& context)>;

// The default principal: the peer address without its port
// ("ipv4:127.0.0.1:41234" -> "ipv4:127.0.0.1").
std::string PeerPrincipal(const grpc::CallbackServerContext& context);
// The same for a raw peer string.
std::string PeerPrincipalOf(const std::string& peer);

class CallGate;

// An admitted stream's slot. Destroying it frees the slot and stops the idle
// watch; Touch() records client activity. Destroy it before anything its
// idle callback uses.
class StreamTicket {
 public:
  ~StreamTicket();
  StreamTicket(const StreamTicket&) = delete;
  StreamTicket& operator=(const StreamTicket&) = delete;

  // The client sent a frame: the idle clock restarts. Lock-free.
  void Touch();

 private:
  friend class CallGate;
  StreamTicket(CallGate* gate, std::string principal,
               std::function<void(const absl::Status&)> on_idle);

  CallGate* const gate_;
  const std::string principal_;
  const std::function<void(const absl::Status&)> on_idle_;
  std::atomic<int64_t> last_active_ns_;
  bool idle_fired_ = false;  // guarded by gate_->mu_
};

class CallGate {
 public:
  explicit CallGate(CallLimits limits, PrincipalFn principal = PeerPrincipal);
  ~CallGate();
  CallGate(const CallGate&) = delete;
  CallGate& operator=(const CallGate&) = delete;

  const CallLimits& limits() const { return limits_; }

  // A unary call: its request size, then a token. LIMIT_EXCEEDED or
  // RATE_LIMITED (RESOURCE_EXHAUSTED) when refused.
  absl::Status AdmitCall(const grpc::CallbackServerContext& context,
                         const google::protobuf::Message& request);

  // A stream: a token and a stream slot. `on_idle` (may be empty: no idle
  // timeout) is called once, from the gate's own thread, with the status to
  // end the stream with when the client stayed silent past
  // idle_stream_timeout; `request` is the first request of a server stream
  // (its size is checked), nullptr for a bidi stream.
  absl::StatusOr<std::unique_ptr<StreamTicket>> AdmitStream(
      const grpc::CallbackServerContext& context,
      const google::protobuf::Message* request,
      std::function<void(const absl::Status&)> on_idle);

  // Open streams counted against `principal`.
  int64_t OpenStreams(const std::string& principal);

  // Whether the hub serves at all (hubs sharing a database: its seat); a
  // non-OK answer refuses every call and stream but HubService.GetStatus
  // with it. Set before serving; must be cheap and thread-safe.
  void SetServingCheck(std::function<absl::Status()> check) {
    serving_ = std::move(check);
  }

 private:
  friend class StreamTicket;
  struct Bucket {
    double tokens = 0;
    absl::Time refilled;
  };

  absl::Status CheckSize(const google::protobuf::Message& request) const;
  absl::Status TakeToken(const std::string& principal)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Release(StreamTicket* ticket);
  void SweepIdle();

  const CallLimits limits_;
  const PrincipalFn principal_;
  std::function<absl::Status()> serving_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Bucket> buckets_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, int64_t> streams_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<StreamTicket*> idle_watched_ ABSL_GUARDED_BY(mu_);
  absl::Notification stop_;
  std::thread sweeper_;
};

// Admits a unary call through `gate` (a null gate admits everything).
inline absl::Status AdmitCall(CallGate* gate,
                              const grpc::CallbackServerContext& context,
                              const google::protobuf::Message& request) {
  return gate == nullptr ? absl::OkStatus() : gate->AdmitCall(context, request);
}

}  // namespace hub

#endif  // HUB_HUB_EDGE_CALL_GATE_H_
