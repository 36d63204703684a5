#include "hub/services/presence_service.h"

#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "hub/edge/call_gate.h"
#include "hub/observability/rpc_observer.h"
#include "hub/services/error_mapping.h"
#include "hub/services/malformed_request.h"
#include "hub/services/message_mapping.h"
#include "hub/services/presence_mapping.h"
#include "hub/services/proto_time.h"
#include "hub/services/reservation_service.h"
#include "hub/services/role_mapping.h"
#include "hub/v1/errors.pb.h"
#include "hub/v1/role_activation.pb.h"
#include "registry/agent_validation.h"
#include "registry/role_key.h"
#include "status/status.h"
#include "storage/group_commit_writer.h"

namespace hub {
namespace {

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;

constexpr absl::string_view kAttachMethod = "/hub.v1.PresenceService/Attach";

HubFence FenceOf(bool has_instance, const std::string& instance,
                 bool has_fingerprint, const std::string& fingerprint) {
  HubFence fence;
  if (has_instance) fence.hub_instance_id = instance;
  if (has_fingerprint) fence.store_fingerprint = fingerprint;
  return fence;
}

hub::v1::RoleActivation ToRoleActivationProto(const ActivationEnvelope& e) {
  hub::v1::RoleActivation a;
  a.set_schema("tfx.role-activation.v1");
  a.mutable_role_key()->set_project_id(e.role_key.project_id);
  a.mutable_role_key()->set_kind(e.role_key.kind == RoleKind::kCto
                                     ? hub::v1::ROLE_KIND_CTO
                                     : hub::v1::ROLE_KIND_LEAD);
  a.mutable_role_key()->set_scope_id(e.role_key.scope_id);
  a.set_role_key_wire(e.role_key_wire);
  a.set_epoch(e.epoch);
  a.set_activation_seq(e.activation_seq);
  a.set_activation_id(e.activation_id);
  a.set_charter_version(e.charter_version);
  hub::v1::AgentCli cli = hub::v1::AGENT_CLI_OTHER;
  if (e.holder_cli == "codex") cli = hub::v1::AGENT_CLI_CODEX;
  if (e.holder_cli == "gemini") cli = hub::v1::AGENT_CLI_GEMINI;
  if (e.holder_cli == "claude") cli = hub::v1::AGENT_CLI_CLAUDE;
  a.set_holder_cli(cli);
  a.set_holder_agent_id(e.holder_agent_id);
  *a.mutable_ack_deadline() =
      ToProtoTimestamp(absl::FromUnixMillis(e.ack_deadline_ms));
  return a;
}

hub::v1::RoleKey ToRoleKeyProto(const RoleKey& key) {
  hub::v1::RoleKey out;
  out.set_project_id(key.project_id);
  out.set_kind(key.kind == RoleKind::kCto ? hub::v1::ROLE_KIND_CTO
                                          : hub::v1::ROLE_KIND_LEAD);
  out.set_scope_id(key.scope_id);
  return out;
}

hub::v1::RoleProbe ToRoleProbeProto(const RoleProbeEnvelope& p) {
  hub::v1::RoleProbe out;
  out.set_probe_id(p.probe_id);
  *out.mutable_role_key() = ToRoleKeyProto(p.role_key);
  out.set_role_key_wire(p.role_key_wire);
  out.set_epoch(p.epoch);
  out.set_activation_id(p.activation_id);
  *out.mutable_deadline() =
      ToProtoTimestamp(absl::FromUnixMillis(p.deadline_ms));
  return out;
}

}  // namespace

// One presence stream. All state is guarded by `mu_`; gRPC calls the
// On*() methods on its threads and the registry may fence the stream from
// any thread (through Sink), so every path takes the lock. Writes are
// queued and issued one at a time; Finish comes after the queue drains.
class PresenceServiceImpl::AttachReactor final
    : public grpc::ServerBidiReactor<AttachRequest, AttachResponse> {
 public:
  AttachReactor(PresenceServiceImpl* service,
                grpc::CallbackServerContext* context)
      : service_(service), sink_(std::make_shared<Sink>(this)) {
    if (service_->metrics_ != nullptr) {
      observed_.emplace(service_->metrics_, kSelfObservedAttach,
                        /*streaming=*/true);
    }
    // The agent a hello attaches is checked when it arrives (AdmitFrame).
    absl::StatusOr<AdmittedStream> admitted = service_->admission_->AdmitStream(
        *context, AttachRequest::descriptor(), nullptr,
        [this](const absl::Status& idle) {
          absl::MutexLock lock(&mu_);
          FinishLocked(idle);
        });
    if (!admitted.ok()) {
      absl::MutexLock lock(&mu_);
      FinishLocked(admitted.status());
      return;
    }
    principal_ = std::move(admitted->principal);
    ticket_ = std::move(admitted->ticket);
    MarkUnread(&request_);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    std::function<void()> write;
    {
      absl::MutexLock lock(&mu_);
      if (!ok) {
        // A frame that does not parse ends the stream as the contract says;
        // a half-close or a broken connection ends it OK (and detaches),
        // once the frames read before it are answered (a broken connection
        // is also cancelled, which ends it at once).
        if (ReadFailedToParse(request_)) {
          FinishLocked(MalformedRequestError(kAttachMethod));
        } else if (writes_in_flight_ > 0) {
          half_closed_ = true;
        } else {
          FinishLocked(absl::OkStatus());
        }
        return;
      }
      if (finishing_) return;
      if (ticket_ != nullptr) ticket_->Touch();
      if (observed_.has_value()) observed_->Received(&request_);
      HandleFrameLocked();
      write = std::move(write_);
      write_ = nullptr;
      if (!finishing_) ReadNextLocked();
    }
    // Outside the lock: its answer comes back through the sink, maybe at
    // once on this thread.
    if (write) write();
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock lock(&mu_);
    writing_ = false;
    current_ = AttachResponse();  // frees what the frame held
    if (!ok) {
      finishing_ = true;
      outbox_.clear();
    }
    PumpLocked();
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    FinishLocked(absl::CancelledError("presence stream cancelled"));
  }

  void OnDone() override {
    sink_->Release();
    if (attached_) service_->registry_->Detach(agent_id_, stream_id_);
    delete this;
  }

  // Pushes a role activation event; false once the stream is closing.
  bool DeliverActivation(const ActivationEnvelope& envelope) {
    return PushEvent(envelope.activation_id, [&](hub::v1::PresenceEvent* e) {
      *e->mutable_role_activation() = ToRoleActivationProto(envelope);
    });
  }

  // Pushes a role probe event; false once the stream is closing.
  bool DeliverProbe(const RoleProbeEnvelope& probe) {
    return PushEvent(probe.probe_id, [&](hub::v1::PresenceEvent* e) {
      *e->mutable_role_probe() = ToRoleProbeProto(probe);
    });
  }

  // Pushes a message event; false once the stream is closing.
  bool DeliverMessage(const MessageDelivery& delivery) {
    return PushEvent(delivery.message.id, [&](hub::v1::PresenceEvent* e) {
      *e->mutable_message() = ToDeliveryProto(delivery);
    });
  }

  // The answer to a message_ack frame, once its write is done.
  void AnswerMessageAck(int64_t frame_id, absl::StatusOr<AckResult> result) {
    absl::MutexLock lock(&mu_);
    --writes_in_flight_;
    --acks_in_flight_;
    if (!result.ok()) {
      AnswerErrorLocked(frame_id, result.status());
    } else {
      AttachResponse response;
      response.set_frame_id(frame_id);
      *response.mutable_message_ack_result() = ToAckResultProto(*result);
      QueueLocked(std::move(response));
    }
    ResumeReadingLocked();
  }

  // The answer to an activation_ack frame, once the activator decided.
  void AnswerActivationAck(int64_t frame_id,
                           absl::StatusOr<AckOutcome> outcome) {
    absl::MutexLock lock(&mu_);
    --writes_in_flight_;
    if (!outcome.ok()) {
      AnswerErrorLocked(frame_id, outcome.status());
    } else {
      AttachResponse response;
      response.set_frame_id(frame_id);
      hub::v1::RoleActivationAckResult* result =
          response.mutable_activation_ack_result();
      result->set_idempotent(outcome->idempotent);
      *result->mutable_role() = ToRoleProto(outcome->role);
      result->set_backlog_delivered_count(outcome->backlog_delivered);
      QueueLocked(std::move(response));
    }
    ResumeReadingLocked();
  }

  // A frame's write was answered: the stream ends if the client half-closed
  // and this was the last answer it waited for; otherwise reading resumes
  // if it paused for the writes.
  void ResumeReadingLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (half_closed_) {
      if (writes_in_flight_ == 0) FinishLocked(absl::OkStatus());
      return;
    }
    if (read_paused_ && !finishing_) {
      read_paused_ = false;
      ReadNextLocked();
    }
  }

