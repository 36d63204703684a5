// failover: how long a role goes without an active holder when its holder
// dies, measured against a running hubd.
//
//   failover --addr=127.0.0.1:PORT [--rounds=100]
//
// Each round uses a fresh project: candidates A (priority 10) and B
// (priority 5) register and attach their presence streams, EnsureRole makes
// A the holder, A acknowledges. Then A's stream is cancelled, as when its
// process dies, and the clock runs until B has received its activation and
// the hub has accepted B's ACK. Prints one JSON line with p50/p99/max in ms.
// The hub's --detach_grace is part of every figure: compare p99 against
// grace + 250 ms (issue 5's target).
#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"

ABSL_FLAG(std::string, addr, "", "hubd's host:port");
ABSL_FLAG(int, rounds, 100, "failovers to measure");

namespace {

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;
using Stream = grpc::ClientReaderWriter<AttachRequest, AttachResponse>;

struct Agent {
  std::unique_ptr<grpc::ClientContext> context;
  std::unique_ptr<Stream> stream;
};

// A 22-character base64url body unique to this process and round.
std::string ProjectId(int round) {
  std::string body =
      absl::StrFormat("fo%08x%012d", getpid() & 0xffffffff, round);
  body.resize(22, 'x');
  return "prj_" + body;
}

bool Fail(const std::string& what) {
  std::fprintf(stderr, "failover: %s\n", what.c_str());
  return false;
}

bool Attach(hub::v1::PresenceService::Stub* presence,
            hub::v1::RoleService::Stub* roles, const std::string& project,
            const std::string& id, int priority, Agent* agent) {
  grpc::ClientContext context;
  hub::v1::RegisterAgentRequest request;
  request.set_agent_id(id);
  request.set_cli(hub::v1::AGENT_CLI_CLAUDE);
  request.set_project_id(project);
  request.add_capabilities("role:cto:candidate");
  hub::v1::RegisterAgentResponse registered;
  grpc::Status s = presence->RegisterAgent(&context, request, &registered);
  if (!s.ok()) return Fail("RegisterAgent: " + s.error_message());
  agent->context = std::make_unique<grpc::ClientContext>();
  agent->stream = presence->Attach(agent->context.get());
  AttachRequest hello;
  hello.mutable_hello()->set_agent_id(id);
  hello.mutable_hello()->set_presence_generation(
      registered.presence_generation());
  AttachResponse attached;
  if (!agent->stream->Write(hello) || !agent->stream->Read(&attached)) {
    return Fail("attach failed");
  }
  grpc::ClientContext upsert_context;
  hub::v1::UpsertRoleCandidateRequest upsert;
  upsert.mutable_role_key()->set_project_id(project);
  upsert.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_CTO);
  upsert.set_agent_id(id);
  upsert.mutable_candidate()->set_priority(priority);
  hub::v1::UpsertRoleCandidateResponse upserted;
  s = roles->UpsertRoleCandidate(&upsert_context, upsert, &upserted);
  return s.ok() || Fail("UpsertRoleCandidate: " + s.error_message());
}

// Reads until an activation arrives (answering the hub's probe before it),
// acknowledges it on the stream and waits for the hub's answer. False if the
// stream ends first.
bool ActivateAndAck(Agent* agent) {
  AttachResponse frame;
  while (agent->stream->Read(&frame)) {
    if (frame.event().has_role_probe()) {
      AttachRequest reply;
      reply.mutable_probe_reply()->set_probe_id(
          frame.event().role_probe().probe_id());
      reply.mutable_probe_reply()->set_ready(true);
      if (!agent->stream->Write(reply)) return false;
      continue;
    }
    if (!frame.event().has_role_activation()) continue;
    const hub::v1::RoleActivation& a = frame.event().role_activation();
    AttachRequest ack_frame;
    ack_frame.set_frame_id(1);
    hub::v1::RoleActivationAck* ack = ack_frame.mutable_activation_ack();
    ack->set_schema("tfx.role-activation-ack.v1");
    ack->set_activation_id(a.activation_id());
    ack->set_role_key_wire(a.role_key_wire());
    ack->set_epoch(a.epoch());
    ack->set_activation_seq(a.activation_seq());
    ack->set_holder_agent_id(a.holder_agent_id());
    ack->set_reachable(true);
    ack->mutable_charter_ack()->set_role_key_wire(a.role_key_wire());
    ack->mutable_charter_ack()->set_epoch(a.epoch());
    ack->mutable_charter_ack()->set_charter_version(a.charter_version());
    if (!agent->stream->Write(ack_frame)) return false;
    while (agent->stream->Read(&frame)) {
      if (frame.has_activation_ack_result()) return true;
      if (frame.has_frame_error()) return Fail(frame.frame_error().message());
    }
    return false;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string addr = absl::GetFlag(FLAGS_addr);
  if (addr.empty()) return Fail("--addr is required"), 2;
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  auto presence = hub::v1::PresenceService::NewStub(channel);
  auto roles = hub::v1::RoleService::NewStub(channel);
  std::vector<double> ms;
  for (int round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
    const std::string project = ProjectId(round);
    Agent a, b;
    const std::string tag = absl::StrCat(getpid(), "-", round);
    if (!Attach(presence.get(), roles.get(), project, "fo-a-" + tag, 10, &a) ||
        !Attach(presence.get(), roles.get(), project, "fo-b-" + tag, 5, &b)) {
      return 1;
    }
    grpc::ClientContext context;
    hub::v1::EnsureRoleRequest ensure;
    ensure.mutable_role_key()->set_project_id(project);
    ensure.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_CTO);
    ensure.set_trigger(hub::v1::ENSURE_ROLE_TRIGGER_MANUAL);
    ensure.set_cause_id("failover-bench");
    hub::v1::EnsureRoleResponse ensured;
    grpc::Status s = roles->EnsureRole(&context, ensure, &ensured);
    if (!s.ok()) return Fail("EnsureRole: " + s.error_message()), 1;
    if (!ActivateAndAck(&a)) return Fail("A was not activated"), 1;
    const absl::Time died = absl::Now();
    a.context->TryCancel();  // A's process is gone: its stream ends
    if (!ActivateAndAck(&b)) return Fail("B was not activated"), 1;
    ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - died));
    b.context->TryCancel();
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&ms](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  std::printf(
      "{\"workload\":\"failover\",\"rounds\":%zu,\"p50_ms\":%.1f,"
      "\"p99_ms\":%.1f,\"max_ms\":%.1f}\n",
      ms.size(), at(0.50), at(0.99), ms.back());
  return 0;
}
