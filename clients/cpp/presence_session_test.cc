// PresenceSession against the real hubd binary: messages and activations
// through the session, recovery from a SIGKILLed and restarted hub, and a
// second registration of the same agent id superseding the first session.
#include "clients/cpp/presence_session.h"

#include <grpcpp/channel.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "tests/hubd_process.h"

namespace hub::client {
namespace {

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

// What a session's callbacks saw.
struct Recorder {
  absl::Mutex mu;
  std::vector<std::string> messages ABSL_GUARDED_BY(mu);
  std::vector<hub::v1::RoleActivation> activations ABSL_GUARDED_BY(mu);
  std::vector<absl::Status> activation_results ABSL_GUARDED_BY(mu);
  std::vector<SessionState> states ABSL_GUARDED_BY(mu);
  std::vector<absl::Status> authority_lost ABSL_GUARDED_BY(mu);
  std::vector<hub::v1::RoleChange> role_changes ABSL_GUARDED_BY(mu);

  PresenceCallbacks Callbacks() {
    PresenceCallbacks callbacks;
    callbacks.on_message = [this](const hub::v1::MessageDelivery& d) {
      absl::MutexLock lock(&mu);
      messages.push_back(d.message().message_id());
      return true;
    };
    callbacks.on_role_activation = [this](const hub::v1::RoleActivation& a) {
      absl::MutexLock lock(&mu);
      activations.push_back(a);
      return true;
    };
    callbacks.on_activation_result =
        [this](const hub::v1::RoleActivation&,
               const absl::StatusOr<hub::v1::RoleActivationAckResult>& r) {
          absl::MutexLock lock(&mu);
          activation_results.push_back(r.status());
        };
    callbacks.on_role_change = [this](const hub::v1::RoleChange& c) {
      absl::MutexLock lock(&mu);
      role_changes.push_back(c);
    };
    callbacks.on_state_change = [this](SessionState s, const absl::Status&) {
      absl::MutexLock lock(&mu);
      states.push_back(s);
    };
    callbacks.on_authority_lost = [this](const absl::Status& s) {
      absl::MutexLock lock(&mu);
      authority_lost.push_back(s);
    };
    return callbacks;
  }

  // Waits until `done` holds (checked under the lock), up to `timeout`.
  bool Await(std::function<bool()> done,
             absl::Duration timeout = absl::Seconds(30)) {
    absl::MutexLock lock(&mu);
    return mu.AwaitWithTimeout(absl::Condition(&done), timeout);
  }
};

PresenceSessionOptions Options(const std::string& agent_id) {
  PresenceSessionOptions options;
  options.registration.set_agent_id(agent_id);
  options.registration.set_cli(hub::v1::AGENT_CLI_CLAUDE);
  options.registration.set_project_id(kProject);
  options.registration.add_capabilities("role:cto:candidate");
  options.backoff.initial = absl::Milliseconds(50);
  options.backoff.max = absl::Milliseconds(500);
  return options;
}

class PresenceSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    hubd_ = std::make_unique<testing::HubdProcess>(testing::TempDbPath(
        ::testing::UnitTest::GetInstance()->current_test_info()->name()));
    ASSERT_TRUE(hubd_->Start().ok());
    HubClientOptions options;
    options.address = hubd_->address();
    options.max_reconnect_backoff = absl::Milliseconds(500);
    client_ = std::make_unique<HubClient>(options);
  }

  std::string Publish(const std::string& to) {
    hub::v1::PublishRequest request;
    request.set_from_agent_id("test-sender");
    request.set_to(to);
    absl::StatusOr<hub::v1::PublishResponse> published =
        client_->Publish(request);
    EXPECT_TRUE(published.ok()) << published.status();
    return published.ok() ? published->message_id() : "";
  }

  int PendingCount(const std::string& agent_id) {
    hub::v1::ListPendingRequest request;
    request.set_agent_id(agent_id);
    request.set_peek(true);
    absl::StatusOr<hub::v1::ListPendingResponse> pending =
        client_->ListPending(request);
    EXPECT_TRUE(pending.ok()) << pending.status();
    return pending.ok() ? pending->deliveries_size() : -1;
  }

  std::unique_ptr<testing::HubdProcess> hubd_;
  std::unique_ptr<HubClient> client_;
};

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

