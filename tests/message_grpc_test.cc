// MessageService and the message events of the presence stream, against an
// in-process HubServer: publishes to agents, topics and roles, pushes and
// acknowledgements on the stream, ListPending paging, role backlog, bad
// input, expiry and dead letters, Ask and traces.
#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <sqlite3.h>

#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "google/rpc/error_details.pb.h"
#include "google/rpc/status.pb.h"
#include "gtest/gtest.h"
#include "hub/server.h"
#include "hub/v1/message.grpc.pb.h"
#include "hub/v1/presence.grpc.pb.h"
#include "hub/v1/role_service.grpc.pb.h"
#include "tests/agent_stream_fixture.h"
#include "tests/hub_test_util.h"

namespace hub {
namespace {

using testing::NextMessage;
using testing::Reason;

using hub::v1::AttachRequest;
using hub::v1::AttachResponse;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

class MessageGrpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_path_ = testing::FreshTestDbPath();
    server_ = testing::StartTestHub(db_path_);
    ASSERT_NE(server_, nullptr);
    auto channel = grpc::CreateChannel(server_->address(),
                                       grpc::InsecureChannelCredentials());
    presence_ = hub::v1::PresenceService::NewStub(channel);
    roles_ = hub::v1::RoleService::NewStub(channel);
    messages_ = hub::v1::MessageService::NewStub(channel);
  }

  using Agent = testing::AttachedAgent;

  int64_t Register(const std::string& id,
                   const std::vector<std::string>& topics = {}) {
    return testing::RegisterAgentOk(presence_.get(), id, topics);
  }

  Agent Attach(const std::string& id, int64_t generation) {
    return testing::AttachOk(presence_.get(), id, generation);
  }

  grpc::Status Publish(const hub::v1::PublishRequest& request,
                       hub::v1::PublishResponse* response) {
    grpc::ClientContext context;
    return messages_->Publish(&context, request, response);
  }

