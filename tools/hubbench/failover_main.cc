// failover: how long a role goes without an active holder when its holder
// dies, against a running hubd or, as a reference, etcd 3.4's elections.
//
//   failover --target=hub|etcd --addr=127.0.0.1:PORT [--rounds=100]
//            [--leave=crash|goodbye|release (hub), crash|resign (etcd)]
//   failover --target=hub --addr=HUB_B --leave=hub_killed
//            --holder_addr=HUB_A --holder_pid=PID_OF_HUB_A
//   failover --target=hub --addr=HUB_B --holder_addr=HUB_A
//            [--skip_failed_rounds] [--print_rounds]
//
// hub: each round uses a fresh project: candidates A (priority 10) and B
// (priority 5) register and attach their presence streams, EnsureRole makes
// A the holder, A answers the probe and acknowledges. Then A's stream is
// cancelled, as when its process dies, and the clock runs until B has
// answered its probe, received its activation and the hub has accepted B's
// ACK. The hub's --detach_grace is part of every figure: compare p99 against
// grace + 250 ms (issue 5's target). --leave=hub_killed measures a takeover
// between hubs sharing one PostgreSQL database instead: A attaches to the
// hub at --holder_addr, B to the hub at --addr, and once A holds the role
// the holder's hub process (--holder_pid) is sent SIGKILL; the clock runs
// until B's ACK is accepted, through B's hub finding A's hub's lease over,
// taking over its agents and running their detach grace (expect about
// --hub_lease + --hub_renew_interval + --detach_grace). One round per run:
// the holder's hub is gone after it. --holder_addr with --leave=crash cuts
// the holder's stream on one hub while the successor waits on another: the
// grace runs on the holder's hub, which hands the successor's flight to the
// other. Under faults (the database's backends terminated, say),
// --skip_failed_rounds goes on past a round whose calls were refused, and
// --print_rounds gives each round's times to line up with hubd's logs. A holder
// that leaves on purpose
// (--leave=goodbye: a goodbye frame on its stream; --leave=release:
// ReleaseRole at its epoch) is replaced with no grace: the clock runs from
// the goodbye (or the release call) to the hub's answer to B's ACK.
//
// etcd: each round uses a fresh election: A campaigns (v3election Campaign)
// on its own lease and wins, B campaigns on another lease and waits behind
// A. Then A's lease is revoked (LeaseRevoke), and the clock runs until B's
// Campaign call returns with B as leader. etcd has no grace: revocation
// deletes A's key at once (a crashed etcd client's lease would instead
// expire after its TTL). --leave=resign: A resigns (v3election Resign with
// its leader key) instead, the hand-off of a leader that leaves on purpose.
//
// Prints one JSON line (hubbench's format, workload "failover") with
// p50/p99/max in ms.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "clients/cpp/activation_ack.h"
#include "etcd/etcdserver/api/v3election/v3electionpb/v3election.grpc.pb.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"

ABSL_FLAG(std::string, target, "hub", "hub (hubd) or etcd (etcd 3.4)");
ABSL_FLAG(std::string, addr, "", "the target's host:port");
ABSL_FLAG(int, rounds, 100, "failovers to measure");
ABSL_FLAG(std::string, leave, "crash",
          "how the holder goes: crash (hub: its stream is cancelled; etcd: "
          "its lease revoked), goodbye, release or hub_killed (hub), resign "
          "(etcd)");
ABSL_FLAG(std::string, holder_addr, "",
          "hub: the hub the holder attaches to (default: --addr)");
ABSL_FLAG(bool, skip_failed_rounds, false,
          "hub: a round that fails (a call refused while the database is "
          "being faulted, a successor never activated) is reported on stderr "
          "and skipped instead of ending the run; the figures are over the "
          "rounds that completed");
ABSL_FLAG(bool, print_rounds, false,
          "hub: print each round's leaving time (Unix ms) and failover time "
          "on stderr");