TEST_F(PresenceSessionTest, DeliversMessagesToTheCallbackAndAcksThem) {
  Recorder seen;
  PresenceSession session(client_.get(), Options("agent-m"), seen.Callbacks());
  ASSERT_TRUE(session.Start().ok());
  ASSERT_TRUE(session.AwaitAttached(absl::Seconds(30)).ok());
  EXPECT_EQ(session.generation(), 1);
  EXPECT_EQ(session.hub_instance_id(), hubd_->instance_id());
  const std::string id = Publish("agent-m");
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return Contains(seen.messages, id);
  }));
  // The ACK travels on the stream; the inbox empties.
  for (int i = 0; i < 100 && PendingCount("agent-m") != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(PendingCount("agent-m"), 0);
}

TEST_F(PresenceSessionTest, RecoversByItselfAfterTheHubIsKilledAndRestarted) {
  Recorder seen;
  PresenceSession session(client_.get(), Options("agent-k"), seen.Callbacks());
  ASSERT_TRUE(session.Start().ok());
  ASSERT_TRUE(session.AwaitAttached(absl::Seconds(30)).ok());
  const int64_t first_generation = session.generation();
  const std::string first_instance = hubd_->instance_id();

  hubd_->Kill();
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !seen.states.empty() &&
           seen.states.back() == SessionState::kReconnecting;
  }));
  ASSERT_TRUE(hubd_->Start().ok());  // same address, same database
  ASSERT_NE(hubd_->instance_id(), first_instance);

  // The session notices the new hub instance, registers again and
  // re-attaches without any help.
  for (int i = 0;
       i < 600 && !(session.state() == SessionState::kAttached &&
                    session.hub_instance_id() == hubd_->instance_id());
       ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_EQ(session.state(), SessionState::kAttached);
  EXPECT_EQ(session.hub_instance_id(), hubd_->instance_id());
  EXPECT_GT(session.generation(), first_generation);
  const std::string id = Publish("agent-k");
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return Contains(seen.messages, id);
  }));
  absl::MutexLock lock(&seen.mu);
  EXPECT_TRUE(seen.authority_lost.empty());
}

// Waits until `channel` reports `state`, up to `timeout`.
bool AwaitChannelState(grpc::Channel* channel, grpc_connectivity_state state,
                       absl::Duration timeout) {
  const auto deadline = absl::ToChronoTime(absl::Now() + timeout);
  for (grpc_connectivity_state now = channel->GetState(false); now != state;
       now = channel->GetState(false)) {
    if (!channel->WaitForStateChange(now, deadline)) return false;
  }
  return true;
}

TEST_F(PresenceSessionTest, ReattachesWithinSecondsOfAKilledHubServingAgain) {
  // Everything at its defaults, as an agent would run it: the session's
  // backoff (up to 5 s) and the channel's (up to 500 ms).
  HubClientOptions client_options;
  client_options.address = hubd_->address();
  HubClient client(client_options);
  PresenceSessionOptions options;
  options.registration.set_agent_id("agent-r");
  options.registration.set_cli(hub::v1::AGENT_CLI_CLAUDE);
  absl::Mutex mu;
  int attaches = 0;
  PresenceCallbacks callbacks;
  callbacks.on_state_change = [&](SessionState state, const absl::Status&) {
    absl::MutexLock lock(&mu);
    if (state == SessionState::kAttached) ++attaches;
  };
  PresenceSession session(&client, options, std::move(callbacks));
  ASSERT_TRUE(session.Start().ok());
  ASSERT_TRUE(session.AwaitAttached(absl::Seconds(30)).ok());
  const int64_t first_generation = session.generation();

  hubd_->Kill();
  // The hub stays down until the channel has failed to reconnect: the state
  // in which the session used to fail fast, growing its backoff, while
  // gRPC's connection attempts timed out unpolled.
  ASSERT_TRUE(AwaitChannelState(client.channel().get(),
                                GRPC_CHANNEL_TRANSIENT_FAILURE,
                                absl::Seconds(30)));
  ASSERT_TRUE(hubd_->Start().ok());
  const absl::Time serving = absl::Now();
  // Generous for a busy machine; a healthy client takes well under a second
  // (docs/BENCHMARKS.md, "Reconnecting to a restarted hub").
  absl::MutexLock lock(&mu);
  auto reattached = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    return attaches >= 2;
  };
  EXPECT_TRUE(
      mu.AwaitWithTimeout(absl::Condition(&reattached), absl::Seconds(10)))
      << "not re-attached " << absl::Now() - serving
      << " after the hub was serving; state "
      << SessionStateName(session.state()) << ", "
      << session.last_status().ToString();
  EXPECT_EQ(session.hub_instance_id(), hubd_->instance_id());
  EXPECT_GT(session.generation(), first_generation);
}