  hub::v1::PublishResponse MustPublish(const std::string& to,
                                       int priority = 0) {
    hub::v1::PublishRequest request;
    request.set_from_agent_id("sender-1");
    request.set_to(to);
    request.set_priority(priority);
    hub::v1::PublishResponse response;
    grpc::Status s = Publish(request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }

  hub::v1::ListPendingResponse Pending(const std::string& agent,
                                       bool peek = true, int page_size = 0,
                                       const std::string& token = "") {
    grpc::ClientContext context;
    hub::v1::ListPendingRequest request;
    request.set_agent_id(agent);
    request.set_peek(peek);
    request.set_page_size(page_size);
    request.set_page_token(token);
    hub::v1::ListPendingResponse response;
    grpc::Status s = messages_->ListPending(&context, request, &response);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return response;
  }

  std::string db_path_;
  std::unique_ptr<HubServer> server_;
  std::unique_ptr<hub::v1::PresenceService::Stub> presence_;
  std::unique_ptr<hub::v1::RoleService::Stub> roles_;
  std::unique_ptr<hub::v1::MessageService::Stub> messages_;
};

TEST_F(MessageGrpcTest, APublishIsPushedOnTheStreamAndAckedThere) {
  Agent b = Attach("agent-b", Register("agent-b"));
  hub::v1::PublishRequest request;
  request.set_from_agent_id("sender-1");
  request.set_to("agent-b");
  (*request.mutable_payload()->mutable_fields())["task"].set_string_value(
      "build");
  hub::v1::PublishResponse published;
  ASSERT_TRUE(Publish(request, &published).ok());
  EXPECT_EQ(published.recipient_count(), 1);
  EXPECT_EQ(published.type(), hub::v1::MESSAGE_TYPE_EVENT);

  const hub::v1::MessageDelivery d = NextMessage(b);
  EXPECT_EQ(d.message().message_id(), published.message_id());
  EXPECT_EQ(d.message().payload().fields().at("task").string_value(), "build");
  EXPECT_EQ(d.state(), hub::v1::DELIVERY_STATE_DELIVERED);
  EXPECT_EQ(d.attempts(), 1);

  AttachRequest ack;
  ack.set_frame_id(7);
  ack.mutable_message_ack()->add_message_ids(published.message_id());
  ASSERT_TRUE(b.stream->Write(ack));
  // At least once: a publish in the attach's millisecond may also come with
  // the pending messages pushed at attach.
  AttachResponse answer;
  do {
    ASSERT_TRUE(b.stream->Read(&answer));
  } while (answer.event().has_message());
  ASSERT_TRUE(answer.has_message_ack_result()) << answer.DebugString();
  EXPECT_EQ(answer.frame_id(), 7);
  ASSERT_EQ(answer.message_ack_result().acked_message_ids_size(), 1);
  EXPECT_EQ(Pending("agent-b").deliveries_size(), 0);
}

TEST_F(MessageGrpcTest, EveryMessageOfABurstArrivesWithNothingSentAfterIt) {
  // Frames queued behind a write go out with gRPC's buffer hint; the last
  // one of a burst must still flush, with no later traffic to push it.
  Agent b = testing::AttachOk(presence_.get(), "agent-b", Register("agent-b"),
                              absl::Seconds(60));
  constexpr int kPublishers = 8;
  constexpr int kEach = 40;
  std::vector<std::thread> publishers;
  for (int p = 0; p < kPublishers; ++p) {
    publishers.emplace_back([&] {
      auto channel = grpc::CreateChannel(server_->address(),
                                         grpc::InsecureChannelCredentials());
      auto stub = hub::v1::MessageService::NewStub(channel);
      for (int i = 0; i < kEach; ++i) {
        grpc::ClientContext context;
        hub::v1::PublishRequest request;
        request.set_from_agent_id("sender-1");
        request.set_to("agent-b");
        hub::v1::PublishResponse response;
        EXPECT_TRUE(stub->Publish(&context, request, &response).ok());
      }
    });
  }
  for (std::thread& t : publishers) t.join();
  const absl::Time published = absl::Now();
  std::set<std::string> arrived;
  AttachResponse frame;
  while (arrived.size() < kPublishers * kEach && b.stream->Read(&frame)) {
    if (frame.event().has_message()) {
      arrived.insert(frame.event().message().message().message_id());
    }
  }
  EXPECT_EQ(arrived.size(), kPublishers * kEach)
      << "the stream ended (deadline) before the last messages arrived";
  // A held frame would go out with the next keepalive ping (5 s) at best.
  EXPECT_LT(absl::Now() - published, absl::Seconds(4));
}

TEST_F(MessageGrpcTest, APayloadReadsBackExactlyAsItWasSent) {
  hub::v1::PublishRequest request;
  request.set_from_agent_id("sender-1");
  request.set_to("agent-b");
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  R"({"diff": "--- a\n+++ b\n\"q\" \u0001 caf\u00e9",
                      "n": [0, -1, 1.5, 1e+21, 0.30000000000000004, null],
                      "deep": {"ok": true, "list": [{"x": {}}, []]}})",
                  request.mutable_payload())
                  .ok());
  hub::v1::PublishResponse published;
  ASSERT_TRUE(Publish(request, &published).ok());
  Register("agent-b");
  const hub::v1::ListPendingResponse pending = Pending("agent-b");
  ASSERT_EQ(pending.deliveries_size(), 1);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
      pending.deliveries(0).message().payload(), request.payload()))
      << pending.deliveries(0).message().payload().DebugString();
}