ABSL_FLAG(int, holder_pid, 0,
          "--leave=hub_killed: the process id of the hubd at --holder_addr, "
          "killed once the holder is active");

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
  // A round takes seconds (a takeover: the lease and the grace); a hub that
  // never fails the role over ends the run instead of hanging it.
  agent->context->set_deadline(std::chrono::system_clock::now() +
                               std::chrono::seconds(60));
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
    hub::client::FillAcceptingAck(a, ack_frame.mutable_activation_ack());
    if (!agent->stream->Write(ack_frame)) return false;
    while (agent->stream->Read(&frame)) {
      if (frame.has_activation_ack_result()) return true;
      if (frame.has_frame_error()) return Fail(frame.frame_error().message());
    }
    return false;
  }
  return false;
}

// One failover of RunHub's, appended to `ms`. False on an error.
bool RunHubRound(hub::v1::PresenceService::Stub* presence,
                 hub::v1::RoleService::Stub* roles,
                 hub::v1::PresenceService::Stub* holder_presence,
                 hub::v1::RoleService::Stub* holder_roles, int round,
                 const std::string& leave, int holder_pid,
                 std::vector<double>* ms) {
  const std::string project = ProjectId(round);
  Agent a, b;
  const std::string tag = absl::StrCat(getpid(), "-", round);
  if (!Attach(holder_presence, holder_roles, project, "fo-a-" + tag, 10, &a) ||
      !Attach(presence, roles, project, "fo-b-" + tag, 5, &b)) {
    return false;
  }
  grpc::ClientContext context;
  hub::v1::EnsureRoleRequest ensure;
  ensure.mutable_role_key()->set_project_id(project);
  ensure.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_CTO);
  ensure.set_trigger(hub::v1::ENSURE_ROLE_TRIGGER_MANUAL);
  ensure.set_cause_id("failover-bench");
  hub::v1::EnsureRoleResponse ensured;
  grpc::Status s = roles->EnsureRole(&context, ensure, &ensured);
  if (!s.ok()) return Fail("EnsureRole: " + s.error_message());
  if (!ActivateAndAck(&a)) return Fail("A was not activated");
  const absl::Time died = absl::Now();
  if (leave == "goodbye") {
    AttachRequest goodbye;
    goodbye.mutable_goodbye();
    if (!a.stream->Write(goodbye)) return Fail("goodbye not sent");
  } else if (leave == "release") {
    grpc::ClientContext release_context;
    hub::v1::ReleaseRoleRequest release;
    release.mutable_role_key()->set_project_id(project);
    release.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_CTO);
    release.set_agent_id("fo-a-" + tag);
    release.set_epoch(ensured.receipt().epoch());
    hub::v1::ReleaseRoleResponse released;
    s = roles->ReleaseRole(&release_context, release, &released);
    if (!s.ok()) return Fail("ReleaseRole: " + s.error_message());
  } else if (leave == "hub_killed") {
    if (kill(holder_pid, SIGKILL) != 0) {
      return Fail(absl::StrCat("kill ", holder_pid, " failed"));
    }
  } else {
    a.context->TryCancel();  // A's process is gone: its stream ends
  }
  if (!ActivateAndAck(&b)) return Fail("B was not activated");
  ms->push_back(absl::ToDoubleMilliseconds(absl::Now() - died));
  if (absl::GetFlag(FLAGS_print_rounds)) {
    std::fprintf(stderr, "failover: round %d left at %lld ms took %.1f ms\n",
                 round, static_cast<long long>(absl::ToUnixMillis(died)),
                 ms->back());
  }
  b.context->TryCancel();
  a.context->TryCancel();
  return true;
}