  // Pushes a role change event; false once the stream is closing.
  bool DeliverRoleChange(const RoleChangeNotice& notice) {
    return PushEvent(notice.event_id, [&](hub::v1::PresenceEvent* e) {
      *e->mutable_role_change() =
          ToRoleChangeProto(notice.event, notice.previous_state);
    });
  }

  // Pushes the end of one of the agent's reservations; false once the
  // stream is closing.
  bool DeliverReservationEnd(const ReservationEndNotice& notice) {
    return PushEvent(notice.event_id, [&](hub::v1::PresenceEvent* e) {
      *e->mutable_reservation_ended() = ReservationChangeToProto(notice.change);
    });
  }

  // Ends the stream after a fencing notice (called by the registry).
  void Fence(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    FenceLocked(status);
  }

 private:
  void FenceLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    // The agent's own goodbye deregistered it: that is how it meant to end.
    if (leaving_ && ReasonOf(status) == "AGENT_DEREGISTERED") {
      FinishLocked(absl::OkStatus());
      return;
    }
    // Every end that takes the stream's authority away is announced first
    // (presence.proto, FencingNotice): a stale fence, and this hub shutting
    // down or losing its seat among the hubs sharing its database.
    const std::string reason = ReasonOf(status);
    if (status.code() == absl::StatusCode::kFailedPrecondition ||
        reason == "HUB_SHUTTING_DOWN" || reason == "HUB_SEAT_LOST") {
      QueueFencingLocked(status);
    }
    FinishLocked(status);
  }

  // The registry's handle on this stream. It outlives the reactor (the
  // registry may hold it a little longer), so it forgets the reactor first.
  class Sink final : public PresenceStream {
   public:
    explicit Sink(AttachReactor* reactor) : reactor_(reactor) {}
    void Fence(const absl::Status& status) override {
      absl::MutexLock lock(&mu_);
      if (reactor_ != nullptr) reactor_->Fence(status);
    }
    bool DeliverActivation(const ActivationEnvelope& envelope) override {
      absl::MutexLock lock(&mu_);
      return reactor_ != nullptr && reactor_->DeliverActivation(envelope);
    }
    bool DeliverMessage(const MessageDelivery& delivery) override {
      absl::MutexLock lock(&mu_);
      return reactor_ != nullptr && reactor_->DeliverMessage(delivery);
    }
    bool DeliverProbe(const RoleProbeEnvelope& probe) override {
      absl::MutexLock lock(&mu_);
      return reactor_ != nullptr && reactor_->DeliverProbe(probe);
    }
    // Dropped once the stream is gone (the write still happened).
    void AnswerMessageAck(int64_t frame_id, absl::StatusOr<AckResult> result) {
      absl::MutexLock lock(&mu_);
      if (reactor_ != nullptr)
        reactor_->AnswerMessageAck(frame_id, std::move(result));
    }
    // The backlog's pushes follow the answer, with no lock held (they take
    // this stream's).
    void AnswerActivationAck(int64_t frame_id,
                             absl::StatusOr<AckOutcome> outcome) {
      std::function<void()> push;
      if (outcome.ok()) push = std::move(outcome->push_backlog);
      {
        absl::MutexLock lock(&mu_);
        if (reactor_ != nullptr)
          reactor_->AnswerActivationAck(frame_id, std::move(outcome));
      }
      if (push) push();
    }
    bool DeliverRoleChange(const RoleChangeNotice& notice) override {
      absl::MutexLock lock(&mu_);
      return reactor_ != nullptr && reactor_->DeliverRoleChange(notice);
    }
    bool DeliverReservationEnd(const ReservationEndNotice& notice) override {
      absl::MutexLock lock(&mu_);
      return reactor_ != nullptr && reactor_->DeliverReservationEnd(notice);
    }
    void AnswerGoodbye(int64_t frame_id, const absl::Status& status) {
      absl::MutexLock lock(&mu_);
      if (reactor_ != nullptr) reactor_->AnswerGoodbye(frame_id, status);
    }
    void Release() {
      absl::MutexLock lock(&mu_);
      reactor_ = nullptr;
    }

   private:
    absl::Mutex mu_;
    AttachReactor* reactor_ ABSL_GUARDED_BY(mu_);
  };

  void HandleFrameLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const int64_t frame_id = request_.frame_id();
    if (!attached_) {
      if (!request_.has_hello()) {
        FinishLocked(InvalidArgumentError(
            "REQUEST_INVALID",
            "the first frame of a presence stream must be hello"));
        return;
      }
      HelloLocked(frame_id);
      return;
    }
    switch (request_.frame_case()) {
      case AttachRequest::kHello:
        FinishLocked(InvalidArgumentError("REQUEST_INVALID",
                                          "hello may only be sent once"));
        return;
      case AttachRequest::kHeartbeat:
        HeartbeatLocked(frame_id);
        return;
      case AttachRequest::kActivationAck:
        ActivationAckLocked(frame_id);
        return;
      case AttachRequest::kMessageAck:
        MessageAckLocked(frame_id);
        return;
      case AttachRequest::FRAME_NOT_SET:
        AnswerErrorLocked(frame_id,
                          WithMetadata(InvalidArgumentError(
                                           "REQUEST_INVALID",
                                           "the frame carries no frame kind"),
                                       "field", "frame"));
        return;
      case AttachRequest::kProbeReply:
        ProbeReplyLocked(frame_id);
        return;
      case AttachRequest::kGoodbye:
        GoodbyeLocked(frame_id);
        return;
      default:
        AnswerErrorLocked(
            frame_id, InvalidArgumentError("REQUEST_INVALID",
                                           "the frame sets none of its cases"));
        return;
    }
  }

  void HelloLocked(int64_t frame_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const hub::v1::AttachHello& hello = request_.hello();
    if (absl::Status s = service_->admission_->AdmitFrame(principal_, request_);
        !s.ok()) {
      FinishLocked(s);
      return;
    }
    if (hello.has_lease_ttl()) {
      absl::Status s = CheckProtoDuration(hello.lease_ttl(), "hello.lease_ttl");
      if (s.ok()) {
        // Checked after truncation to whole milliseconds, like every TTL.
        s = ValidateTtl(absl::Milliseconds(absl::ToInt64Milliseconds(
                            FromProtoDuration(hello.lease_ttl()))),
                        service_->registry_->config());
        s = WithMetadata(std::move(s), "field", "hello.lease_ttl");
      }
      if (!s.ok()) {
        FinishLocked(s);
        return;
      }
    }
    HubFence fence =
        FenceOf(hello.has_hub_instance_id(), hello.hub_instance_id(),
                hello.has_store_fingerprint(), hello.store_fingerprint());
    absl::StatusOr<uint64_t> stream_id = service_->registry_->Attach(
        hello.agent_id(), hello.presence_generation(), fence, sink_);
    if (!stream_id.ok()) {
      if (stream_id.status().code() == absl::StatusCode::kFailedPrecondition) {
        QueueFencingLocked(stream_id.status());
      }
      FinishLocked(stream_id.status());
      return;
    }
    attached_ = true;
    agent_id_ = hello.agent_id();
    generation_ = hello.presence_generation();
    stream_id_ = *stream_id;
    absl::StatusOr<AgentView> view = service_->registry_->Get(agent_id_);
    AttachResponse response;
    response.set_frame_id(frame_id);
    hub::v1::PresenceAttached* attached = response.mutable_attached();
    const absl::Time now = service_->clock_->Now();
    if (view.ok()) {
      view->stream_attached = true;
      *attached->mutable_agent() = ToAgentProto(*view, now);
      *attached->mutable_lease_expires_at() =
          ToProtoTimestamp(absl::FromUnixMillis(view->record.lease_expires_ms));
      *attached->mutable_lease_ttl() = ToProtoDuration(view->ttl);
    }
    attached->set_presence_generation(generation_);
    *attached->mutable_detach_grace() =
        ToProtoDuration(service_->options_.detach_grace);
    *attached->mutable_keepalive_interval() =
        ToProtoDuration(service_->options_.keepalive_interval);
    attached->set_hub_instance_id(service_->hub_instance_id_);
    attached->set_store_fingerprint(service_->store_fingerprint_);
    *attached->mutable_server_time() = ToProtoTimestamp(now);
    QueueLocked(std::move(response));
    // Pending messages follow `attached`. They are pushed from the pool: a
    // push comes back into this reactor, whose lock is held here. Those
    // created after `now` (read after the stream was registered) were
    // pushed by their own publish.
    if (Messaging* messaging = service_->messaging_.load()) {
      service_->pool_->Schedule(
          [messaging, agent = agent_id_, up_to = UnixMillis(now)] {
            messaging->PushPending(agent, up_to);
          });
    }
  }

  void HeartbeatLocked(int64_t frame_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Status current =
        service_->registry_->CheckStream(agent_id_, generation_, stream_id_);
    if (!current.ok()) {
      FenceLocked(current);  // as the registry's fence would have
      return;
    }
    HeartbeatInput input;
    input.agent_id = agent_id_;
    input.generation = generation_;
    if (request_.heartbeat().has_ttl()) {
      if (absl::Status s =
              CheckProtoDuration(request_.heartbeat().ttl(), "heartbeat.ttl");
          !s.ok()) {
        AnswerErrorLocked(frame_id, s);
        return;
      }
      input.ttl = FromProtoDuration(request_.heartbeat().ttl());
    }
    absl::StatusOr<AgentView> view = service_->registry_->Heartbeat(input);
    if (!view.ok()) {
      if (view.status().code() == absl::StatusCode::kFailedPrecondition) {
        QueueFencingLocked(view.status());
        FinishLocked(view.status());
      } else {
        AnswerErrorLocked(frame_id, view.status());
      }
      return;
    }
    AttachResponse response;
    response.set_frame_id(frame_id);
    hub::v1::PresenceLeaseAck* ack = response.mutable_lease_ack();
    *ack->mutable_lease_expires_at() =
        ToProtoTimestamp(absl::FromUnixMillis(view->record.lease_expires_ms));
    *ack->mutable_lease_ttl() = ToProtoDuration(view->ttl);
    ack->set_presence_generation(view->record.presence_generation);
    ack->set_status(hub::v1::AGENT_STATUS_ONLINE);
    *ack->mutable_server_time() = ToProtoTimestamp(service_->clock_->Now());
    QueueLocked(std::move(response));
  }

  // The principal of an ACK on a stream is the stream's own agent. The ACK
  // writes (the role, the backlog it hands over) and so runs on the pool,
  // off this stream's lock, answering through the sink like a message ack.
  void ActivationAckLocked(int64_t frame_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Activator* activator = service_->activator_.load();
    if (activator == nullptr) {
      AnswerErrorLocked(frame_id,
                        UnavailableError("ROLE_ACTIVATOR_UNAVAILABLE",
                                         "this hub runs no activator"));
      return;
    }
    ++writes_in_flight_;
    write_ = [pool = service_->pool_, activator, sink = sink_, frame_id,
              ack = ToActivationAck(request_.activation_ack(), agent_id_)] {
      pool->Schedule([activator, sink, frame_id, ack] {
        sink->AnswerActivationAck(frame_id, activator->Ack(ack));
      });
    };
  }

  // A probe answer: hands it to the waiting prober and sends nothing back,
  // unless no probe of this stream awaits it (frame_error).
  void ProbeReplyLocked(int64_t frame_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const hub::v1::AttachProbeReply& reply = request_.probe_reply();
    if (reply.probe_id().empty()) {
      AnswerErrorLocked(
          frame_id,
          WithMetadata(InvalidArgumentError("REQUEST_INVALID",
                                            "probe_reply needs the probe_id"),
                       "field", "probe_id"));
      return;
    }
    absl::Status answered = service_->registry_->AnswerProbe(
        agent_id_, stream_id_, reply.probe_id(), reply.ready());
    if (!answered.ok()) AnswerErrorLocked(frame_id, answered);
  }

  // The acknowledging agent of a message_ack frame is the stream's agent.
  // The write runs after the lock is released (OnReadDone) and answers
  // through the sink when durable; reading pauses while
  // kMaxAcksInFlight such frames wait for theirs. Frames that come while
  // earlier ones are written are written together (Messaging's
  // AckCoalescer), so an agent that acks a few ids per frame keeps up
  // with what it is sent.
  void MessageAckLocked(int64_t frame_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Messaging* messaging = service_->messaging_.load();
    if (messaging == nullptr) {
      AnswerErrorLocked(
          frame_id,
          absl::UnimplementedError("this hub version does not serve messages"));
      return;
    }
    std::vector<std::string> ids(request_.message_ack().message_ids().begin(),
                                 request_.message_ack().message_ids().end());
    ++writes_in_flight_;
    ++acks_in_flight_;
    write_ = [messaging, sink = sink_, agent_id = agent_id_,
              generation = generation_, frame_id, ids = std::move(ids)] {
      messaging->AckAsync(agent_id, ids, generation,
                          [sink, frame_id](absl::StatusOr<AckResult> result) {
                            sink->AnswerMessageAck(frame_id, std::move(result));
                          });
    };
  }

  // The agent leaves: deregistered (a write, on the pool) at this stream's
  // generation; the registry's fencing of this stream then ends it OK, not
  // with AGENT_DEREGISTERED. Nothing more is read meanwhile.
  void GoodbyeLocked(int64_t frame_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    leaving_ = true;
    ++writes_in_flight_;
    write_ = [pool = service_->pool_, registry = service_->registry_,
              sink = sink_, agent_id = agent_id_, generation = generation_,
              frame_id] {
      pool->Schedule([registry, sink, agent_id, generation, frame_id] {
        absl::StatusOr<DeregisterOutcome> left =
            registry->Deregister(agent_id, generation, HubFence{});
        sink->AnswerGoodbye(frame_id, left.status());
      });
    };
  }

  // The goodbye's deregistration is done: the stream ends OK, or, when it
  // failed, the goodbye is answered with the error and reading goes on.
  void AnswerGoodbye(int64_t frame_id, const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    --writes_in_flight_;
    if (status.ok()) {
      FinishLocked(absl::OkStatus());
      return;
    }
    leaving_ = false;
    AnswerErrorLocked(frame_id, status);
    if (!finishing_) {
      read_paused_ = false;
      ReadNextLocked();
    }
  }

  // Reads the next frame, unless too many frames wait for their writes.
  void ReadNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (leaving_) return;  // a goodbye's deregistration is in flight
    if (writes_in_flight_ - acks_in_flight_ >= kMaxWritesInFlight ||
        acks_in_flight_ >= kMaxAcksInFlight) {
      read_paused_ = true;
      return;
    }
    MarkUnread(&request_);
    StartRead(&request_);
  }

  void AnswerErrorLocked(int64_t frame_id, const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    AttachResponse response;
    response.set_frame_id(frame_id);
    *response.mutable_frame_error() = ToErrorStatus(status);
    QueueLocked(std::move(response));
  }

  // Queues an event with the stream's next sequence number, stamped now;
  // `fill` sets its payload. False (nothing queued) once the stream is
  // closing.
  bool PushEvent(absl::string_view event_id,
                 absl::FunctionRef<void(hub::v1::PresenceEvent*)> fill) {
    absl::MutexLock lock(&mu_);
    if (finishing_) return false;
    QueueEventLocked(event_id, fill);
    return true;
  }
  void QueueEventLocked(absl::string_view event_id,
                        absl::FunctionRef<void(hub::v1::PresenceEvent*)> fill)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    AttachResponse response;
    hub::v1::PresenceEvent* event = response.mutable_event();
    if (!event_id.empty()) event->set_event_id(std::string(event_id));
    event->set_sequence(++event_sequence_);
    *event->mutable_emitted_at() = ToProtoTimestamp(service_->clock_->Now());
    fill(event);
    QueueLocked(std::move(response));
  }

  void QueueFencingLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    QueueEventLocked("", [&](hub::v1::PresenceEvent* event) {
      hub::v1::FencingNotice* notice = event->mutable_fencing();
      hub::v1::ErrorStatus error = ToErrorStatus(status);
      notice->set_reason(error.reason());
      notice->set_message(std::move(*error.mutable_message()));
      const auto metadata = MetadataOf(status);
      if (auto it = metadata.find("presence_generation");
          it != metadata.end()) {
        int64_t generation = 0;
        if (absl::SimpleAtoi(it->second, &generation)) {
          notice->set_current_presence_generation(generation);
        }
      }
      notice->set_hub_instance_id(service_->hub_instance_id_);
      notice->set_store_fingerprint(service_->store_fingerprint_);
    });
  }

  void QueueLocked(AttachResponse response) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    outbox_.push_back(std::move(response));
    PumpLocked();
  }

  // Issues the next write, or the Finish once the queue is empty.
  void PumpLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finished_) return;
    if (!outbox_.empty()) {
      current_ = std::move(outbox_.front());
      outbox_.pop_front();
      writing_ = true;
      if (observed_.has_value()) observed_->Sending(&current_);
      // More frames are queued behind this one: gRPC may hold it and send
      // it with the next (one sendmsg for a burst of deliveries). The last
      // frame of the queue goes without the hint, so it flushes the rest.
      StartWrite(&current_, outbox_.empty()
                                ? grpc::WriteOptions()
                                : grpc::WriteOptions().set_buffer_hint());
      return;
    }
    if (finishing_) {
      finished_ = true;
      grpc::Status status = ToGrpcStatus(final_status_);
      if (observed_.has_value()) observed_->Finished(status);
      Finish(std::move(status));
    }
  }

  void FinishLocked(const absl::Status& status)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    final_status_ = status;
    PumpLocked();
  }

  PresenceServiceImpl* const service_;
  const std::shared_ptr<Sink> sink_;
  // The stream's metrics and log lines (hub/observability/rpc_observer.h), fed
  // under mu_; destroyed with the reactor (OnDone), which counts a stream that
  // never finished as CANCELLED.
  std::optional<CallObserver> observed_;

  absl::Mutex mu_;
  AttachRequest request_ ABSL_GUARDED_BY(mu_);
  // The frame being written, then empty again: an idle stream keeps no
  // copy of its last frame (nor the list a node: std::deque would keep one).
  AttachResponse current_ ABSL_GUARDED_BY(mu_);
  std::list<AttachResponse> outbox_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  // The client said goodbye: its deregistration is in flight.
  bool leaving_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status final_status_ ABSL_GUARDED_BY(mu_);
  int64_t event_sequence_ ABSL_GUARDED_BY(mu_) = 0;
  // Frames whose durable write is under way (message_ack frames among them
  // counted apart too: they wait merged, at most 100 ids each), the next
  // write to start once the lock is released, and whether reading waits
  // for them.
  static constexpr int kMaxWritesInFlight = 8;
  static constexpr int kMaxAcksInFlight = 64;
  int writes_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  int acks_in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<void()> write_ ABSL_GUARDED_BY(mu_);
  bool read_paused_ ABSL_GUARDED_BY(mu_) = false;
  // The client half-closed while frames waited for their writes: the
  // stream ends OK once they are answered.
  bool half_closed_ ABSL_GUARDED_BY(mu_) = false;
  // Set by the constructor: the stream's authenticated principal.
  Principal principal_;
  // Set once by the hello; read in OnDone after every callback finished.
  bool attached_ = false;
  std::string agent_id_;
  int64_t generation_ = 0;
  uint64_t stream_id_ = 0;
  // The stream's slot and idle watch; declared last so that it goes first
  // (its idle callback uses mu_). Set in the constructor.
  std::unique_ptr<StreamTicket> ticket_;
};