TEST_F(PresenceSessionTest, ASecondRegistrationSupersedesTheFirstSession) {
  Recorder first_seen;
  PresenceSession first(client_.get(), Options("agent-s"),
                        first_seen.Callbacks());
  ASSERT_TRUE(first.Start().ok());
  ASSERT_TRUE(first.AwaitAttached(absl::Seconds(30)).ok());

  Recorder second_seen;
  PresenceSession second(client_.get(), Options("agent-s"),
                         second_seen.Callbacks());
  ASSERT_TRUE(second.Start().ok());
  ASSERT_TRUE(second.AwaitAttached(absl::Seconds(30)).ok());
  EXPECT_GT(second.generation(), first.generation());

  ASSERT_TRUE(first_seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !first_seen.authority_lost.empty();
  }));
  EXPECT_EQ(first.state(), SessionState::kSuperseded);
  {
    absl::MutexLock lock(&first_seen.mu);
    ASSERT_EQ(first_seen.authority_lost.size(), 1u);
    EXPECT_EQ(ReasonOf(first_seen.authority_lost[0]), "STALE_PRESENCE_OWNER");
  }
  EXPECT_EQ(first.AwaitAttached(absl::Seconds(1)).code(),
            absl::StatusCode::kFailedPrecondition);

  // The first session does not fight back: a while later the second one is
  // still the registration of record and still receives messages.
  absl::SleepFor(absl::Seconds(2));
  EXPECT_EQ(second.state(), SessionState::kAttached);
  hub::v1::GetAgentRequest get;
  get.set_agent_id("agent-s");
  absl::StatusOr<hub::v1::GetAgentResponse> agent = client_->GetAgent(get);
  ASSERT_TRUE(agent.ok()) << agent.status();
  EXPECT_EQ(agent->agent().presence_generation(), second.generation());
  const std::string id = Publish("agent-s");
  ASSERT_TRUE(second_seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return Contains(second_seen.messages, id);
  }));
  absl::MutexLock lock(&first_seen.mu);
  EXPECT_FALSE(Contains(first_seen.messages, id));
}

TEST_F(PresenceSessionTest,
       ARivalRegisteringWhileTheHubWasDownSupersedesInsteadOfBeingOverwritten) {
  Recorder seen;
  PresenceSessionOptions options = Options("agent-v");
  // A slow reconnect (the session waits for its channel, whose backoff is 4
  // to 6 s): the hub restarts and the rival registers, on another channel,
  // before the session comes back.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 5000);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  HubClient slow(
      grpc::CreateCustomChannel(hubd_->address(),
                                grpc::InsecureChannelCredentials(), args),
      HubClientOptions());
  PresenceSession session(&slow, options, seen.Callbacks());
  ASSERT_TRUE(session.Start().ok());
  ASSERT_TRUE(session.AwaitAttached(absl::Seconds(30)).ok());
  const int64_t generation = session.generation();

  hubd_->Kill();
  // The session's channel tried once, was refused, and is in its backoff.
  ASSERT_TRUE(AwaitChannelState(
      slow.channel().get(), GRPC_CHANNEL_TRANSIENT_FAILURE, absl::Seconds(30)));
  ASSERT_TRUE(hubd_->Start().ok());
  hub::v1::RegisterAgentRequest rival = options.registration;
  CallOptions wait;
  wait.wait_for_ready = true;
  absl::StatusOr<hub::v1::RegisterAgentResponse> registered =
      client_->RegisterAgent(rival, wait);
  ASSERT_TRUE(registered.ok()) << registered.status();
  ASSERT_GT(registered->presence_generation(), generation);

  // The session finds STALE_HUB_INSTANCE, sees a generation it did not
  // create, and stands down instead of registering over the rival.
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !seen.authority_lost.empty();
  }));
  EXPECT_EQ(session.state(), SessionState::kSuperseded);
  {
    absl::MutexLock lock(&seen.mu);
    EXPECT_EQ(ReasonOf(seen.authority_lost[0]), "STALE_PRESENCE_OWNER");
  }
  hub::v1::GetAgentRequest get;
  get.set_agent_id("agent-v");
  absl::StatusOr<hub::v1::GetAgentResponse> agent = client_->GetAgent(get);
  ASSERT_TRUE(agent.ok()) << agent.status();
  EXPECT_EQ(agent->agent().presence_generation(),
            registered->presence_generation());
}