// Hub failovers, one per round, appended to `ms`: the holder A on the hub
// behind `holder_channel`, the successor B and every other call on
// `channel`'s. False on an error.
bool RunHub(const std::shared_ptr<grpc::Channel>& channel,
            const std::shared_ptr<grpc::Channel>& holder_channel, int rounds,
            const std::string& leave, int holder_pid, std::vector<double>* ms) {
  auto presence = hub::v1::PresenceService::NewStub(channel);
  auto roles = hub::v1::RoleService::NewStub(channel);
  auto holder_presence = hub::v1::PresenceService::NewStub(holder_channel);
  auto holder_roles = hub::v1::RoleService::NewStub(holder_channel);
  const bool skip_failed = absl::GetFlag(FLAGS_skip_failed_rounds);
  int skipped = 0;
  for (int round = 0; round < rounds; ++round) {
    if (!RunHubRound(presence.get(), roles.get(), holder_presence.get(),
                     holder_roles.get(), round, leave, holder_pid, ms)) {
      if (!skip_failed) return false;
      std::fprintf(stderr, "failover: round %d skipped (%d so far)\n", round,
                   ++skipped);
    }
  }
  return true;
}

// A lease of 60 s (the rounds revoke theirs long before), or nullopt.
std::optional<int64_t> GrantLease(etcdserverpb::Lease::Stub* lease) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(60);
  etcdserverpb::LeaseGrantResponse response;
  grpc::Status s = lease->LeaseGrant(&context, request, &response);
  if (!s.ok() || !response.error().empty()) {
    Fail("LeaseGrant: " + s.error_message() + response.error());
    return std::nullopt;
  }
  return response.id();
}

bool RevokeLease(etcdserverpb::Lease::Stub* lease, int64_t id) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(id);
  etcdserverpb::LeaseRevokeResponse response;
  grpc::Status s = lease->LeaseRevoke(&context, request, &response);
  return s.ok() || Fail("LeaseRevoke: " + s.error_message());
}

// How many keys the election `name` holds (one per campaigner).
int64_t Campaigners(etcdserverpb::KV::Stub* kv, const std::string& name) {
  grpc::ClientContext context;
  etcdserverpb::RangeRequest request;
  const std::string prefix = name + "/";
  std::string end = prefix;
  end.back() = static_cast<char>(end.back() + 1);
  request.set_key(prefix);
  request.set_range_end(end);
  request.set_count_only(true);
  etcdserverpb::RangeResponse response;
  if (!kv->Range(&context, request, &response).ok()) return -1;
  return response.count();
}

