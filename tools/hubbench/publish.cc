#include "tools/hubbench/publish.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "clients/cpp/activation_ack.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "tools/hubbench/loops.h"
#include "tools/hubbench/targets.h"

namespace hubbench {
namespace {

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;

constexpr char kSentField[] = "sent_us";

// One receiving agent: registered, attached, read on a thread of its own.
// Times every message from the publisher's stamp to its arrival and
// acknowledges every message it receives, as a real consumer does (a second
// thread writes: the ids that arrived while the previous write was under
// way go out together, up to 100 per message_ack frame). Answers role
// probes and acknowledges a role activation the way an agent taking the
// role would.
class Consumer {
 public:
  Consumer(std::shared_ptr<grpc::Channel> channel, std::string agent_id)
      : channel_(std::move(channel)), agent_id_(std::move(agent_id)) {}

  ~Consumer() { Stop(); }

  const std::string& agent_id() const { return agent_id_; }

  absl::Status RegisterAndAttach(const std::string& topic,
                                 const std::string& project) {
    auto presence = hub::v1::PresenceService::NewStub(channel_);
    hub::v1::RegisterAgentRequest request;
    request.set_agent_id(agent_id_);
    request.set_cli(hub::v1::AGENT_CLI_OTHER);
    if (!topic.empty()) request.add_topics(topic);
    if (!project.empty()) {
      request.set_project_id(project);
      request.add_capabilities("role:cto:candidate");
    }
    hub::v1::RegisterAgentResponse registered;
    grpc::Status s =
        presence->RegisterAgent(NewCallContext().get(), request, &registered);
    if (!s.ok()) return ToAbsl(s);
    context_ = std::make_unique<grpc::ClientContext>();
    stream_ = presence->Attach(context_.get());
    AttachRequest hello;
    hello.mutable_hello()->set_agent_id(agent_id_);
    hello.mutable_hello()->set_presence_generation(
        registered.presence_generation());
    AttachResponse attached;
    if (!stream_->Write(hello) || !stream_->Read(&attached) ||
        !attached.has_attached()) {
      return absl::UnavailableError(
          absl::StrCat("consumer ", agent_id_, " could not attach"));
    }
    return absl::OkStatus();
  }

  // Starts reading and acknowledging. Nothing is timed until SetWindow().
  void Go() {
    thread_ = std::thread([this] { Loop(); });
    writer_ = std::thread([this] { WriteLoop(); });
  }
  // Arrivals inside `window` are timed from now on.
  void SetWindow(const Window& window) {
    absl::MutexLock lock(&mu_);
    window_ = window;
  }

  void Stop() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
    }
    if (context_ != nullptr) context_->TryCancel();
    if (thread_.joinable()) thread_.join();
    if (writer_.joinable()) writer_.join();
  }

  // Read after Stop().
  LatencySamples latency() {
    absl::MutexLock lock(&mu_);
    return latency_;
  }
  int64_t received() {
    absl::MutexLock lock(&mu_);
    return received_;
  }
  // Messages that arrived (warm-up included) whose acks hub has not
  // answered yet: more than a round trip's worth means the acks fell
  // behind and the publish rate is not one the recipient keeps up with.
  int64_t unacked() {
    absl::MutexLock lock(&mu_);
    return arrived_ - answered_;
  }

 private:
  void Loop() {
    AttachResponse frame;
    while (stream_->Read(&frame)) {
      if (frame.has_message_ack_result()) {
        const hub::v1::MessageAckResult& r = frame.message_ack_result();
        absl::MutexLock lock(&mu_);
        answered_ += r.acked_message_ids_size() + r.ignored_message_ids_size();
        continue;
      }
      if (!frame.has_event()) continue;
      const hub::v1::PresenceEvent& event = frame.event();
      if (event.has_message()) {
        const absl::Time now = absl::Now();
        const hub::v1::Message& message = event.message().message();
        const auto& fields = message.payload().fields();
        auto sent = fields.find(kSentField);
        absl::MutexLock lock(&mu_);
        ++arrived_;
        unacked_.push_back(message.message_id());
        if (sent == fields.end() || !window_.Contains(now)) continue;
        ++received_;
        latency_.Add(now - absl::FromUnixMicros(static_cast<int64_t>(
                               sent->second.number_value())));
      } else if (event.has_role_probe()) {
        AttachRequest reply;
        reply.mutable_probe_reply()->set_probe_id(
            event.role_probe().probe_id());
        reply.mutable_probe_reply()->set_ready(true);
        Send(std::move(reply));
      } else if (event.has_role_activation()) {
        AttachRequest frame;
        hub::client::FillAcceptingAck(event.role_activation(),
                                      frame.mutable_activation_ack());
        Send(std::move(frame));
      }
    }
  }