TEST_F(MessageGrpcTest, ManyPipelinedAckFramesAreEachAnsweredOnce) {
  Agent b = Attach("agent-b", Register("agent-b"));
  constexpr int kMessages = 40;  // more frames than may wait for writes
  std::vector<std::string> ids;
  for (int i = 0; i < kMessages; ++i) {
    ids.push_back(MustPublish("agent-b").message_id());
  }
  // At least once: the push at attach may repeat an early one.
  std::set<std::string> received;
  while (received.size() < ids.size()) {
    received.insert(NextMessage(b).message().message_id());
  }
  // Every frame is written before any answer is read.
  for (int i = 0; i < kMessages; ++i) {
    AttachRequest ack;
    ack.set_frame_id(100 + i);
    ack.mutable_message_ack()->add_message_ids(ids[i]);
    ack.mutable_message_ack()->add_message_ids(ids[(i + 1) % kMessages]);
    ASSERT_TRUE(b.stream->Write(ack));
  }
  std::set<int64_t> answered;
  std::set<std::string> acked;
  while (static_cast<int>(answered.size()) < kMessages) {
    AttachResponse answer;
    ASSERT_TRUE(b.stream->Read(&answer));
    if (!answer.has_message_ack_result()) continue;
    EXPECT_TRUE(answered.insert(answer.frame_id()).second) << answer.frame_id();
    for (const std::string& id :
         answer.message_ack_result().acked_message_ids())
      acked.insert(id);
    EXPECT_EQ(answer.message_ack_result().ignored_message_ids_size(), 0);
  }
  EXPECT_EQ(*answered.begin(), 100);
  EXPECT_EQ(*answered.rbegin(), 100 + kMessages - 1);
  EXPECT_EQ(acked.size(), ids.size());
  EXPECT_EQ(Pending("agent-b").deliveries_size(), 0);
}

// The hub's counter `name` from its metrics text (what /metrics serves).
int64_t MetricValue(HubServer& server, const std::string& name) {
  const std::string text = server.metrics()->registry().Render();
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::ConsumePrefix(&line, name) || !absl::ConsumePrefix(&line, " "))
      continue;
    double v = 0;
    if (absl::SimpleAtod(line, &v)) return static_cast<int64_t>(v);
  }
  ADD_FAILURE() << name << " missing from the metrics:\n" << text;
  return -1;
}

TEST_F(MessageGrpcTest, AckFramesThatComeWhileTwoAreWrittenAreWrittenAsOne) {
  Agent b = Attach("agent-b", Register("agent-b"));
  constexpr int kFrames = 64;  // as many as a stream has waiting at most
  std::vector<std::string> ids;
  for (int i = 0; i < kFrames; ++i) {
    ids.push_back(MustPublish("agent-b").message_id());
  }
  std::set<std::string> received;
  while (received.size() < ids.size()) {
    received.insert(NextMessage(b).message().message_id());
  }
  const int64_t requests_before =
      MetricValue(*server_, "hub_message_ack_requests_total");
  const int64_t writes_before =
      MetricValue(*server_, "hub_message_ack_writes_total");

  // Another connection holds the database's write lock: the hub's first
  // two ack writes wait for it (busy_timeout, 5 s), the other frames wait
  // behind them.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr),
            SQLITE_OK);
  for (int i = 0; i < kFrames; ++i) {
    AttachRequest ack;
    ack.set_frame_id(500 + i);
    ack.mutable_message_ack()->add_message_ids(ids[i]);
    ASSERT_TRUE(b.stream->Write(ack));
  }
  const absl::Time give_up = absl::Now() + absl::Seconds(4);
  while (MetricValue(*server_, "hub_message_ack_requests_total") <
             requests_before + kFrames &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_EQ(MetricValue(*server_, "hub_message_ack_requests_total"),
            requests_before + kFrames);
  ASSERT_EQ(sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);

  // Each frame is answered once, for its own id.
  std::set<int64_t> answered;
  while (static_cast<int>(answered.size()) < kFrames) {
    AttachResponse answer;
    ASSERT_TRUE(b.stream->Read(&answer));
    if (!answer.has_message_ack_result()) continue;
    const int64_t i = answer.frame_id() - 500;
    ASSERT_TRUE(i >= 0 && i < kFrames) << answer.frame_id();
    EXPECT_TRUE(answered.insert(i).second) << answer.frame_id();
    EXPECT_THAT(answer.message_ack_result().acked_message_ids(),
                ::testing::ElementsAre(ids[i]));
    EXPECT_EQ(answer.message_ack_result().ignored_message_ids_size(), 0);
  }
  // Two writes waited for the lock, one carried the 62 frames behind them.
  EXPECT_EQ(MetricValue(*server_, "hub_message_ack_writes_total"),
            writes_before + 3);
  EXPECT_EQ(Pending("agent-b").deliveries_size(), 0);
}