PresenceServiceImpl::PresenceServiceImpl(PresenceRegistry* registry,
                                         const Clock* clock, BlockingPool* pool,
                                         PresenceServiceOptions options,
                                         std::string hub_instance_id,
                                         std::string store_fingerprint)
    : registry_(registry),
      clock_(clock),
      pool_(pool),
      options_(options),
      hub_instance_id_(std::move(hub_instance_id)),
      store_fingerprint_(std::move(store_fingerprint)) {}

grpc::ServerUnaryReactor* PresenceServiceImpl::RegisterAgent(
    grpc::CallbackServerContext* context,
    const hub::v1::RegisterAgentRequest* request,
    hub::v1::RegisterAgentResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  absl::StatusOr<RegisterInput> input = ToRegisterInput(*request);
  if (!input.ok()) return FinishUnary(context, input.status());
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (authority_ != nullptr && !principal->anonymous) {
    if (authority_->OwnerKnown(input->agent_id)) {
      if (absl::Status s = authority_->CheckOwner(*principal, input->agent_id);
          !s.ok()) {
        reactor->Finish(ToGrpcStatus(s));
        return reactor;
      }
    } else {
      // The first registration of this agent id claims it for the caller
      // in the registration's own transaction, after every check: a
      // refused registration claims nothing.
      input->owner = principal->name;
    }
  }
  Register(reactor, *std::move(input), response);
  return reactor;
}