  void Send(AttachRequest frame) {
    absl::MutexLock lock(&mu_);
    outbox_.push_back(std::move(frame));
  }

  // The only thread that writes on the stream.
  void WriteLoop() {
    auto has_work = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stopping_ || !outbox_.empty() || !unacked_.empty();
    };
    while (true) {
      std::vector<AttachRequest> frames;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(&has_work));
        if (stopping_) return;
        frames.swap(outbox_);
        if (!unacked_.empty()) {
          AttachRequest ack;
          const size_t n = std::min<size_t>(unacked_.size(), 100);
          for (size_t i = 0; i < n; ++i) {
            ack.mutable_message_ack()->add_message_ids(std::move(unacked_[i]));
          }
          unacked_.erase(unacked_.begin(), unacked_.begin() + n);
          frames.push_back(std::move(ack));
        }
      }
      for (AttachRequest& frame : frames) {
        frame.set_frame_id(++frame_id_);
        if (!stream_->Write(frame)) return;
      }
    }
  }

  const std::shared_ptr<grpc::Channel> channel_;
  const std::string agent_id_;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<grpc::ClientReaderWriter<AttachRequest, AttachResponse>>
      stream_;
  std::thread thread_;    // reads
  std::thread writer_;    // writes
  int64_t frame_id_ = 0;  // the writer's
  absl::Mutex mu_;
  // Read after Stop().
  LatencySamples latency_ ABSL_GUARDED_BY(mu_);
  int64_t received_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t arrived_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t answered_ ABSL_GUARDED_BY(mu_) = 0;
  Window window_ ABSL_GUARDED_BY(mu_){absl::InfinitePast(),
                                      absl::InfinitePast()};
  std::vector<std::string> unacked_ ABSL_GUARDED_BY(mu_);
  std::vector<AttachRequest> outbox_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// One publisher: Publish to `to`, stamped with the send time.
class PublishOp : public UnaryOp {
 public:
  PublishOp(std::shared_ptr<grpc::Channel> channel, std::string from,
            std::string to, int payload_bytes)
      : stub_(hub::v1::MessageService::NewStub(channel)) {
    request_.set_from_agent_id(std::move(from));
    request_.set_to(std::move(to));
    request_.set_type(hub::v1::MESSAGE_TYPE_EVENT);
    if (payload_bytes > 0) {
      (*request_.mutable_payload()->mutable_fields())["body"].set_string_value(
          std::string(payload_bytes, 'x'));
    }
  }

  void Start(DoneFn done) override {
    context_ = NewCallContext();
    (*request_.mutable_payload()->mutable_fields())[kSentField]
        .set_number_value(static_cast<double>(absl::ToUnixMicros(absl::Now())));
    stub_->async()->Publish(
        context_.get(), &request_, &reply_, [done](grpc::Status status) {
          done(status.ok() ? Outcome::kDone : Outcome::kFailed, status, -1);
        });
  }

 private:
  std::unique_ptr<hub::v1::MessageService::Stub> stub_;
  std::unique_ptr<grpc::ClientContext> context_;
  hub::v1::PublishRequest request_;
  hub::v1::PublishResponse reply_;
};

// Makes `holder` the role's active holder: it is the only candidate, so
// EnsureRole activates it, and its reading thread acknowledges. Waits until
// the row says active with the charter acknowledged. Returns the wire.
absl::StatusOr<std::string> ActivateRole(std::shared_ptr<grpc::Channel> channel,
                                         const std::string& project,
                                         Consumer* holder) {
  auto roles = hub::v1::RoleService::NewStub(channel);
  hub::v1::UpsertRoleCandidateRequest upsert;
  upsert.mutable_role_key()->set_project_id(project);
  upsert.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_CTO);
  upsert.set_agent_id(holder->agent_id());
  upsert.mutable_candidate()->set_priority(10);
  hub::v1::UpsertRoleCandidateResponse upserted;
  grpc::Status s =
      roles->UpsertRoleCandidate(NewCallContext().get(), upsert, &upserted);
  if (!s.ok()) return ToAbsl(s);
  hub::v1::EnsureRoleRequest ensure;
  *ensure.mutable_role_key() = upsert.role_key();
  ensure.set_trigger(hub::v1::ENSURE_ROLE_TRIGGER_MANUAL);
  ensure.set_cause_id("hubbench-publish");
  hub::v1::EnsureRoleResponse ensured;
  s = roles->EnsureRole(NewCallContext().get(), ensure, &ensured);
  if (!s.ok()) return ToAbsl(s);
  const absl::Time deadline = absl::Now() + kCallTimeout;
  while (absl::Now() < deadline) {
    hub::v1::GetRoleRequest get;
    *get.mutable_role_key() = upsert.role_key();
    hub::v1::GetRoleResponse got;
    s = roles->GetRole(NewCallContext().get(), get, &got);
    if (!s.ok()) return ToAbsl(s);
    const hub::v1::Role& role = got.role();
    if (role.state() == hub::v1::ROLE_STATE_ACTIVE &&
        role.holder_agent_id() == holder->agent_id() &&
        role.charter_acked_epoch() == role.epoch()) {
      return role.role_key_wire();
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError("the role did not become active");
}

}  // namespace