TEST_F(PresenceSessionTest, AHubThatStopsAnsweringIsLeftAndRejoinedWhenBack) {
  Recorder seen;
  PresenceSessionOptions options = Options("agent-h");
  options.registration.mutable_heartbeat_ttl()->set_seconds(10);
  options.heartbeat_fraction = 0.05;  // a heartbeat every 500 ms
  options.reply_timeout = absl::Seconds(1);
  PresenceSession session(client_.get(), options, seen.Callbacks());
  ASSERT_TRUE(session.Start().ok());
  ASSERT_TRUE(session.AwaitAttached(absl::Seconds(30)).ok());
  const int64_t generation = session.generation();

  hubd_->Pause();  // the connection stays open; nothing is answered
  const bool noticed = seen.Await(
      [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !seen.states.empty() &&
               seen.states.back() == SessionState::kReconnecting;
      },
      absl::Seconds(20));
  hubd_->Resume();
  ASSERT_TRUE(noticed) << "the unanswered heartbeats went unnoticed";

  // Same hub instance, same generation: the session simply re-attaches.
  for (int i = 0; i < 600 && session.state() != SessionState::kAttached; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(session.state(), SessionState::kAttached);
  EXPECT_EQ(session.generation(), generation);
  const std::string id = Publish("agent-h");
  EXPECT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return Contains(seen.messages, id);
  }));
}

TEST_F(PresenceSessionTest, StopFromInsideACallbackEndsTheSessionCleanly) {
  std::atomic<bool> called{false};
  PresenceSession* self = nullptr;
  PresenceCallbacks callbacks;
  callbacks.on_message = [&](const hub::v1::MessageDelivery&) {
    self->Stop();  // only requests the stop: this is the session thread
    called = true;
    return false;
  };
  auto session = std::make_unique<PresenceSession>(
      client_.get(), Options("agent-c"), std::move(callbacks));
  self = session.get();
  ASSERT_TRUE(session->Start().ok());
  ASSERT_TRUE(session->AwaitAttached(absl::Seconds(30)).ok());
  Publish("agent-c");
  for (int i = 0; i < 600 && session->state() != SessionState::kStopped; ++i) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_TRUE(called);
  EXPECT_EQ(session->state(), SessionState::kStopped);
  session.reset();  // joins the threads from this (another) thread
}

TEST_F(PresenceSessionTest, ARoleActivationIsDeliveredAckedAndFencedByEpoch) {
  Recorder seen;
  PresenceSession session(client_.get(), Options("agent-r"), seen.Callbacks());
  ASSERT_TRUE(session.Start().ok());
  ASSERT_TRUE(session.AwaitAttached(absl::Seconds(30)).ok());

  hub::v1::RoleKey cto;
  cto.set_project_id(kProject);
  cto.set_kind(hub::v1::ROLE_KIND_CTO);
  hub::v1::UpsertRoleCandidateRequest upsert;
  *upsert.mutable_role_key() = cto;
  upsert.set_agent_id("agent-r");
  ASSERT_TRUE(client_->UpsertRoleCandidate(upsert).ok());
  hub::v1::EnsureRoleRequest ensure;
  *ensure.mutable_role_key() = cto;
  ensure.set_trigger(hub::v1::ENSURE_ROLE_TRIGGER_MANUAL);
  ensure.set_cause_id("presence-session-test");
  absl::StatusOr<hub::v1::EnsureRoleResponse> receipt =
      client_->EnsureRole(ensure);
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  const std::string wire = receipt->receipt().role_key_wire();

  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !seen.activation_results.empty();
  }));
  {
    absl::MutexLock lock(&seen.mu);
    ASSERT_TRUE(seen.activation_results[0].ok()) << seen.activation_results[0];
    ASSERT_EQ(seen.activations.size(), 1u);
    EXPECT_EQ(seen.activations[0].holder_agent_id(), "agent-r");
  }
  hub::v1::GetRoleRequest get;
  get.set_role_key_wire(wire);
  absl::StatusOr<hub::v1::GetRoleResponse> role = client_->GetRole(get);
  ASSERT_TRUE(role.ok()) << role.status();
  EXPECT_EQ(role->role().state(), hub::v1::ROLE_STATE_ACTIVE);
  ASSERT_TRUE(session.RoleEpoch(wire).has_value());
  EXPECT_EQ(*session.RoleEpoch(wire), role->role().epoch());

  // The hub tells the holder on its stream that the role became active.
  const int64_t epoch = role->role().epoch();
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    for (const hub::v1::RoleChange& c : seen.role_changes) {
      if (c.role().state() == hub::v1::ROLE_STATE_ACTIVE &&
          c.role().epoch() == epoch) {
        return true;
      }
    }
    return false;
  }));
  EXPECT_EQ(session.RoleEpoch(wire), std::optional<int64_t>(epoch));

  // An operator fences the role (a new epoch): the hub tells the session,
  // which withdraws its token for the old epoch before the callback runs.
  hub::v1::ReserveRoleRequest reserve;
  reserve.set_role_key_wire(wire);
  ASSERT_TRUE(client_->ReserveRole(reserve).ok());
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !seen.role_changes.empty() &&
           seen.role_changes.back().role().epoch() > epoch;
  }));
  EXPECT_FALSE(session.RoleEpoch(wire).has_value());
}