void PresenceServiceImpl::Register(grpc::ServerUnaryReactor* reactor,
                                   RegisterInput input,
                                   hub::v1::RegisterAgentResponse* response) {
  // No thread waits for the group commit: the answer is sent from the
  // store's completion thread once the registration is durable, or from
  // this one when it found the writer idle and committed the registration
  // itself (no lock is held here).
  std::optional<std::string> owner = input.owner;
  storage::CommitOnThisThread commit_here;
  registry_->RegisterAsync(
      input, [this, reactor, response,
              owner = std::move(owner)](absl::StatusOr<AgentView> view) {
        if (!view.ok()) {
          reactor->Finish(ToGrpcStatus(view.status()));
          return;
        }
        // Committed with the registration: later calls check it from memory.
        if (owner.has_value())
          authority_->RememberOwner(view->record.agent_id, *owner);
        const absl::Time now = clock_->Now();
        *response->mutable_agent() = ToAgentProto(*view, now);
        response->set_presence_generation(view->record.presence_generation);
        *response->mutable_lease_expires_at() = ToProtoTimestamp(
            absl::FromUnixMillis(view->record.lease_expires_ms));
        *response->mutable_heartbeat_ttl() = ToProtoDuration(view->ttl);
        response->set_hub_instance_id(hub_instance_id_);
        response->set_store_fingerprint(store_fingerprint_);
        *response->mutable_server_time() = ToProtoTimestamp(now);
        reactor->Finish(grpc::Status::OK);
      });
}