void RunHubPublish(const PublishConfig& config, Result* result) {
  const int n = config.clients;
  const int c = config.connections > 0 ? config.connections : n;
  const int consumers = config.to == "topic" ? config.fanout : 1;
  result->clients = n;
  result->connections = c;
  result->streams = consumers;
  result->layout = absl::StrCat(
      config.to,
      config.to == "topic" ? absl::StrCat("x", config.fanout) : std::string(),
      "/c", n,
      config.rate > 0 ? absl::StrCat("/r", config.rate) : std::string(),
      config.payload_bytes > 0 ? absl::StrCat("/b", config.payload_bytes)
                               : std::string());
  auto fail = [&](const absl::Status& status) {
    result->status = "error";
    result->error = status.ToString();
  };
  const absl::Time connect_by = absl::Now() + absl::Seconds(60);
  const bool apart = !config.recipient_addr.empty();
  auto channels = ConnectChannels(config.addr, apart ? c : c + 1, connect_by);
  if (!channels.ok()) return fail(channels.status());
  std::shared_ptr<grpc::Channel> consumer_channel = channels->back();
  if (apart) {
    auto recipient = ConnectChannels(config.recipient_addr, 1, connect_by);
    if (!recipient.ok()) return fail(recipient.status());
    consumer_channel = recipient->front();
  }

  const std::string prefix = absl::StrCat("hubbench-", config.run_id);
  const std::string topic = absl::StrCat("hb", config.run_id);
  std::string project;
  if (config.to == "role") {
    project = absl::StrFormat("prj_hb%s", config.run_id);
    project.resize(26, 'p');
  }
  std::vector<std::unique_ptr<Consumer>> sinks;
  for (int i = 0; i < consumers; ++i) {
    sinks.push_back(std::make_unique<Consumer>(
        consumer_channel, absl::StrCat(prefix, "-sink", i)));
    absl::Status s = sinks.back()->RegisterAndAttach(
        config.to == "topic" ? topic : std::string(), project);
    if (!s.ok()) return fail(s);
  }
  for (auto& sink : sinks) sink->Go();
  std::string to;
  if (config.to == "agent") {
    to = sinks[0]->agent_id();
  } else if (config.to == "topic") {
    to = absl::StrCat("topic:", topic);
  } else {
    absl::StatusOr<std::string> wire =
        ActivateRole(consumer_channel, project, sinks[0].get());
    if (!wire.ok()) return fail(wire.status());
    to = absl::StrCat("topic:role:", *wire);
  }
  std::vector<std::unique_ptr<UnaryOp>> ops;
  for (int i = 0; i < n; ++i) {
    ops.push_back(std::make_unique<PublishOp>((*channels)[i % c],
                                              absl::StrCat(prefix, "-pub", i),
                                              to, config.payload_bytes));
  }
  const Window window = Window::FromNow(config.warmup, config.duration);
  for (auto& sink : sinks) sink->SetWindow(window);
  ServerSampler server(config.server_pid, window);
  UnaryTotals totals;
  if (config.rate > 0) {
    PacedTotals paced = RunPacedLoop(ops, window, config.rate);
    totals = std::move(paced.unary);
    result->late = paced.late;
  } else {
    totals = RunUnaryLoop(ops, window, false);
  }
  // Let the last pushes of the window arrive, and their acks be answered.
  absl::SleepFor(absl::Milliseconds(200));
  for (auto& sink : sinks) sink->Stop();

  LatencySamples delivery;
  int64_t received = 0;
  int64_t unacked = 0;
  for (auto& sink : sinks) {
    delivery.Merge(sink->latency());
    received += sink->received();
    unacked += sink->unacked();
  }
  result->duration_s = window.Seconds();
  result->ops = totals.done;
  result->ops_per_s = totals.done / window.Seconds();
  result->errors = totals.errors;
  result->p50_us = totals.latency.Quantile(0.50);
  result->p99_us = totals.latency.Quantile(0.99);
  result->deliveries = received;
  result->unacked = unacked;
  result->delivery_p50_us = delivery.Quantile(0.50);
  result->delivery_p99_us = delivery.Quantile(0.99);
  server.Fill(result);
  if (!totals.first_error.ok()) {
    result->error = ToAbsl(totals.first_error).ToString();
    if (totals.done == 0) result->status = "error";
  }
}

}  // namespace hubbench