TEST_F(MessageGrpcTest, ATopicPublishReachesEverySubscriber) {
  Register("sub-1", {"build"});
  Register("sub-2", {"build"});
  Register("other-1", {"test"});
  hub::v1::PublishResponse r = MustPublish("topic:build");
  EXPECT_EQ(r.recipient_count(), 2);
  EXPECT_EQ(Pending("sub-1").deliveries_size(), 1);
  EXPECT_EQ(Pending("sub-2").deliveries_size(), 1);
  EXPECT_EQ(Pending("other-1").deliveries_size(), 0);
}

TEST_F(MessageGrpcTest, ListPendingPagesInPriorityThenAgeOrder) {
  Register("agent-b");
  const std::string low = MustPublish("agent-b", 2).message_id();
  const std::string high = MustPublish("agent-b", 9).message_id();
  const std::string mid1 = MustPublish("agent-b", 5).message_id();
  const std::string mid2 = MustPublish("agent-b", 5).message_id();
  std::vector<std::string> got;
  std::string token;
  do {
    hub::v1::ListPendingResponse page =
        Pending("agent-b", /*peek=*/false, 3, token);
    for (const auto& d : page.deliveries()) {
      got.push_back(d.message().message_id());
      EXPECT_EQ(d.state(), hub::v1::DELIVERY_STATE_DELIVERED);
    }
    token = page.next_page_token();
  } while (!token.empty());
  EXPECT_EQ(got, (std::vector<std::string>{high, mid1, mid2, low}));
}

TEST_F(MessageGrpcTest, OnlyTheRecipientCanAcknowledge) {
  Register("agent-b");
  Register("agent-c");
  const std::string id = MustPublish("agent-b").message_id();
  Pending("agent-b", /*peek=*/false);  // delivered to agent-b
  grpc::ClientContext context;
  hub::v1::AckRequest request;
  request.set_agent_id("agent-c");
  request.add_message_ids(id);
  hub::v1::AckResponse response;
  ASSERT_TRUE(messages_->Ack(&context, request, &response).ok());
  EXPECT_EQ(response.result().ignored_message_ids_size(), 1);
  EXPECT_EQ(Pending("agent-b").deliveries_size(), 1);

  grpc::ClientContext context2;
  request.set_agent_id("agent-b");
  ASSERT_TRUE(messages_->Ack(&context2, request, &response).ok());
  EXPECT_EQ(response.result().acked_message_ids_size(), 1);
  EXPECT_EQ(Pending("agent-b").deliveries_size(), 0);
}

