#include "clients/cpp/presence_session.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "clients/cpp/activation_ack.h"
#include "clients/cpp/hub_error.h"

namespace hub::client {
namespace {

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

// The wire reason of an ErrorReason value: its name without ERROR_REASON_.
std::string WireReason(hub::v1::ErrorReason reason) {
  constexpr absl::string_view kPrefix = "ERROR_REASON_";
  absl::string_view name = hub::v1::ErrorReason_Name(reason);
  if (absl::StartsWith(name, kPrefix)) name.remove_prefix(kPrefix.size());
  return std::string(name);
}

// A failure worth retrying with the same request after a backoff.
bool IsTransient(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kOk:
      return true;
    case absl::StatusCode::kResourceExhausted: {
      const std::string reason = ReasonOf(status);
      return reason == "RATE_LIMITED" || reason == "STORE_FULL" ||
             reason.empty();
    }
    default:
      return false;
  }
}

// How long one wait for the channel lasts before the session checks whether
// it is stopping.
constexpr absl::Duration kConnectWaitSlice = absl::Milliseconds(200);

}  // namespace

const char* SessionStateName(SessionState state) {
  switch (state) {
    case SessionState::kConnecting:
      return "connecting";
    case SessionState::kAttached:
      return "attached";
    case SessionState::kReconnecting:
      return "reconnecting";
    case SessionState::kSuperseded:
      return "superseded";
    case SessionState::kFailed:
      return "failed";
    case SessionState::kStopped:
      return "stopped";
  }
  return "unknown";
}

PresenceSession::PresenceSession(const HubClient* client,
                                 PresenceSessionOptions options,
                                 PresenceCallbacks callbacks)
    : client_(client),
      options_(std::move(options)),
      callbacks_(std::move(callbacks)) {}

PresenceSession::~PresenceSession() { Stop(); }

absl::Status PresenceSession::Start() {
  if (client_ == nullptr) {
    return absl::InvalidArgumentError("PresenceSession needs a HubClient");
  }
  if (options_.registration.agent_id().empty()) {
    return absl::InvalidArgumentError("registration.agent_id is required");
  }
  if (!(options_.heartbeat_fraction > 0.0 &&
        options_.heartbeat_fraction <= 1.0)) {
    return absl::InvalidArgumentError("heartbeat_fraction must be in (0, 1]");
  }
  if (options_.reply_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("reply_timeout must be positive");
  }
  absl::Status policy = ValidateBackoffPolicy(options_.backoff);
  if (!policy.ok()) return policy;
  absl::MutexLock lock(&mu_);
  if (started_) {
    return absl::FailedPreconditionError("the session was already started");
  }
  started_ = true;
  worker_ = std::thread([this] { Run(); });
  ticker_ = std::thread([this] { Tick(); });
  return absl::OkStatus();
}

void PresenceSession::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    ticker_wake_ = true;
    if (context_ != nullptr) context_->TryCancel();
  }
  if (worker_.joinable() && worker_.get_id() == std::this_thread::get_id()) {
    return;  // From a callback: the session thread ends by itself.
  }
  if (worker_.joinable()) worker_.join();
  if (ticker_.joinable()) ticker_.join();
}

bool PresenceSession::stopping() const {
  absl::MutexLock lock(&mu_);
  return stopping_;
}

bool PresenceSession::SleepUnlessStopping(absl::Duration delay) {
  absl::MutexLock lock(&mu_);
  mu_.AwaitWithTimeout(absl::Condition(&stopping_), delay);
  return !stopping_;
}

bool PresenceSession::PauseBeforeRetry(Backoff& backoff) {
  if (client_->WaitForConnected(absl::ZeroDuration())) {
    return SleepUnlessStopping(backoff.Next());
  }
  // Waited out in slices, so that Stop() is not held up for long.
  while (!stopping()) {
    if (client_->WaitForConnected(kConnectWaitSlice)) return true;
  }
  return false;
}

SessionState PresenceSession::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

absl::Status PresenceSession::last_status() const {
  absl::MutexLock lock(&mu_);
  return last_status_;
}

int64_t PresenceSession::generation() const {
  absl::MutexLock lock(&mu_);
  return generation_;
}

std::string PresenceSession::hub_instance_id() const {
  absl::MutexLock lock(&mu_);
  return hub_instance_id_;
}

std::optional<int64_t> PresenceSession::RoleEpoch(
    const std::string& role_key_wire) const {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(role_key_wire);
  if (it == held_.end()) return std::nullopt;
  return it->second.epoch;
}