TEST_F(PresenceSessionTest, AttachesOnceAHubThatWasDownAtStartComesUp) {
  hubd_->Kill();
  Recorder seen;
  PresenceSession session(client_.get(), Options("agent-u"), seen.Callbacks());
  ASSERT_TRUE(session.Start().ok());
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return std::count(seen.states.begin(), seen.states.end(),
                      SessionState::kReconnecting) >= 1;
  }));
  EXPECT_EQ(ReasonOf(session.last_status()), "");
  EXPECT_EQ(session.last_status().code(), absl::StatusCode::kUnavailable);
  ASSERT_TRUE(hubd_->Start().ok());
  EXPECT_TRUE(session.AwaitAttached(absl::Seconds(30)).ok());
  EXPECT_EQ(session.generation(), 1);
}

TEST_F(PresenceSessionTest, AnInvalidRegistrationFailsWithoutRetrying) {
  Recorder seen;
  PresenceSession session(client_.get(), Options("x"), seen.Callbacks());
  ASSERT_TRUE(session.Start().ok());
  absl::Status attached = session.AwaitAttached(absl::Seconds(30));
  EXPECT_EQ(attached.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(attached), "AGENT_ID_INVALID");
  EXPECT_EQ(session.state(), SessionState::kFailed);
  // The callbacks run on the session thread, possibly after AwaitAttached
  // returned.
  ASSERT_TRUE(seen.Await([&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return !seen.authority_lost.empty();
  }));
  absl::SleepFor(absl::Milliseconds(300));
  absl::MutexLock lock(&seen.mu);
  EXPECT_EQ(seen.authority_lost.size(), 1u);
  EXPECT_EQ(seen.states.back(), SessionState::kFailed);
}

TEST_F(PresenceSessionTest, StoppingDeregistersTheAgent) {
  {
    Recorder seen;
    PresenceSession session(client_.get(), Options("agent-d"),
                            seen.Callbacks());
    ASSERT_TRUE(session.Start().ok());
    ASSERT_TRUE(session.AwaitAttached(absl::Seconds(30)).ok());
    session.Stop();
    EXPECT_EQ(session.state(), SessionState::kStopped);
  }
  hub::v1::GetAgentRequest get;
  get.set_agent_id("agent-d");
  absl::StatusOr<hub::v1::GetAgentResponse> agent = client_->GetAgent(get);
  ASSERT_TRUE(agent.ok()) << agent.status();
  EXPECT_EQ(agent->agent().status(), hub::v1::AGENT_STATUS_OFFLINE);
}

TEST_F(PresenceSessionTest, BadOptionsAreRejectedAtStart) {
  PresenceSessionOptions options = Options("agent-o");
  options.heartbeat_fraction = 0;
  PresenceSession session(client_.get(), options, {});
  EXPECT_EQ(session.Start().code(), absl::StatusCode::kInvalidArgument);
  PresenceSession ok(client_.get(), Options("agent-o"), {});
  ASSERT_TRUE(ok.Start().ok());
  EXPECT_EQ(ok.Start().code(), absl::StatusCode::kFailedPrecondition);
}

}  // namespace
}  // namespace hub::client