grpc::ServerUnaryReactor* PresenceServiceImpl::Heartbeat(
    grpc::CallbackServerContext* context,
    const hub::v1::HeartbeatRequest* request,
    hub::v1::HeartbeatResponse* response) {
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return FinishUnary(context, principal.status());
  }
  HeartbeatInput input;
  input.agent_id = request->agent_id();
  if (request->has_presence_generation()) {
    input.generation = request->presence_generation();
  }
  if (request->has_ttl()) {
    if (absl::Status s = CheckProtoDuration(request->ttl(), "ttl"); !s.ok()) {
      return FinishUnary(context, s);
    }
    input.ttl = FromProtoDuration(request->ttl());
  }
  input.fence =
      FenceOf(request->has_hub_instance_id(), request->hub_instance_id(),
              request->has_store_fingerprint(), request->store_fingerprint());
  absl::StatusOr<AgentView> view = registry_->Heartbeat(input);
  if (!view.ok()) return FinishUnary(context, view.status());
  response->set_agent_id(request->agent_id());
  response->set_presence_generation(view->record.presence_generation);
  *response->mutable_lease_expires_at() =
      ToProtoTimestamp(absl::FromUnixMillis(view->record.lease_expires_ms));
  response->set_status(hub::v1::AGENT_STATUS_ONLINE);
  response->set_hub_instance_id(hub_instance_id_);
  response->set_store_fingerprint(store_fingerprint_);
  *response->mutable_server_time() = ToProtoTimestamp(clock_->Now());
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* PresenceServiceImpl::Deregister(
    grpc::CallbackServerContext* context,
    const hub::v1::DeregisterRequest* request,
    hub::v1::DeregisterResponse* response) {
  // An admin may deregister any agent (clean-up); others only their own.
  if (absl::StatusOr<Principal> principal =
          admission_->AdmitCall(*context, *request);
      !principal.ok()) {
    return FinishUnary(context, principal.status());
  }
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  pool_->Schedule([this, reactor, request, response] {
    std::optional<int64_t> generation;
    if (request->has_presence_generation()) {
      generation = request->presence_generation();
    }
    absl::StatusOr<DeregisterOutcome> outcome = registry_->Deregister(
        request->agent_id(), generation,
        FenceOf(request->has_hub_instance_id(), request->hub_instance_id(),
                request->has_store_fingerprint(),
                request->store_fingerprint()));
    if (!outcome.ok()) {
      reactor->Finish(ToGrpcStatus(outcome.status()));
      return;
    }
    const absl::Time now = clock_->Now();
    *response->mutable_agent() = ToAgentProto(outcome->agent, now);
    response->set_changed(outcome->changed);
    response->set_hub_instance_id(hub_instance_id_);
    response->set_store_fingerprint(store_fingerprint_);
    *response->mutable_server_time() = ToProtoTimestamp(now);
    reactor->Finish(grpc::Status::OK);
  });
  return reactor;
}