absl::Status PresenceSession::AwaitAttached(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  auto settled = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return state_ == SessionState::kAttached ||
           state_ == SessionState::kSuperseded ||
           state_ == SessionState::kFailed || state_ == SessionState::kStopped;
  };
  if (!mu_.AwaitWithTimeout(absl::Condition(&settled), timeout)) {
    return absl::DeadlineExceededError(absl::StrCat(
        "not attached within ", absl::FormatDuration(timeout), "; state ",
        SessionStateName(state_), ", last status: ", last_status_.ToString()));
  }
  if (state_ == SessionState::kAttached) return absl::OkStatus();
  if (!last_status_.ok()) return last_status_;
  return absl::CancelledError("the session stopped");
}

void PresenceSession::SetState(SessionState state, const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (state_ == state && last_status_ == status) return;
    state_ = state;
    last_status_ = status;
  }
  if (callbacks_.on_state_change) callbacks_.on_state_change(state, status);
}

void PresenceSession::LoseAuthority(SessionState state,
                                    const absl::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    held_.clear();
  }
  SetState(state, status);
  if (callbacks_.on_authority_lost) callbacks_.on_authority_lost(status);
}

absl::Status PresenceSession::Register() {
  hub::v1::RegisterAgentRequest request = options_.registration;
  request.clear_hub_instance_id();
  request.clear_store_fingerprint();
  {
    absl::MutexLock lock(&mu_);
    // The store must stay the same; the hub instance may be new.
    if (!store_fingerprint_.empty()) {
      request.set_store_fingerprint(store_fingerprint_);
    }
  }
  absl::StatusOr<hub::v1::RegisterAgentResponse> response =
      client_->RegisterAgent(request);
  if (!response.ok()) return response.status();
  absl::MutexLock lock(&mu_);
  generation_ = response->presence_generation();
  hub_instance_id_ = response->hub_instance_id();
  store_fingerprint_ = response->store_fingerprint();
  return absl::OkStatus();
}

PresenceSession::Next PresenceSession::Classify(const absl::Status& status) {
  const std::string reason = ReasonOf(status);
  if (reason == "STALE_HUB_INSTANCE" || reason == "AGENT_OFFLINE" ||
      reason == "AGENT_NOT_FOUND") {
    return Next::kCheckOwner;
  }
  if (reason == "STALE_PRESENCE_OWNER" ||
      reason == "PRESENCE_STREAM_REPLACED" || reason == "AGENT_DEREGISTERED") {
    LoseAuthority(SessionState::kSuperseded, status);
    return Next::kStop;
  }
  if (reason == "HUB_SHUTTING_DOWN" || IsTransient(status)) {
    return Next::kReattach;
  }
  LoseAuthority(SessionState::kFailed, status);
  return Next::kStop;
}

PresenceSession::Next PresenceSession::CheckOwner(absl::Status* why) {
  hub::v1::GetAgentRequest request;
  request.set_agent_id(options_.registration.agent_id());
  absl::StatusOr<hub::v1::GetAgentResponse> agent = client_->GetAgent(request);
  if (!agent.ok()) {
    if (ReasonOf(agent.status()) == "AGENT_NOT_FOUND") {
      return Next::kReregister;
    }
    if (IsTransient(agent.status())) {
      *why = agent.status();
      return Next::kCheckOwner;
    }
    LoseAuthority(SessionState::kFailed, agent.status());
    return Next::kStop;
  }
  const int64_t stored = agent->agent().presence_generation();
  int64_t mine = 0;
  {
    absl::MutexLock lock(&mu_);
    mine = generation_;
  }
  if (stored == mine) return Next::kReregister;
  LoseAuthority(
      SessionState::kSuperseded,
      MakeHubError(absl::StatusCode::kFailedPrecondition,
                   "STALE_PRESENCE_OWNER",
                   absl::StrCat("agent ", options_.registration.agent_id(),
                                " was registered again (generation ", stored,
                                ", this session's ", mine, ")"),
                   {{"presence_generation", absl::StrCat(stored)}}));
  return Next::kStop;
}

