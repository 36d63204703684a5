// Agents on presence streams for the in-process HubServer tests: register,
// attach (hello -> attached), become a role candidate, ensure a role, take
// the activation (answering the role probe) and ACK it on the stream.
#ifndef HUB_TESTS_AGENT_STREAM_FIXTURE_H_
#define HUB_TESTS_AGENT_STREAM_FIXTURE_H_

#include <grpcpp/client_context.h>
#include <grpcpp/support/sync_stream.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cpp/activation_ack.h"
#include "gtest/gtest.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"

namespace hub::testing {

inline constexpr char kStreamProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

// The project's cto role.
inline hub::v1::RoleKey CtoRoleKey(
    const std::string& project = kStreamProject) {
  hub::v1::RoleKey key;
  key.set_project_id(project);
  key.set_kind(hub::v1::ROLE_KIND_CTO);
  return key;
}

// An agent's presence stream.
struct AttachedAgent {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<
      grpc::ClientReaderWriter<hub::v1::AttachRequest, hub::v1::AttachResponse>>
      stream;
};

// Registers `id` (a claude agent of kStreamProject with the capability
// "role:cto:candidate" and `topics`); returns its presence generation.
inline int64_t RegisterAgentOk(hub::v1::PresenceService::Stub* presence,
                               const std::string& id,
                               const std::vector<std::string>& topics = {}) {
  grpc::ClientContext context;
  hub::v1::RegisterAgentRequest request;
  request.set_agent_id(id);
  request.set_cli(hub::v1::AGENT_CLI_CLAUDE);
  request.set_project_id(kStreamProject);
  request.add_capabilities("role:cto:candidate");
  for (const std::string& t : topics) request.add_topics(t);
  hub::v1::RegisterAgentResponse registered;
  const grpc::Status s =
      presence->RegisterAgent(&context, request, &registered);
  EXPECT_TRUE(s.ok()) << s.error_code() << " " << s.error_message();
  return registered.presence_generation();
}

// Binds a presence stream of `id` at `generation` and reads `attached`. A
// finite `deadline` ends the stream (DEADLINE_EXCEEDED) that long after.
inline AttachedAgent AttachOk(
    hub::v1::PresenceService::Stub* presence, const std::string& id,
    int64_t generation, absl::Duration deadline = absl::InfiniteDuration()) {
  AttachedAgent agent;
  agent.context = std::make_unique<grpc::ClientContext>();
  if (deadline != absl::InfiniteDuration()) {
    agent.context->set_deadline(absl::ToChronoTime(absl::Now() + deadline));
  }
  agent.stream = presence->Attach(agent.context.get());
  hub::v1::AttachRequest hello;
  hello.mutable_hello()->set_agent_id(id);
  hello.mutable_hello()->set_presence_generation(generation);
  EXPECT_TRUE(agent.stream->Write(hello));
  hub::v1::AttachResponse attached;
  EXPECT_TRUE(agent.stream->Read(&attached));
  EXPECT_TRUE(attached.has_attached());
  return agent;
}

// Reads the next frame that is not a role_change event. Role changes are
// pushed from a thread of their own, so they may come between any two other
// frames; tests about other frames read past them. False once the stream
// ends.
template <typename Stream>
bool ReadSkippingRoleChanges(Stream* stream, hub::v1::AttachResponse* frame) {
  while (stream->Read(frame)) {
    if (!frame->event().has_role_change()) return true;
  }
  return false;
}

// Makes `id` a candidate of `role` with `priority` (higher goes first).
inline void UpsertCandidateOk(hub::v1::RoleService::Stub* roles,
                              const hub::v1::RoleKey& role,
                              const std::string& id, int64_t priority = 0) {
  grpc::ClientContext context;
  hub::v1::UpsertRoleCandidateRequest upsert;
  *upsert.mutable_role_key() = role;
  upsert.set_agent_id(id);
  upsert.mutable_candidate()->set_priority(priority);
  hub::v1::UpsertRoleCandidateResponse upserted;
  grpc::Status s = roles->UpsertRoleCandidate(&context, upsert, &upserted);
  EXPECT_TRUE(s.ok()) << s.error_message();
}

// EnsureRole(role) as a manual trigger; the receipt.
inline hub::v1::EnsureRoleReceipt EnsureRoleOk(
    hub::v1::RoleService::Stub* roles, const hub::v1::RoleKey& role) {
  grpc::ClientContext context;
  hub::v1::EnsureRoleRequest request;
  *request.mutable_role_key() = role;
  request.set_trigger(hub::v1::ENSURE_ROLE_TRIGGER_MANUAL);
  request.set_cause_id("test");
  hub::v1::EnsureRoleResponse response;
  grpc::Status s = roles->EnsureRole(&context, request, &response);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return response.receipt();
}

// The probe answer "ready" to `probe`.
inline hub::v1::AttachRequest ReadyReply(const hub::v1::RoleProbe& probe) {
  hub::v1::AttachRequest reply;
  reply.mutable_probe_reply()->set_probe_id(probe.probe_id());
  reply.mutable_probe_reply()->set_ready(true);
  return reply;
}

// Reads frames until a role activation arrives, answering probes ready.
inline hub::v1::RoleActivation NextActivation(AttachedAgent& agent) {
  hub::v1::AttachResponse frame;
  while (agent.stream->Read(&frame)) {
    if (frame.event().has_role_probe()) {
      // ready: the activation follows
      if (!agent.stream->Write(ReadyReply(frame.event().role_probe()))) break;
    }
    if (frame.event().has_role_activation()) {
      return frame.event().role_activation();
    }
  }
  ADD_FAILURE() << "the stream ended without an activation";
  return {};
}

// Reads frames until a message event arrives.
inline hub::v1::MessageDelivery NextMessage(AttachedAgent& agent) {
  hub::v1::AttachResponse frame;
  while (agent.stream->Read(&frame)) {
    if (frame.event().has_message()) return frame.event().message();
  }
  ADD_FAILURE() << "the stream ended without a message";
  return {};
}

// The activation_ack frame (frame_id `frame_id`) that accepts `a`.
inline hub::v1::AttachRequest ActivationAckFrame(
    const hub::v1::RoleActivation& a, int64_t frame_id = 42) {
  hub::v1::AttachRequest frame;
  frame.set_frame_id(frame_id);
  hub::client::FillAcceptingAck(a, frame.mutable_activation_ack());
  return frame;
}

}  // namespace hub::testing

#endif  // HUB_TESTS_AGENT_STREAM_FIXTURE_H_