TEST_F(MessageGrpcTest, RoleBacklogGoesToTheNextHolderAfterItsAck) {
  Agent h = Attach("holder-1", Register("holder-1"));
  grpc::ClientContext upsert_context;
  hub::v1::UpsertRoleCandidateRequest upsert;
  upsert.mutable_role_key()->set_project_id(kProject);
  upsert.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_CTO);
  upsert.set_agent_id("holder-1");
  hub::v1::UpsertRoleCandidateResponse upserted;
  ASSERT_TRUE(
      roles_->UpsertRoleCandidate(&upsert_context, upsert, &upserted).ok());

  hub::v1::PublishRequest request;
  request.set_from_agent_id("sender-1");
  request.set_to("topic:cto");
  request.set_project_id(kProject);
  hub::v1::PublishResponse published;
  ASSERT_TRUE(Publish(request, &published).ok());
  EXPECT_EQ(published.recipient_count(), 0);
  EXPECT_EQ(published.role_key().project_id(), kProject);
  ASSERT_TRUE(published.has_activation());
  EXPECT_EQ(published.activation().trigger(),
            hub::v1::ENSURE_ROLE_TRIGGER_PUBLISH_NO_HOLDER);
  EXPECT_EQ(published.activation().cause_id(), published.message_id());

  const hub::v1::RoleActivation a = testing::NextActivation(h);
  ASSERT_TRUE(h.stream->Write(testing::ActivationAckFrame(a, /*frame_id=*/0)));

  const hub::v1::MessageDelivery d = NextMessage(h);
  EXPECT_EQ(d.message().message_id(), published.message_id());
  EXPECT_EQ(d.role_epoch(), a.epoch());
  EXPECT_EQ(d.activation_id(), a.activation_id());
}

// A path that read a message as still to push (the router of a hub that
// shares its database, a backlog hand-over) can mark and push it after the
// agent acknowledged it on its stream. Such a late push sends nothing: the
// next frame is the next message, not the acknowledged one again. The late
// push is called directly, at the moment the race puts it.
TEST_F(MessageGrpcTest, AMessageAcknowledgedOnTheStreamIsNotPushedAgainLate) {
  Agent b = Attach("agent-b", Register("agent-b"));
  const hub::v1::PublishResponse first = MustPublish("agent-b");
  ASSERT_EQ(NextMessage(b).message().message_id(), first.message_id());
  AttachRequest ack;
  ack.set_frame_id(1);
  ack.mutable_message_ack()->add_message_ids(first.message_id());
  ASSERT_TRUE(b.stream->Write(ack));
  AttachResponse answer;
  do {
    ASSERT_TRUE(b.stream->Read(&answer));
  } while (!answer.has_message_ack_result());
  ASSERT_EQ(answer.message_ack_result().acked_message_ids_size(), 1);

  storage::UndeliveredMessage read_before_the_ack;
  read_before_the_ack.agent_id = "agent-b";
  read_before_the_ack.message.id = first.message_id();
  EXPECT_EQ(server_->messaging()->PushRoutedMany({read_before_the_ack}), 0);

  const hub::v1::PublishResponse second = MustPublish("agent-b");
  const hub::v1::MessageDelivery next = NextMessage(b);
  EXPECT_EQ(next.message().message_id(), second.message_id())
      << "pushed again after its ack: " << next.DebugString();
}

TEST_F(MessageGrpcTest,
       ABacklogHandOverThatReadBeforeTheAckPushesNothingAfter) {
  Agent h = Attach("holder-1", Register("holder-1"));
  grpc::ClientContext upsert_context;
  hub::v1::UpsertRoleCandidateRequest upsert;
  upsert.mutable_role_key()->set_project_id(kProject);
  upsert.mutable_role_key()->set_kind(hub::v1::ROLE_KIND_CTO);
  upsert.set_agent_id("holder-1");
  hub::v1::UpsertRoleCandidateResponse upserted;
  ASSERT_TRUE(
      roles_->UpsertRoleCandidate(&upsert_context, upsert, &upserted).ok());
  hub::v1::PublishRequest request;
  request.set_from_agent_id("sender-1");
  request.set_to("topic:cto");
  request.set_project_id(kProject);
  hub::v1::PublishResponse backlog;
  ASSERT_TRUE(Publish(request, &backlog).ok());
  const hub::v1::RoleActivation a = testing::NextActivation(h);
  ASSERT_TRUE(h.stream->Write(testing::ActivationAckFrame(a, /*frame_id=*/0)));
  ASSERT_EQ(NextMessage(h).message().message_id(), backlog.message_id());

  // A second hand-over (an idempotent ACK, another hub's activation) reads
  // the backlog now, while the message is not yet acknowledged.
  RoleKeyRef cto;
  cto.key = RoleKeyInput{};
  cto.key->project_id = kProject;
  cto.key->role_kind = "cto";
  absl::StatusOr<RoleRecord> active = server_->roles()->Get(cto);
  ASSERT_TRUE(active.ok()) << active.status();
  BacklogHandover late = server_->messaging()->HandOverBacklog(*active);
  ASSERT_EQ(late.handed_over, 1);

  AttachRequest ack;
  ack.set_frame_id(1);
  ack.mutable_message_ack()->add_message_ids(backlog.message_id());
  ASSERT_TRUE(h.stream->Write(ack));
  AttachResponse answer;
  do {
    ASSERT_TRUE(h.stream->Read(&answer));
  } while (!answer.has_message_ack_result());
  ASSERT_EQ(answer.message_ack_result().acked_message_ids_size(), 1);
  ASSERT_TRUE(late.push);
  late.push();

  const hub::v1::PublishResponse direct = MustPublish("holder-1");
  const hub::v1::MessageDelivery next = NextMessage(h);
  EXPECT_EQ(next.message().message_id(), direct.message_id())
      << "pushed again after its ack: " << next.DebugString();
}