void PresenceSession::Run() {
  Backoff backoff(options_.backoff);
  Next next = Next::kReregister;
  absl::Status why;
  int registrations_since_attach = 0;
  while (!stopping()) {
    if (next == Next::kCheckOwner) {
      next = CheckOwner(&why);
      if (next == Next::kStop) break;
      if (next == Next::kCheckOwner) {
        SetState(SessionState::kReconnecting, why);
        if (!PauseBeforeRetry(backoff)) break;
        continue;
      }
    }
    if (next == Next::kReregister) {
      // The first registration after a loss goes out at once; further ones
      // that did not lead to an attach are paced, so a hub that keeps
      // refusing the stream is not hammered.
      if (registrations_since_attach > 0 && !PauseBeforeRetry(backoff)) {
        break;
      }
      ++registrations_since_attach;
      SetState(SessionState::kConnecting, why);
      absl::Status registered = Register();
      if (!registered.ok()) {
        // A registration whose outcome is unknown is simply sent again: the
        // session only ever attaches with a generation it was told.
        if (ReasonOf(registered) == "STORE_FINGERPRINT_MISMATCH" ||
            !IsTransient(registered)) {
          LoseAuthority(SessionState::kFailed, registered);
          break;
        }
        why = registered;
        SetState(SessionState::kReconnecting, why);
        continue;  // the next registration waits out a backoff (above)
      }
    } else {
      SetState(SessionState::kConnecting, why);
    }
    bool attached = false;
    why = AttachOnce(backoff, &attached);
    if (attached) registrations_since_attach = 0;
    if (stopping()) break;
    next = Classify(why);
    if (next == Next::kStop) break;
    if (next == Next::kReattach) {
      SetState(SessionState::kReconnecting, why);
      if (!PauseBeforeRetry(backoff)) break;
    }
  }
  SessionState final_state;
  bool registered = false;
  int64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    final_state = state_;
    registered = generation_ > 0;
    generation = generation_;
    held_.clear();
  }
  if (final_state == SessionState::kSuperseded ||
      final_state == SessionState::kFailed) {
    return;
  }
  if (options_.deregister_on_stop && registered) {
    hub::v1::DeregisterRequest request;
    request.set_agent_id(options_.registration.agent_id());
    request.set_presence_generation(generation);
    CallOptions call;
    call.deadline = absl::Seconds(2);
    // Best effort: a superseded or unreachable registration is left alone.
    (void)client_->Deregister(request, call);
  }
  SetState(SessionState::kStopped, absl::OkStatus());
}

absl::Status PresenceSession::AttachOnce(Backoff& backoff, bool* attached) {
  grpc::ClientContext context;
  hub::v1::AttachRequest hello;
  hello.set_frame_id(next_frame_id_++);
  hub::v1::AttachHello* h = hello.mutable_hello();
  h->set_agent_id(options_.registration.agent_id());
  if (options_.registration.has_heartbeat_ttl()) {
    *h->mutable_lease_ttl() = options_.registration.heartbeat_ttl();
  }
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::CancelledError("stopping");
    context_ = &context;
    h->set_presence_generation(generation_);
    if (!hub_instance_id_.empty()) h->set_hub_instance_id(hub_instance_id_);
    if (!store_fingerprint_.empty()) {
      h->set_store_fingerprint(store_fingerprint_);
    }
    awaiting_reply_since_ = absl::Now();
    ticker_wake_ = true;
  }
  std::unique_ptr<Stream> stream = client_->Attach(&context);
  {
    absl::MutexLock lock(&write_mu_);
    stream_ = stream.get();
  }
  absl::Status fenced;  // from a fencing notice, if the hub sent one
  if (Write(hello).ok()) {
    hub::v1::AttachResponse frame;
    while (stream->Read(&frame)) {
      if (frame.has_attached()) {
        const hub::v1::PresenceAttached& a = frame.attached();
        absl::Duration ttl = FromProto(a.lease_ttl());
        if (ttl <= absl::ZeroDuration()) ttl = absl::Seconds(30);
        {
          absl::MutexLock lock(&mu_);
          attached_ = true;
          hub_instance_id_ = a.hub_instance_id();
          store_fingerprint_ = a.store_fingerprint();
          heartbeat_interval_ = ttl * options_.heartbeat_fraction;
          next_heartbeat_at_ = absl::Now() + heartbeat_interval_;
          awaiting_reply_since_ = absl::InfiniteFuture();
          ticker_wake_ = true;
        }
        backoff.Reset();
        *attached = true;
        SetState(SessionState::kAttached, absl::OkStatus());
        RevalidateRoles();
        continue;
      }
      if (frame.has_event() && frame.event().has_fencing()) {
        const hub::v1::FencingNotice& notice = frame.event().fencing();
        const std::string reason = WireReason(notice.reason());
        fenced = MakeHubError(
            reason == "HUB_SHUTTING_DOWN" || reason == "HUB_SEAT_LOST"
                ? absl::StatusCode::kUnavailable
                : absl::StatusCode::kFailedPrecondition,
            reason, notice.message(),
            {{"presence_generation",
              absl::StrCat(notice.current_presence_generation())},
             {"hub_instance_id", notice.hub_instance_id()}});
        continue;
      }
      Dispatch(frame);
    }
  }
  context.TryCancel();  // unblocks a writer stuck in flow control
  {
    absl::MutexLock lock(&write_mu_);
    stream_ = nullptr;
  }
  absl::Status ended = FromGrpcStatus(stream->Finish());
  {
    absl::MutexLock lock(&mu_);
    context_ = nullptr;
    attached_ = false;
    awaiting_reply_since_ = absl::InfiniteFuture();
  }
  FailPendingAcks(absl::UnavailableError(
      "the presence stream ended before the hub answered the ACK"));
  if (ReasonOf(ended).empty() && !fenced.ok()) return fenced;
  if (ended.ok()) {
    return absl::UnavailableError("the hub closed the presence stream");
  }
  return ended;
}

