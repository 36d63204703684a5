// PresenceSession: keeps one agent present on a hub for as long as it lives.
//
// It registers the agent (RegisterAgent), binds the presence stream (Attach:
// hello -> attached -> events), sends heartbeat frames at a fraction of the
// lease TTL, and on a lost stream reconnects with exponential backoff and
// jitter. Activations, messages and role changes pushed by the hub go to
// user callbacks; accepted activations and messages are acknowledged on the
// stream. RoleEpoch() is the fencing token of a role this session holds.
//
// Authority policy (docs/design/clients.md):
//   - Transport failures (UNAVAILABLE, deadline, a hub that stops answering
//     heartbeats, HUB_SHUTTING_DOWN): re-attach with the same generation,
//     after a backoff, or, when the channel lost its connection, as soon as
//     it has reconnected.
//   - The hub restarted (STALE_HUB_INSTANCE) or forgot/expired the agent
//     (AGENT_OFFLINE, AGENT_NOT_FOUND): the session reads the agent; if the
//     stored generation is still its own (or the agent is gone), it registers
//     again and re-attaches. If the generation moved, it was superseded.
//   - Superseded (STALE_PRESENCE_OWNER, PRESENCE_STREAM_REPLACED,
//     AGENT_DEREGISTERED): another registration, stream or operator took the
//     agent id. The session stops for good (state kSuperseded), calls
//     on_authority_lost and never re-registers by itself.
//   - Anything else non-retryable (bad registration, STORE_FINGERPRINT_
//     MISMATCH, PERMISSION_DENIED, ...): state kFailed, on_authority_lost.
//
// Threading: one session thread registers, reads the stream and runs every
// callback (callbacks are serialized and never run under a session lock); a
// second thread sends heartbeats and cancels a stream whose hub stopped
// answering. Public methods are thread-safe and may be called from callbacks,
// except that the destructor must not run on the session thread.
#ifndef HUB_CLIENTS_CPP_PRESENCE_SESSION_H_
#define HUB_CLIENTS_CPP_PRESENCE_SESSION_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/sync_stream.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "clients/cpp/backoff.h"
#include "clients/cpp/hub_client.h"

namespace hub::client {

enum class SessionState {
  kConnecting,    // registering or attaching
  kAttached,      // the presence stream is bound
  kReconnecting,  // the stream was lost; waiting for the hub or a backoff
  kSuperseded,    // terminal: another registration holds the agent id
  kFailed,        // terminal: a non-retryable error
  kStopped,       // terminal: Stop() or the destructor
};

const char* SessionStateName(SessionState state);

struct PresenceSessionOptions {
  // The registration. agent_id and cli are required; hub_instance_id and
  // store_fingerprint are managed by the session (set values are ignored).
  hub::v1::RegisterAgentRequest registration;
  // Heartbeat frames are sent every lease_ttl * heartbeat_fraction
  // (0 < fraction <= 1; lease_ttl as granted in `attached`).
  double heartbeat_fraction = 1.0 / 3.0;
  // How long the hub may take to answer hello or a heartbeat before the
  // stream is treated as dead and reconnected.
  absl::Duration reply_timeout = absl::Seconds(10);
  // Delays between attempts while the hub is reachable but the attempts
  // fail (while it is unreachable the session waits for the channel
  // instead); reset once attached.
  BackoffPolicy backoff;
  // On Stop() (or destruction) while the session holds its registration,
  // deregister the agent (fenced by generation), so its roles fail over at
  // once instead of after the detach grace.
  bool deregister_on_stop = true;
};

// Every callback runs on the session thread, one at a time. Any may be empty.
struct PresenceCallbacks {
  // A role activation for this agent. Return true to accept it: the session
  // sends the ACK on the stream and reports the outcome through
  // on_activation_result. Returning false leaves the activation unanswered
  // (AckActivation can answer it later). Empty: activations are not accepted.
  std::function<bool(const hub::v1::RoleActivation&)> on_role_activation;
  // The hub asks whether this agent can take a role now, before it sends
  // the activation (it waits for the answer up to the probe timeout and
  // tries the next candidate on no answer or false). Return true if ready.
  // Empty: ready exactly when on_role_activation is set.
  std::function<bool(const hub::v1::RoleProbe&)> on_role_probe;
  // The hub's answer to an ACK sent by this session (OK with the result, or
  // the in-band error such as STALE_EPOCH, or UNAVAILABLE when the stream was
  // lost before the answer).
  std::function<void(const hub::v1::RoleActivation&,
                     const absl::StatusOr<hub::v1::RoleActivationAckResult>&)>
      on_activation_result;
  // An activation sent earlier was withdrawn.
  std::function<void(const hub::v1::RoleActivationCancel&)>
      on_activation_cancel;
  // A message for this agent. Return true to acknowledge it at once (on the
  // stream); false leaves it pending (AckMessages can acknowledge it later;
  // unacknowledged messages are redelivered after a reconnect).
  std::function<bool(const hub::v1::MessageDelivery&)> on_message;
  // A role this agent holds, held until this change, or is a candidate of
  // changed (PresenceEvent.role_change). RoleEpoch() already reflects it
  // when this runs.
  std::function<void(const hub::v1::RoleChange&)> on_role_change;
  // Every state change, with the status that caused it (OK when none).
  std::function<void(SessionState, const absl::Status&)> on_state_change;
  // The session lost its authority for good (kSuperseded or kFailed): stop
  // acting for this agent and its roles. Called once, after on_state_change.
  std::function<void(const absl::Status&)> on_authority_lost;
};

class PresenceSession {
 public:
  // `client` must outlive the session. Nothing happens before Start().
  PresenceSession(const HubClient* client, PresenceSessionOptions options,
                  PresenceCallbacks callbacks);
  // Stops the session (see Stop()).
  ~PresenceSession();