TEST_F(MessageGrpcTest, EveryBadInputIsInvalidWithItsReasonAndWritesNothing) {
  struct Case {
    std::string name;
    std::function<void(hub::v1::PublishRequest&)> edit;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"sender", [](auto& r) { r.set_from_agent_id(""); }, "AGENT_ID_INVALID"},
      {"address", [](auto& r) { r.set_to("no spaces"); },
       "MESSAGE_ADDRESS_INVALID"},
      {"topic", [](auto& r) { r.set_to("topic:"); }, "TOPIC_INVALID"},
      {"wire", [](auto& r) { r.set_to("topic:role:rk2.x"); },
       "ROLE_KEY_NON_CANONICAL"},
      {"type", [](auto& r) { r.set_type(hub::v1::MESSAGE_TYPE_SYSTEM); },
       "MESSAGE_TYPE_INVALID"},
      {"unknown type",
       [](auto& r) { r.set_type(static_cast<hub::v1::MessageType>(99)); },
       "MESSAGE_TYPE_INVALID"},
      {"priority", [](auto& r) { r.set_priority(10); }, "PRIORITY_INVALID"},
      {"ttl", [](auto& r) { r.mutable_ttl()->set_seconds(86401); },
       "TTL_INVALID"},
      {"short ttl", [](auto& r) { r.mutable_ttl()->set_nanos(999000000); },
       "TTL_INVALID"},
      {"trace", [](auto& r) { r.set_trace_id("a/b"); }, "REQUEST_INVALID"},
      {"NaN in the payload",
       [](auto& r) {
         (*r.mutable_payload()->mutable_fields())["x"].set_number_value(
             std::nan(""));
       },
       "REQUEST_INVALID"},
      {"empty value in the payload",
       [](auto& r) {
         (*r.mutable_payload()->mutable_fields())["l"]
             .mutable_list_value()
             ->add_values();
       },
       "REQUEST_INVALID"},
  };
  for (const Case& c : cases) {
    hub::v1::PublishRequest request;
    request.set_from_agent_id("sender-1");
    request.set_to("agent-b");
    c.edit(request);
    hub::v1::PublishResponse response;
    grpc::Status s = Publish(request, &response);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.name;
    EXPECT_EQ(Reason(s), c.reason) << c.name;
  }
  Register("agent-b");
  EXPECT_EQ(Pending("agent-b").deliveries_size(), 0);
}