void PresenceSession::Dispatch(const hub::v1::AttachResponse& frame) {
  switch (frame.frame_case()) {
    case hub::v1::AttachResponse::kLeaseAck: {
      absl::MutexLock lock(&mu_);
      awaiting_reply_since_ = absl::InfiniteFuture();
      return;
    }
    case hub::v1::AttachResponse::kEvent:
      OnEvent(frame.event());
      return;
    case hub::v1::AttachResponse::kActivationAckResult:
    case hub::v1::AttachResponse::kFrameError: {
      std::optional<hub::v1::RoleActivation> activation;
      {
        absl::MutexLock lock(&mu_);
        auto it = pending_acks_.find(frame.frame_id());
        if (it != pending_acks_.end()) {
          activation = std::move(it->second);
          pending_acks_.erase(it);
        }
        if (frame.has_activation_ack_result() && activation.has_value()) {
          const hub::v1::Role& role = frame.activation_ack_result().role();
          held_[activation->role_key_wire()] =
              HeldRole{role.epoch(), role.activation_id()};
        }
      }
      if (!activation.has_value()) return;
      if (!callbacks_.on_activation_result) return;
      if (frame.has_activation_ack_result()) {
        callbacks_.on_activation_result(*activation,
                                        frame.activation_ack_result());
      } else {
        const hub::v1::ErrorStatus& e = frame.frame_error();
        std::map<std::string, std::string> metadata(e.metadata().begin(),
                                                    e.metadata().end());
        callbacks_.on_activation_result(
            *activation,
            MakeHubError(e.code() == 0
                             ? absl::StatusCode::kUnknown
                             : static_cast<absl::StatusCode>(e.code()),
                         WireReason(e.reason()), e.message(), metadata));
      }
      return;
    }
    default:
      return;  // attached is handled by the caller; message_ack_result and
               // unknown frames need nothing.
  }
}

void PresenceSession::OnEvent(const hub::v1::PresenceEvent& event) {
  switch (event.event_case()) {
    case hub::v1::PresenceEvent::kRoleActivation:
      if (callbacks_.on_role_activation &&
          callbacks_.on_role_activation(event.role_activation())) {
        (void)SendActivationAck(event.role_activation());
      }
      return;
    case hub::v1::PresenceEvent::kRoleActivationCancel: {
      const hub::v1::RoleActivationCancel& cancel =
          event.role_activation_cancel();
      {
        absl::MutexLock lock(&mu_);
        auto it = held_.find(cancel.role_key_wire());
        if (it != held_.end() && it->second.epoch <= cancel.epoch()) {
          held_.erase(it);
        }
      }
      if (callbacks_.on_activation_cancel) {
        callbacks_.on_activation_cancel(cancel);
      }
      return;
    }
    case hub::v1::PresenceEvent::kMessage:
      if (callbacks_.on_message && callbacks_.on_message(event.message())) {
        (void)AckMessages({event.message().message().message_id()});
      }
      return;
    case hub::v1::PresenceEvent::kRoleChange: {
      ApplyRoleState(event.role_change().role());
      if (callbacks_.on_role_change) {
        callbacks_.on_role_change(event.role_change());
      }
      return;
    }
    case hub::v1::PresenceEvent::kRoleProbe: {
      const bool ready = callbacks_.on_role_probe
                             ? callbacks_.on_role_probe(event.role_probe())
                             : static_cast<bool>(callbacks_.on_role_activation);
      hub::v1::AttachRequest frame;
      frame.set_frame_id(next_frame_id_++);
      frame.mutable_probe_reply()->set_probe_id(event.role_probe().probe_id());
      frame.mutable_probe_reply()->set_ready(ready);
      (void)Write(frame);
      return;
    }
    default:
      return;  // new cases are ignored, as the contract asks.
  }
}