grpc::ServerUnaryReactor* PresenceServiceImpl::GetAgent(
    grpc::CallbackServerContext* context,
    const hub::v1::GetAgentRequest* request,
    hub::v1::GetAgentResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  absl::StatusOr<AgentView> view = registry_->Get(request->agent_id());
  if (!view.ok()) return FinishUnary(context, view.status());
  // An agent of another project is refused as the write path refuses a
  // project outside the token's (PROJECT_SCOPE_MISMATCH).
  if (absl::Status s = RequireAgentInScope(*principal, request->agent_id(),
                                           view->record.project_id);
      !s.ok()) {
    return FinishUnary(context, s);
  }
  const absl::Time now = clock_->Now();
  *response->mutable_agent() = ToAgentProto(*view, now);
  *response->mutable_server_time() = ToProtoTimestamp(now);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* PresenceServiceImpl::ListAgents(
    grpc::CallbackServerContext* context,
    const hub::v1::ListAgentsRequest* request,
    hub::v1::ListAgentsResponse* response) {
  absl::StatusOr<Principal> principal =
      admission_->AdmitCall(*context, *request);
  if (!principal.ok()) return FinishUnary(context, principal.status());
  AgentFilter filter;
  for (int status : request->statuses()) {
    std::optional<AgentStatus> known =
        StatusFromProto(static_cast<hub::v1::AgentStatus>(status));
    if (!known.has_value()) {
      return FinishUnary(
          context, InvalidArgumentError("REQUEST_INVALID",
                                        "statuses holds an unknown status"));
    }
    filter.statuses.push_back(*known);
  }
  for (int cli : request->clis()) {
    std::string name = CliName(static_cast<hub::v1::AgentCli>(cli));
    if (name.empty()) {
      return FinishUnary(context,
                         InvalidArgumentError("AGENT_CLI_INVALID",
                                              "clis holds an unknown cli"));
    }
    filter.clis.push_back(std::move(name));
  }
  if (!request->project_id().empty()) {
    if (!IsProjectId(request->project_id())) {
      return FinishUnary(context,
                         InvalidArgumentError("PROJECT_ID_INVALID",
                                              "project_id must match "
                                              "^prj_[A-Za-z0-9_-]{22}$"));
    }
    filter.project_id = request->project_id();
  }
  filter.scope = ScopeOf(*principal);
  if (!request->topic().empty()) {
    if (absl::Status s = ValidateTopic(request->topic()); !s.ok()) {
      return FinishUnary(context, s);
    }
    filter.topic = request->topic();
  }
  absl::StatusOr<AgentPage> page =
      registry_->List(filter, request->page_size(), request->page_token());
  if (!page.ok()) return FinishUnary(context, page.status());
  const absl::Time now = clock_->Now();
  for (const AgentView& view : page->agents) {
    *response->add_agents() = ToAgentProto(view, now);
  }
  response->set_next_page_token(page->next_page_token);
  *response->mutable_server_time() = ToProtoTimestamp(now);
  return FinishUnary(context, absl::OkStatus());
}

grpc::ServerBidiReactor<AttachRequest, AttachResponse>*
PresenceServiceImpl::Attach(grpc::CallbackServerContext* context) {
  return new AttachReactor(this, context);
}

}  // namespace hub