  PresenceSession(const PresenceSession&) = delete;
  PresenceSession& operator=(const PresenceSession&) = delete;

  // Validates the options and starts the session threads. Returns at once;
  // INVALID_ARGUMENT for bad options, FAILED_PRECONDITION if already started.
  absl::Status Start();

  // Stops the threads, cancels the stream and (deregister_on_stop) releases
  // the registration. Idempotent. Callable from any thread but the session
  // thread (from a callback it only requests the stop; the session thread
  // then ends on its own).
  void Stop();

  // Blocks until the session is attached (OK), reaches a terminal state (its
  // status), or `timeout` passes (DEADLINE_EXCEEDED).
  absl::Status AwaitAttached(absl::Duration timeout);

  SessionState state() const;
  // The status that caused the current state (OK when none).
  absl::Status last_status() const;
  // The current presence generation (0 before the first registration).
  int64_t generation() const;
  // The hub instance the session last attached to ("" before).
  std::string hub_instance_id() const;

  // The fencing token of a role this session holds: the epoch of the last
  // activation of `role_key_wire` that the hub confirmed for this session.
  // Empty when the role is not held (never acknowledged, fenced by a later
  // epoch or another holder, cancelled, or the session lost its authority).
  std::optional<int64_t> RoleEpoch(const std::string& role_key_wire) const;

  // Sends an ACK for `activation` on the current stream (the answer goes to
  // on_activation_result). UNAVAILABLE when no stream is attached.
  absl::Status AckActivation(const hub::v1::RoleActivation& activation);
  // Acknowledges messages on the current stream (1..100 ids). UNAVAILABLE
  // when no stream is attached.
  absl::Status AckMessages(const std::vector<std::string>& message_ids);

 private:
  using Stream =
      grpc::ClientReaderWriter<hub::v1::AttachRequest, hub::v1::AttachResponse>;
  enum class Next { kReattach, kReregister, kCheckOwner, kStop };

  void Run();
  void Tick();
  absl::Status Register();
  // One stream's life: hello, the read loop, Finish. Returns the end status;
  // `attached` tells whether the hub bound the stream.
  absl::Status AttachOnce(Backoff& backoff, bool* attached);
  Next Classify(const absl::Status& status);
  // kReregister if the stored generation is still ours, kStop (superseded)
  // if not, kCheckOwner to try again later.
  Next CheckOwner(absl::Status* why);
  void Dispatch(const hub::v1::AttachResponse& frame);
  void OnEvent(const hub::v1::PresenceEvent& event);
  void RevalidateRoles();
  // Drops a held role whose epoch or holder moved on.
  void ApplyRoleState(const hub::v1::Role& role);
  absl::Status Write(const hub::v1::AttachRequest& frame);
  absl::Status SendActivationAck(const hub::v1::RoleActivation& activation);
  void FailPendingAcks(const absl::Status& status);
  void SetState(SessionState state, const absl::Status& status);
  void LoseAuthority(SessionState state, const absl::Status& status);
  // Sleeps `delay` unless the session stops first; false when stopping.
  bool SleepUnlessStopping(absl::Duration delay);
  // Before the next attempt after a failure. When the channel is not
  // connected the failure was the transport's: wait (driving gRPC's
  // reconnection, see HubClient::WaitForConnected) until it is, then retry
  // at once without growing the backoff; gRPC's own reconnect backoff paces
  // the attempts. The session's backoff is for a hub that is reachable and
  // refuses. False when stopping.
  bool PauseBeforeRetry(Backoff& backoff);
  bool stopping() const;

  const HubClient* const client_;
  const PresenceSessionOptions options_;
  const PresenceCallbacks callbacks_;
  std::atomic<int64_t> next_frame_id_{1};

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool ticker_wake_ ABSL_GUARDED_BY(mu_) = false;
  SessionState state_ ABSL_GUARDED_BY(mu_) = SessionState::kConnecting;
  absl::Status last_status_ ABSL_GUARDED_BY(mu_);
  int64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
  std::string hub_instance_id_ ABSL_GUARDED_BY(mu_);
  std::string store_fingerprint_ ABSL_GUARDED_BY(mu_);
  // The live stream's context (owned by the session thread), for cancels.
  grpc::ClientContext* context_ ABSL_GUARDED_BY(mu_) = nullptr;
  bool attached_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_);
  absl::Time next_heartbeat_at_ ABSL_GUARDED_BY(mu_);
  // When the oldest unanswered hello/heartbeat was sent (InfiniteFuture:
  // none outstanding).
  absl::Time awaiting_reply_since_ ABSL_GUARDED_BY(mu_) =
      absl::InfiniteFuture();
  struct HeldRole {
    int64_t epoch = 0;
    std::string activation_id;
  };
  std::map<std::string, HeldRole> held_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, hub::v1::RoleActivation> pending_acks_ ABSL_GUARDED_BY(mu_);

  // Serializes writes on the stream; `stream_` is null between streams.
  absl::Mutex write_mu_;
  Stream* stream_ ABSL_GUARDED_BY(write_mu_) = nullptr;

  std::thread worker_;
  std::thread ticker_;
};

}  // namespace hub::client

#endif  // HUB_CLIENTS_CPP_PRESENCE_SESSION_H_