void PresenceSession::ApplyRoleState(const hub::v1::Role& role) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(role.role_key_wire());
  if (it == held_.end() || role.epoch() < it->second.epoch) {
    return;  // not held, or news from before the held epoch
  }
  // The authority of an epoch ends when the epoch moves past it or another
  // agent holds the role.
  if (role.epoch() > it->second.epoch ||
      role.holder_agent_id() != options_.registration.agent_id()) {
    held_.erase(it);
  }
}

// After a re-attach the session may have missed role changes: a held role
// stays held only if the hub still names this agent at the same epoch.
void PresenceSession::RevalidateRoles() {
  std::map<std::string, HeldRole> held;
  {
    absl::MutexLock lock(&mu_);
    held = held_;
  }
  for (const auto& [wire, role] : held) {
    hub::v1::GetRoleRequest request;
    request.set_role_key_wire(wire);
    absl::StatusOr<hub::v1::GetRoleResponse> current =
        client_->GetRole(request);
    const bool keep =
        current.ok() && current->role().epoch() == role.epoch &&
        current->role().holder_agent_id() == options_.registration.agent_id();
    if (!keep) {
      absl::MutexLock lock(&mu_);
      auto it = held_.find(wire);
      if (it != held_.end() && it->second.epoch == role.epoch) held_.erase(it);
    }
  }
}

absl::Status PresenceSession::Write(const hub::v1::AttachRequest& frame) {
  absl::MutexLock lock(&write_mu_);
  if (stream_ == nullptr) {
    return absl::UnavailableError("no presence stream is attached");
  }
  if (!stream_->Write(frame)) {
    return absl::UnavailableError("the presence stream is closed");
  }
  return absl::OkStatus();
}

absl::Status PresenceSession::SendActivationAck(
    const hub::v1::RoleActivation& activation) {
  hub::v1::AttachRequest frame;
  const int64_t frame_id = next_frame_id_++;
  frame.set_frame_id(frame_id);
  FillAcceptingAck(activation, frame.mutable_activation_ack());
  {
    absl::MutexLock lock(&mu_);
    pending_acks_[frame_id] = activation;
  }
  absl::Status sent = Write(frame);
  if (!sent.ok()) {
    absl::MutexLock lock(&mu_);
    pending_acks_.erase(frame_id);
  }
  return sent;
}

absl::Status PresenceSession::AckActivation(
    const hub::v1::RoleActivation& activation) {
  return SendActivationAck(activation);
}

absl::Status PresenceSession::AckMessages(
    const std::vector<std::string>& message_ids) {
  if (message_ids.empty() || message_ids.size() > 100) {
    return absl::InvalidArgumentError("AckMessages takes 1..100 message ids");
  }
  hub::v1::AttachRequest frame;
  frame.set_frame_id(next_frame_id_++);
  for (const std::string& id : message_ids) {
    frame.mutable_message_ack()->add_message_ids(id);
  }
  return Write(frame);
}

void PresenceSession::FailPendingAcks(const absl::Status& status) {
  std::map<int64_t, hub::v1::RoleActivation> pending;
  {
    absl::MutexLock lock(&mu_);
    pending.swap(pending_acks_);
  }
  if (!callbacks_.on_activation_result) return;
  for (const auto& [frame_id, activation] : pending) {
    callbacks_.on_activation_result(activation, status);
  }
}

void PresenceSession::Tick() {
  mu_.Lock();
  while (!stopping_) {
    absl::Time wake = absl::InfiniteFuture();
    if (attached_) wake = next_heartbeat_at_;
    if (awaiting_reply_since_ != absl::InfiniteFuture()) {
      wake = std::min(wake, awaiting_reply_since_ + options_.reply_timeout);
    }
    ticker_wake_ = false;
    mu_.AwaitWithDeadline(absl::Condition(&ticker_wake_), wake);
    if (stopping_) break;
    const absl::Time now = absl::Now();
    if (awaiting_reply_since_ != absl::InfiniteFuture() &&
        now >= awaiting_reply_since_ + options_.reply_timeout) {
      // The hub stopped answering: end the stream; the session thread
      // reconnects.
      awaiting_reply_since_ = absl::InfiniteFuture();
      if (context_ != nullptr) context_->TryCancel();
      continue;
    }
    if (attached_ && now >= next_heartbeat_at_) {
      next_heartbeat_at_ = now + heartbeat_interval_;
      if (awaiting_reply_since_ == absl::InfiniteFuture()) {
        awaiting_reply_since_ = now;
      }
      hub::v1::AttachRequest frame;
      frame.set_frame_id(next_frame_id_++);
      frame.mutable_heartbeat();
      mu_.Unlock();
      (void)Write(frame);
      mu_.Lock();
    }
  }
  mu_.Unlock();
}

}  // namespace hub::client