// etcd election handovers, one per round, appended to `ms`.
bool RunEtcd(const std::shared_ptr<grpc::Channel>& channel, int rounds,
             const std::string& leave, std::vector<double>* ms) {
  auto kv = etcdserverpb::KV::NewStub(channel);
  auto lease = etcdserverpb::Lease::NewStub(channel);
  auto election = v3electionpb::Election::NewStub(channel);
  for (int round = 0; round < rounds; ++round) {
    const std::string name = absl::StrCat("failover/", getpid(), "/", round);
    std::optional<int64_t> lease_a = GrantLease(lease.get());
    std::optional<int64_t> lease_b = GrantLease(lease.get());
    if (!lease_a || !lease_b) return false;
    v3electionpb::LeaderKey a_key;
    {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(10));
      v3electionpb::CampaignRequest request;
      request.set_name(name);
      request.set_lease(*lease_a);
      request.set_value("a");
      v3electionpb::CampaignResponse response;
      grpc::Status s = election->Campaign(&context, request, &response);
      if (!s.ok()) return Fail("Campaign (A): " + s.error_message());
      a_key = response.leader();
    }
    // B campaigns and waits behind A; its call returns when B leads.
    grpc::Status b_status;
    v3electionpb::CampaignResponse b_response;
    absl::Time b_leads;
    grpc::ClientContext b_context;
    b_context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(30));
    std::thread b([&] {
      v3electionpb::CampaignRequest request;
      request.set_name(name);
      request.set_lease(*lease_b);
      request.set_value("b");
      b_status = election->Campaign(&b_context, request, &b_response);
      b_leads = absl::Now();
    });
    // Measure from the moment B's campaign key is in place, waiting on A.
    const absl::Time give_up = absl::Now() + absl::Seconds(10);
    while (Campaigners(kv.get(), name) < 2 && absl::Now() < give_up) {
      absl::SleepFor(absl::Milliseconds(1));
    }
    const absl::Time revoked = absl::Now();
    bool ok = true;
    if (leave == "resign") {
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(10));
      v3electionpb::ResignRequest request;
      *request.mutable_leader() = a_key;
      v3electionpb::ResignResponse response;
      grpc::Status s = election->Resign(&context, request, &response);
      ok = s.ok() || Fail("Resign: " + s.error_message());
    } else {
      ok = RevokeLease(lease.get(), *lease_a);  // A is gone
    }
    b.join();
    if (!ok) return false;
    if (!b_status.ok())
      return Fail("Campaign (B): " + b_status.error_message());
    if (b_response.leader().lease() != *lease_b) {
      return Fail("B's campaign returned another leader");
    }
    ms->push_back(absl::ToDoubleMilliseconds(b_leads - revoked));
    if (!RevokeLease(lease.get(), *lease_b)) return false;
    if (leave == "resign" && !RevokeLease(lease.get(), *lease_a)) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string target = absl::GetFlag(FLAGS_target);
  const std::string addr = absl::GetFlag(FLAGS_addr);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  if (addr.empty()) return Fail("--addr is required"), 2;
  if (target != "hub" && target != "etcd") {
    return Fail("--target must be hub or etcd"), 2;
  }
  if (rounds < 1) return Fail("--rounds must be at least 1"), 2;
  const std::string leave = absl::GetFlag(FLAGS_leave);
  const bool leave_ok =
      leave == "crash" ||
      (target == "hub"
           ? leave == "goodbye" || leave == "release" || leave == "hub_killed"
           : leave == "resign");
  if (!leave_ok) return Fail("--leave does not apply to this target"), 2;
  const std::string holder_addr = absl::GetFlag(FLAGS_holder_addr);
  const int holder_pid = absl::GetFlag(FLAGS_holder_pid);
  if (leave == "hub_killed") {
    if (holder_addr.empty() || holder_addr == addr || holder_pid <= 0) {
      Fail(
          "--leave=hub_killed needs --holder_addr (not --addr's hub) and "
          "--holder_pid");
      return 2;
    }
    if (rounds != 1) return Fail("--leave=hub_killed runs one round"), 2;
  }
  const std::string layout = leave == "crash"
                                 ? absl::StrCat("r", rounds)
                                 : absl::StrCat("r", rounds, "/", leave);
  auto channel = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  auto holder_channel =
      holder_addr.empty()
          ? channel
          : grpc::CreateChannel(holder_addr,
                                grpc::InsecureChannelCredentials());
  std::vector<double> ms;
  const bool ok = target == "hub" ? RunHub(channel, holder_channel, rounds,
                                           leave, holder_pid, &ms)
                                  : RunEtcd(channel, rounds, leave, &ms);
  if (!ok || ms.empty()) {
    std::printf(
        "{\"target\":\"%s\",\"workload\":\"failover\",\"layout\":\"%s\","
        "\"status\":\"error\",\"error\":\"see stderr\"}\n",
        target.c_str(), layout.c_str());
    return 1;
  }
  std::sort(ms.begin(), ms.end());
  auto at = [&ms](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
  };
  std::printf(
      "{\"target\":\"%s\",\"workload\":\"failover\",\"layout\":\"%s\","
      "\"status\":\"ok\",\"rounds\":%zu,\"p50_ms\":%.2f,\"p99_ms\":%.2f,"
      "\"max_ms\":%.2f}\n",
      target.c_str(), layout.c_str(), ms.size(), at(0.50), at(0.99), ms.back());
  return 0;
}