TEST_F(MessageGrpcTest, AnExpiredRequestIsDeadLetteredOnceAndItsSenderTold) {
  Register("sender-1");
  hub::v1::PublishRequest request;
  request.set_from_agent_id("sender-1");
  request.set_to("agent-b");
  request.set_type(hub::v1::MESSAGE_TYPE_REQUEST);
  request.mutable_ttl()->set_seconds(1);
  hub::v1::PublishResponse published;
  ASSERT_TRUE(Publish(request, &published).ok());

  // The ticker sweeps each second; wait for the sweep (and its notice to the
  // sender), however late it runs on a busy machine.
  auto dead_letters = [this] {
    grpc::ClientContext context;
    hub::v1::ListDeadLettersResponse dead;
    EXPECT_TRUE(messages_->ListDeadLetters(&context, {}, &dead).ok());
    return dead;
  };
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while ((dead_letters().dead_letters_size() == 0 ||
          Pending("sender-1").deliveries_size() == 0) &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  const hub::v1::ListDeadLettersResponse dead = dead_letters();
  ASSERT_EQ(dead.dead_letters_size(), 1);
  EXPECT_EQ(dead.dead_letters(0).message_id(), published.message_id());
  EXPECT_EQ(dead.dead_letters(0).reason(), "ttl_expired");
  EXPECT_EQ(dead.dead_letters(0).message().status(),
            hub::v1::MESSAGE_STATUS_DEAD_LETTER);

  hub::v1::ListPendingResponse notices = Pending("sender-1");
  ASSERT_EQ(notices.deliveries_size(), 1);
  EXPECT_EQ(notices.deliveries(0).message().type(),
            hub::v1::MESSAGE_TYPE_SYSTEM);
  EXPECT_EQ(notices.deliveries(0).message().topic(), "handoff.dead_letter");
}

TEST_F(MessageGrpcTest, AReattachedAgentGetsItsUnacknowledgedMessagesAgain) {
  const int64_t generation = Register("agent-b");
  const std::string id = MustPublish("agent-b").message_id();
  {
    Agent first = Attach("agent-b", generation);
    EXPECT_EQ(NextMessage(first).message().message_id(), id);
    first.context->TryCancel();  // crashed before acknowledging
  }
  Agent second = Attach("agent-b", generation);
  const hub::v1::MessageDelivery again = NextMessage(second);
  EXPECT_EQ(again.message().message_id(), id);
  EXPECT_EQ(again.attempts(), 2);
}

TEST_F(MessageGrpcTest, AskReturnsTheResponseWithItsCorrelationId) {
  Agent b = Attach("agent-b", Register("agent-b"));
  std::thread answerer([&] {
    const hub::v1::MessageDelivery d = NextMessage(b);
    hub::v1::PublishRequest reply;
    reply.set_from_agent_id("agent-b");
    reply.set_to(d.message().from_agent_id());
    reply.set_correlation_id(d.message().correlation_id());
    reply.set_trace_id(d.message().trace_id());
    hub::v1::PublishResponse published;
    EXPECT_TRUE(Publish(reply, &published).ok());
    EXPECT_EQ(published.type(), hub::v1::MESSAGE_TYPE_RESPONSE);
  });
  grpc::ClientContext context;
  hub::v1::AskRequest ask;
  ask.set_from_agent_id("sender-1");
  ask.set_to("agent-b");
  ask.mutable_await_timeout()->set_seconds(10);
  hub::v1::AskResponse response;
  grpc::Status s = messages_->Ask(&context, ask, &response);
  answerer.join();
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(response.state(), hub::v1::ASK_STATE_ANSWERED);
  EXPECT_EQ(response.response().correlation_id(), response.correlation_id());

  grpc::ClientContext trace_context;
  hub::v1::ListTraceRequest trace;
  trace.set_trace_id(response.trace_id());
  hub::v1::ListTraceResponse traced;
  ASSERT_TRUE(messages_->ListTrace(&trace_context, trace, &traced).ok());
  ASSERT_EQ(traced.messages_size(), 2);
  EXPECT_EQ(traced.messages(0).message_id(), response.request_message_id());
  EXPECT_EQ(traced.messages(1).type(), hub::v1::MESSAGE_TYPE_RESPONSE);
}

}  // namespace
}  // namespace hub
