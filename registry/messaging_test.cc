#include "registry/messaging.h"

#include <sqlite3.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub {
namespace {

using storage::testing::FreshDbPath;
using storage::testing::OpenOrDie;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

// A presence stream that records what it is sent and answers role probes
// (ready) through `answer`, set once it is attached.
class RecordingStream : public PresenceStream {
 public:
  void Fence(const absl::Status&) override {}
  bool DeliverProbe(const RoleProbeEnvelope& probe) override {
    if (answer) answer(probe);
    return true;
  }
  std::function<void(const RoleProbeEnvelope&)> answer;
  bool DeliverActivation(const ActivationEnvelope& envelope) override {
    absl::MutexLock lock(&mu_);
    activations_.push_back(envelope);
    return true;
  }
  bool DeliverMessage(const MessageDelivery& delivery) override {
    absl::MutexLock lock(&mu_);
    messages_.push_back(delivery);
    return true;
  }
  std::vector<ActivationEnvelope> activations() {
    absl::MutexLock lock(&mu_);
    return activations_;
  }
  std::vector<MessageDelivery> messages() {
    absl::MutexLock lock(&mu_);
    return messages_;
  }

 private:
  absl::Mutex mu_;
  std::vector<ActivationEnvelope> activations_;
  std::vector<MessageDelivery> messages_;
};

class MessagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_path_ = FreshDbPath();
    store_ = OpenOrDie(db_path_);
    presence_ = std::make_unique<PresenceRegistry>(
        &store_->agents(), store_->membership(), &clock_, PresenceConfig(),
        "instance", "sqlite:test");
    ASSERT_TRUE(presence_->Recover().ok());
    roles_ = std::make_unique<RoleRegistry>(&store_->roles(), &clock_);
    reach_ = std::make_unique<PresenceStreamReach>(presence_.get());
    ActivatorOptions options;
    options.on_role_active = [this](const RoleRecord& row) {
      BacklogHandover handover;
      handover.handed_over = messaging_->OnRoleActive(row);
      return handover;
    };
    activator_ = std::make_unique<Activator>(roles_.get(), presence_.get(),
                                             reach_.get(), &clock_, options);
    ids_ = std::make_unique<UuidV7Generator>(&clock_);
    messaging_ = std::make_unique<Messaging>(
        &store_->messages(), presence_.get(), roles_.get(), activator_.get(),
        ids_.get(), &clock_);
  }

  // Registers `id` (topics given) and attaches a stream unless `attach` is
  // false.
  std::shared_ptr<RecordingStream> Agent(const std::string& id,
                                         std::vector<std::string> topics = {},
                                         bool attach = true) {
    RegisterInput in;
    in.agent_id = id;
    in.cli = "claude";
    in.topics = std::move(topics);
    in.capabilities = {"role:cto:candidate"};
    in.project_id = kProject;
    in.ttl = absl::Seconds(60);
    absl::StatusOr<AgentView> view = presence_->Register(in);
    EXPECT_TRUE(view.ok()) << view.status();
    if (!attach) return nullptr;
    auto s = std::make_shared<RecordingStream>();
    absl::StatusOr<uint64_t> stream_id =
        presence_->Attach(id, view->record.presence_generation, {}, s);
    EXPECT_TRUE(stream_id.ok());
    s->answer = [this, id,
                 sid = stream_id.value_or(0)](const RoleProbeEnvelope& probe) {
      EXPECT_TRUE(presence_->AnswerProbe(id, sid, probe.probe_id, true).ok());
    };
    return s;
  }

  // Makes `id` an operator-set candidate of the cto role (Wire()).
  void Candidate(const std::string& id,
                 std::optional<int64_t> priority = std::nullopt) {
    CandidateUpsertInput c;
    c.role.wire = Wire();
    c.agent_id = id;
    c.patch.source = "operator";
    c.patch.priority = priority;
    ASSERT_TRUE(roles_->UpsertCandidate(c).ok());
  }

  std::string Wire() {
    RoleKeyInput in;
    in.project_id = kProject;
    in.role_kind = "cto";
    return *EncodeRoleKey(*NormalizeRoleKey(in));
  }

  PublishInput To(const std::string& to, int priority = 0) {
    PublishInput in;
    in.from_agent_id = "sender-1";
    in.to = to;
    in.priority = priority;
    return in;
  }

  PublishResult MustPublish(const PublishInput& in) {
    absl::StatusOr<PublishResult> r = messaging_->Publish(in);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : PublishResult();
  }

  int64_t MessageCount() {
    return static_cast<int64_t>(
               store_->messages().ListDeadLetters({})->size()) +
           static_cast<int64_t>(
               store_->messages()
                   .ListPendingForAgent("agent-b", UnixMillis(clock_.Now()),
                                        1000)
                   ->size());
  }

  FakeClock clock_;
  std::string db_path_;
  std::unique_ptr<storage::SqliteStore> store_;
  std::unique_ptr<PresenceRegistry> presence_;
  std::unique_ptr<RoleRegistry> roles_;
  std::unique_ptr<PresenceStreamReach> reach_;
  std::unique_ptr<Activator> activator_;
  std::unique_ptr<UuidV7Generator> ids_;
  std::unique_ptr<Messaging> messaging_;
};

TEST_F(MessagingTest, APublishToAnAttachedAgentIsDurableThenPushed) {
  auto stream = Agent("agent-b");
  PublishResult r = MustPublish(To("agent-b"));
  EXPECT_EQ(r.recipient_count, 1);
  ASSERT_EQ(stream->messages().size(), 1u);
  EXPECT_EQ(stream->messages()[0].message.id, r.message.id);
  EXPECT_EQ(stream->messages()[0].inbox.attempts, 1);
  EXPECT_EQ(store_->messages().GetMessage(r.message.id)->status,
            MessageStatus::kDelivered);
}

TEST_F(MessagingTest, APublishToAnUnknownAgentIsQueuedForIt) {
  PublishResult r = MustPublish(To("nobody-yet"));
  EXPECT_EQ(r.recipient_count, 1);
  EXPECT_EQ(store_->messages().GetMessage(r.message.id)->status,
            MessageStatus::kQueued);
  EXPECT_EQ(store_->messages().ListInbox(r.message.id)->at(0).agent_id,
            "nobody-yet");
}

TEST_F(MessagingTest, DefaultsAreFilledInAndTypeIsInferred) {
  PublishResult r = MustPublish(To("agent-b"));
  EXPECT_EQ(r.message.type, "event");
  EXPECT_EQ(r.message.priority, 5);
  EXPECT_EQ(r.message.ttl_ms, 300'000);
  EXPECT_EQ(r.message.expires_at_ms, r.message.created_at_ms + 300'000);
  EXPECT_TRUE(IsUuidV7(r.message.correlation_id));
  EXPECT_TRUE(IsUuidV7(r.message.trace_id));
  EXPECT_EQ(r.message.payload_json, "{}");
  PublishInput in = To("agent-b");
  in.correlation_id = "corr-1";
  EXPECT_EQ(MustPublish(in).message.type, "response");
}

TEST_F(MessagingTest, ATopicReachesItsSubscribersThatAreNotOffline) {
  Agent("sub-1", {"build"});
  Agent("sub-2", {"build", "test"}, /*attach=*/false);
  Agent("gone-1", {"build"}, false);
  ASSERT_TRUE(presence_->Deregister("gone-1", std::nullopt, {}).ok());
  Agent("other-1", {"test"});
  PublishResult r = MustPublish(To("topic:build"));
  EXPECT_EQ(r.recipient_count, 2);
  EXPECT_EQ(r.message.topic, "build");
  std::vector<std::string> got;
  const std::vector<InboxRecord> inbox =
      *store_->messages().ListInbox(r.message.id);
  for (const auto& row : inbox) got.push_back(row.agent_id);
  EXPECT_EQ(got, (std::vector<std::string>{"sub-1", "sub-2"}));
}

TEST_F(MessagingTest, EveryBadInputIsInvalidWithItsReasonAndWritesNothing) {
  struct Case {
    std::string name;
    std::function<void(PublishInput&)> edit;
    std::string reason;
  };
  const std::vector<Case> cases = {
      {"bad sender", [](PublishInput& in) { in.from_agent_id = "x"; },
       "AGENT_ID_INVALID"},
      {"empty to", [](PublishInput& in) { in.to = ""; },
       "MESSAGE_ADDRESS_INVALID"},
      {"bad to", [](PublishInput& in) { in.to = "a b"; },
       "MESSAGE_ADDRESS_INVALID"},
      {"bad topic", [](PublishInput& in) { in.to = "topic:a b"; },
       "TOPIC_INVALID"},
      {"role topic", [](PublishInput& in) { in.to = "topic:role:"; },
       "ROLE_KEY_WIRE_PREFIX"},
      {"bad label", [](PublishInput& in) { in.topic = "a/b"; },
       "TOPIC_INVALID"},
      {"system", [](PublishInput& in) { in.type = "system"; },
       "MESSAGE_TYPE_INVALID"},
      {"priority 10", [](PublishInput& in) { in.priority = 10; },
       "PRIORITY_INVALID"},
      {"priority -1", [](PublishInput& in) { in.priority = -1; },
       "PRIORITY_INVALID"},
      {"ttl 999 ms", [](PublishInput& in) { in.ttl = absl::Milliseconds(999); },
       "TTL_INVALID"},
      {"ttl 25 h", [](PublishInput& in) { in.ttl = absl::Hours(25); },
       "TTL_INVALID"},
      {"payload array", [](PublishInput& in) { in.payload_json = "[1]"; },
       "REQUEST_INVALID"},
      {"correlation",
       [](PublishInput& in) { in.correlation_id = std::string(129, 'a'); },
       "REQUEST_INVALID"},
      {"trace", [](PublishInput& in) { in.trace_id = "a b"; },
       "REQUEST_INVALID"},
      {"cto without project", [](PublishInput& in) { in.to = "topic:cto"; },
       "SCOPE_REQUIRED"},
  };
  for (const Case& c : cases) {
    PublishInput in = To("agent-b");
    c.edit(in);
    absl::StatusOr<PublishResult> r = messaging_->Publish(in);
    ASSERT_FALSE(r.ok()) << c.name;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.name;
    EXPECT_EQ(ReasonOf(r.status()), c.reason) << c.name;
  }
  PublishInput big = To("agent-b");
  big.payload_json =
      absl::StrCat("{\"a\":\"", std::string(1024 * 1024, 'x'), "\"}");
  absl::StatusOr<PublishResult> r = messaging_->Publish(big);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReasonOf(r.status()), "LIMIT_EXCEEDED");
  EXPECT_EQ(MessageCount(), 0);
}

TEST_F(MessagingTest, AFullInboxRefusesNewMessagesWholeAndKeepsItsBacklog) {
  MessagingConfig config;
  config.max_pending_per_inbox = 3;
  Messaging limited(&store_->messages(), presence_.get(), roles_.get(),
                    activator_.get(), ids_.get(), &clock_, config);
  Agent("agent-b", {"news"});
  Agent("agent-c", {"news"});
  std::vector<std::string> accepted;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<PublishResult> r = limited.Publish(To("agent-b"));
    ASSERT_TRUE(r.ok()) << r.status();
    accepted.push_back(r->message.id);
  }
  absl::StatusOr<PublishResult> over = limited.Publish(To("agent-b"));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(ReasonOf(over.status()), "LIMIT_EXCEEDED");
  EXPECT_EQ(MetadataOf(over.status())["limit"], "max_pending_per_inbox");
  EXPECT_EQ(MetadataOf(over.status())["limit_value"], "3");
  EXPECT_EQ(MetadataOf(over.status())["agent_id"], "agent-b");
  // A topic message reaching the full inbox is refused for every recipient.
  absl::StatusOr<PublishResult> fanout = limited.Publish(To("topic:news"));
  EXPECT_EQ(ReasonOf(fanout.status()), "LIMIT_EXCEEDED");
  EXPECT_TRUE(store_->messages()
                  .ListPendingForAgent("agent-c", UnixMillis(clock_.Now()), 10)
                  ->empty());
  // The backlog is intact, and acknowledging one makes room for one.
  std::vector<MessageRecord> pending = *store_->messages().ListPendingForAgent(
      "agent-b", UnixMillis(clock_.Now()), 10);
  ASSERT_EQ(pending.size(), 3u);
  for (const MessageRecord& m : pending) {
    EXPECT_NE(std::find(accepted.begin(), accepted.end(), m.id),
              accepted.end());
  }
  ASSERT_TRUE(limited.Ack("agent-b", {accepted[0]}, std::nullopt).ok());
  EXPECT_TRUE(limited.Publish(To("agent-b")).ok());
  EXPECT_EQ(ReasonOf(limited.Publish(To("agent-b")).status()),
            "LIMIT_EXCEEDED");
}

TEST_F(MessagingTest, TheFleetEventsTellPublishesHandoversAndAcks) {
  std::vector<std::string> heard;
  FleetEvents events;
  events.Subscribe([&heard](const FleetEvent& event) {
    const auto* c = std::get_if<MessagesChanged>(&event);
    if (c == nullptr) return;
    heard.push_back(absl::StrCat(absl::StrJoin(c->message_ids, ","), " ",
                                 absl::StrJoin(c->agent_ids, ","), " ",
                                 c->role_wire.value_or("-")));
  });
  messaging_->SetEvents(&events);
  auto b = Agent("agent-b");
  PublishResult to_b = MustPublish(To("agent-b"));
  PublishResult backlog = MustPublish(To("topic:role:" + Wire()));
  ASSERT_TRUE(messaging_->Ack("agent-b", {to_b.message.id}, std::nullopt).ok());
  // The backlog goes to the role's next holder.
  RoleRecord active;
  active.role_key_wire = Wire();
  active.state = RoleState::kActive;
  active.holder_agent_id = "agent-c";
  messaging_->OnRoleActive(active);
  EXPECT_EQ(heard, (std::vector<std::string>{
                       to_b.message.id + " agent-b -",
                       backlog.message.id + "  " + Wire(),
                       to_b.message.id + " agent-b -",
                       backlog.message.id + " agent-c " + Wire()}));
}

TEST_F(MessagingTest, AckAcknowledgesOnlyWhatWasDeliveredToTheAgent) {
  auto b = Agent("agent-b");
  Agent("agent-c", {}, /*attach=*/false);
  PublishResult to_b = MustPublish(To("agent-b"));
  PublishResult to_c = MustPublish(To("agent-c"));
  absl::StatusOr<AckResult> ack = messaging_->Ack(
      "agent-b", {to_b.message.id, to_c.message.id, "unknown"}, std::nullopt);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_EQ(ack->acked, std::vector<std::string>{to_b.message.id});
  EXPECT_EQ(ack->ignored,
            (std::vector<std::string>{to_c.message.id, "unknown"}));
  EXPECT_EQ(store_->messages().GetMessage(to_b.message.id)->status,
            MessageStatus::kAcked);
  // Not yet delivered to agent-c: nothing to acknowledge.
  ack = messaging_->Ack("agent-c", {to_c.message.id}, std::nullopt);
  EXPECT_EQ(ack->ignored, std::vector<std::string>{to_c.message.id});
  // Idempotent.
  ack = messaging_->Ack("agent-b", {to_b.message.id}, std::nullopt);
  EXPECT_EQ(ack->acked, std::vector<std::string>{to_b.message.id});
  EXPECT_EQ(ReasonOf(messaging_->Ack("agent-b", {}, std::nullopt).status()),
            "REQUEST_INVALID");
  EXPECT_EQ(
      ReasonOf(messaging_->Ack("agent-b", {to_b.message.id}, 99).status()),
      "STALE_PRESENCE_OWNER");
  EXPECT_EQ(
      ReasonOf(messaging_->Ack("nobody-here", {"x"}, std::nullopt).status()),
      "AGENT_NOT_FOUND");
}

TEST_F(MessagingTest, AcksFromManyThreadsAtOnceAreEachAnsweredForTheirOwnIds) {
  auto b = Agent("agent-b");
  Agent("agent-c", {}, /*attach=*/false);
  const std::string not_b = MustPublish(To("agent-c")).message.id;
  constexpr int kThreads = 8;
  constexpr int kPerThread = 6;
  std::vector<std::string> ids;
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    ids.push_back(MustPublish(To("agent-b")).message.id);
  }
  int64_t generation = presence_->Get("agent-b")->record.presence_generation;
  std::vector<std::string> heard;
  absl::Mutex mu;
  FleetEvents events;
  events.Subscribe([&](const FleetEvent& event) {
    const auto* c = std::get_if<MessagesChanged>(&event);
    if (c == nullptr) return;
    absl::MutexLock lock(&mu);
    for (const std::string& id : c->message_ids) heard.push_back(id);
  });
  messaging_->SetEvents(&events);
  // Each request: one of agent-b's ids, a neighbour's id again, and an id
  // not delivered to it; every few, a stale generation.
  std::vector<absl::StatusOr<AckResult>> answers(kThreads * kPerThread);
  absl::BlockingCounter left(kThreads * kPerThread);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int k = 0; k < kPerThread; ++k) {
        const int i = t * kPerThread + k;
        const bool stale = i % 7 == 3;
        messaging_->AckAsync("agent-b",
                             {ids[i], ids[(i + 1) % ids.size()], not_b},
                             stale ? generation + 1 : generation,
                             [&, i](absl::StatusOr<AckResult> r) {
                               answers[i] = std::move(r);
                               left.DecrementCount();
                             });
      }
    });
  }
  for (std::thread& t : threads) t.join();
  left.Wait();
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    if (i % 7 == 3) {
      EXPECT_EQ(ReasonOf(answers[i].status()), "STALE_PRESENCE_OWNER") << i;
      continue;
    }
    ASSERT_TRUE(answers[i].ok()) << i << " " << answers[i].status();
    EXPECT_EQ(answers[i]->acked,
              (std::vector<std::string>{ids[i], ids[(i + 1) % ids.size()]}))
        << i;
    EXPECT_EQ(answers[i]->ignored, std::vector<std::string>{not_b}) << i;
  }
  for (int i = 0; i < kThreads * kPerThread; ++i) {
    EXPECT_EQ(store_->messages().GetMessage(ids[i])->status,
              MessageStatus::kAcked)
        << i;
  }
  EXPECT_EQ(store_->messages().GetMessage(not_b)->status,
            MessageStatus::kQueued);
  // Fewer writes than requests when they overlapped; never more.
  EXPECT_EQ(messaging_->acks().requests(), kThreads * kPerThread);
  EXPECT_LE(messaging_->acks().writes(), kThreads * kPerThread);
  absl::MutexLock lock(&mu);
  EXPECT_GE(heard.size(), ids.size());
}

TEST_F(MessagingTest, ItIsDestroyedOnlyOnceTheAckWritesInFlightAreAnswered) {
  auto b = Agent("agent-b");
  const std::string id = MustPublish(To("agent-b")).message.id;
  const int64_t generation =
      presence_->Get("agent-b")->record.presence_generation;
  // Another connection holds the database's write lock: the ack's write
  // waits in the store (busy_timeout) until it is let go.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(db_path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr),
            SQLITE_OK);
  absl::Notification answered;
  absl::StatusOr<AckResult> answer;
  messaging_->AckAsync("agent-b", {id}, generation,
                       [&](absl::StatusOr<AckResult> r) {
                         answer = std::move(r);
                         answered.Notify();
                       });
  absl::Notification destroyed;
  std::thread owner([&] {
    messaging_.reset();
    destroyed.Notify();
  });
  EXPECT_FALSE(
      destroyed.WaitForNotificationWithTimeout(absl::Milliseconds(100)));
  ASSERT_EQ(sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(db);
  owner.join();
  ASSERT_TRUE(answered.HasBeenNotified());
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ(answer->acked, std::vector<std::string>{id});
  EXPECT_EQ(store_->messages().GetMessage(id)->status, MessageStatus::kAcked);
}

TEST_F(MessagingTest, ListPendingOrdersByPriorityThenAgeAndPages) {
  Agent("agent-b", {}, /*attach=*/false);
  std::vector<std::string> expected(5);
  expected[3] = MustPublish(To("agent-b", 3)).message.id;
  clock_.Advance(absl::Milliseconds(5));
  expected[0] = MustPublish(To("agent-b", 9)).message.id;
  clock_.Advance(absl::Milliseconds(5));
  expected[1] = MustPublish(To("agent-b", 5)).message.id;
  clock_.Advance(absl::Milliseconds(5));
  expected[2] = MustPublish(To("agent-b", 5)).message.id;
  clock_.Advance(absl::Milliseconds(5));
  expected[4] = MustPublish(To("agent-b", 1)).message.id;
  PendingQuery q;
  q.agent_id = "agent-b";
  q.page_size = 2;
  std::vector<std::string> got;
  int pages = 0;
  do {
    absl::StatusOr<PendingPage> page = messaging_->ListPending(q);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const auto& d : page->deliveries) {
      got.push_back(d.message.id);
      EXPECT_EQ(d.inbox.attempts, 1);
    }
    q.page_token = page->next_page_token;
    ++pages;
  } while (!q.page_token.empty());
  EXPECT_EQ(got, expected);
  EXPECT_EQ(pages, 3);
  EXPECT_EQ(store_->messages().GetMessage(expected[0])->status,
            MessageStatus::kDelivered);
  q.page_token = "garbage";
  EXPECT_EQ(ReasonOf(messaging_->ListPending(q).status()),
            "PAGE_TOKEN_INVALID");
}

TEST_F(MessagingTest, ListPendingFiltersByTopicAndPeekMarksNothing) {
  Agent("agent-b", {}, /*attach=*/false);
  PublishInput in = To("agent-b");
  in.topic = "build";
  PublishResult build = MustPublish(in);
  MustPublish(To("agent-b"));
  PendingQuery q;
  q.agent_id = "agent-b";
  q.topic = "build";
  q.peek = true;
  absl::StatusOr<PendingPage> page = messaging_->ListPending(q);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->deliveries.size(), 1u);
  EXPECT_EQ(page->deliveries[0].message.id, build.message.id);
  EXPECT_EQ(store_->messages().GetMessage(build.message.id)->status,
            MessageStatus::kQueued);
}

TEST_F(MessagingTest, AReattachedAgentGetsWhatItDidNotAcknowledgeAgain) {
  Agent("agent-b", {}, /*attach=*/false);
  PublishResult r = MustPublish(To("agent-b"));
  auto stream = Agent("agent-b");  // re-registers and attaches
  EXPECT_EQ(messaging_->PushPending("agent-b"), 1);
  EXPECT_EQ(messaging_->PushPending("agent-b"), 1);  // not acked: again
  ASSERT_EQ(stream->messages().size(), 2u);
  EXPECT_EQ(stream->messages()[1].message.id, r.message.id);
  EXPECT_EQ(stream->messages()[1].inbox.attempts, 2);
  ASSERT_TRUE(messaging_->Ack("agent-b", {r.message.id}, std::nullopt).ok());
  EXPECT_EQ(messaging_->PushPending("agent-b"), 0);
}

// The hub's router read the row as undelivered; the publish pushed it
// meanwhile and the agent acknowledged it. The router's late push sends
// nothing: no push after an ack.
TEST_F(MessagingTest, ARoutedPushOfAMessageAcknowledgedMeanwhileSendsNothing) {
  auto stream = Agent("agent-b");
  PublishResult r = MustPublish(To("agent-b"));
  ASSERT_EQ(stream->messages().size(), 1u);
  ASSERT_TRUE(messaging_->Ack("agent-b", {r.message.id}, std::nullopt).ok());

  storage::UndeliveredMessage stale;
  stale.agent_id = "agent-b";
  stale.message = r.message;
  EXPECT_EQ(messaging_->PushRoutedMany({stale}), 0);
  EXPECT_EQ(stream->messages().size(), 1u);
  EXPECT_EQ(store_->messages().ListInbox(r.message.id)->at(0).attempts, 1);
}

TEST_F(MessagingTest, ThePushAtAttachLeavesLaterMessagesToTheirOwnPublish) {
  Agent("agent-b", {}, /*attach=*/false);
  PublishResult before = MustPublish(To("agent-b"));
  auto stream = Agent("agent-b");  // re-registers and attaches
  const int64_t attached_at = UnixMillis(clock_.Now());
  clock_.Advance(absl::Milliseconds(5));
  PublishResult after = MustPublish(To("agent-b"));  // pushed by the publish
  ASSERT_EQ(stream->messages().size(), 1u);
  EXPECT_EQ(stream->messages()[0].message.id, after.message.id);
  EXPECT_EQ(messaging_->PushPending("agent-b", attached_at), 1);
  ASSERT_EQ(stream->messages().size(), 2u);
  EXPECT_EQ(stream->messages()[1].message.id, before.message.id);
}

TEST_F(MessagingTest, RoleBacklogWaitsThenGoesToTheNextHolderInOrder) {
  PublishResult low = MustPublish(To("topic:role:" + Wire(), 2));
  EXPECT_EQ(low.recipient_count, 0);
  EXPECT_EQ(low.message.role_key_wire, Wire());
  EXPECT_EQ(low.message.topic, "role");
  ASSERT_TRUE(low.activation.has_value());
  EXPECT_EQ(low.activation->trigger, "publish_no_holder");
  EXPECT_EQ(low.activation->cause_id, low.message.id);

  auto holder = Agent("holder-1");
  Candidate("holder-1");
  clock_.Advance(absl::Milliseconds(5));
  PublishResult high = MustPublish(To("topic:role:" + Wire(), 8));
  EXPECT_EQ(high.recipient_count, 0);
  ASSERT_EQ(holder->activations().size(), 1u);
  EXPECT_TRUE(holder->messages().empty());

  const ActivationEnvelope e = holder->activations()[0];
  ASSERT_TRUE(activator_->Ack(AcceptingAck(e, "holder-1")).ok());

  ASSERT_EQ(holder->messages().size(), 2u);
  EXPECT_EQ(holder->messages()[0].message.id, high.message.id);
  EXPECT_EQ(holder->messages()[1].message.id, low.message.id);
  EXPECT_EQ(holder->messages()[0].role_epoch, e.epoch);
  EXPECT_EQ(holder->messages()[0].activation_id, e.activation_id);

  // With an active holder a role message goes straight to it.
  PublishResult direct = MustPublish(To("topic:role:" + Wire()));
  EXPECT_EQ(direct.recipient_count, 1);
  EXPECT_FALSE(direct.activation.has_value());
  EXPECT_EQ(holder->messages().size(), 3u);
}

// A hand-over read the backlog, then the holder got the message another way
// and acknowledged it before the hand-over's push ran: that push sends
// nothing.
TEST_F(MessagingTest,
       AHandOverPushOfABacklogMessageAcknowledgedMeanwhileSendsNothing) {
  PublishResult backlog = MustPublish(To("topic:role:" + Wire()));
  auto holder = Agent("holder-1");
  Candidate("holder-1");
  PublishResult wake = MustPublish(To("topic:role:" + Wire()));
  ASSERT_EQ(holder->activations().size(), 1u);
  absl::StatusOr<AckOutcome> acked =
      activator_->Ack(AcceptingAck(holder->activations()[0], "holder-1"));
  ASSERT_TRUE(acked.ok()) << acked.status();
  ASSERT_EQ(holder->messages().size(), 2u);  // both, handed over

  BacklogHandover late = messaging_->HandOverBacklog(acked->role);
  ASSERT_EQ(late.handed_over, 2);
  ASSERT_TRUE(
      messaging_
          ->Ack("holder-1", {backlog.message.id, wake.message.id}, std::nullopt)
          .ok());
  ASSERT_TRUE(late.push);
  late.push();
  EXPECT_EQ(holder->messages().size(), 2u);
  EXPECT_EQ(store_->messages().ListInbox(backlog.message.id)->at(0).attempts,
            1);
}

TEST_F(MessagingTest,
       ARoleMessageWrittenJustAfterTheActivationReachesTheHolder) {
  auto holder = Agent("holder-1");
  Candidate("holder-1");
  // The first message wakes the holder; its ACK is still to come.
  PublishResult first = MustPublish(To("topic:role:" + Wire()));
  ASSERT_EQ(holder->activations().size(), 1u);
  // The second publish finds no holder; the ACK lands after that and before
  // its write, so the activation's backlog hand-over cannot see it.
  bool acked = false;
  messaging_->SetBeforePublishWriteForTesting([&] {
    if (acked) return;
    acked = true;
    ASSERT_TRUE(
        activator_->Ack(AcceptingAck(holder->activations()[0], "holder-1"))
            .ok());
    ASSERT_EQ(holder->messages().size(), 1u);  // the first message only
  });
  PublishResult second = MustPublish(To("topic:role:" + Wire()));
  ASSERT_TRUE(acked);
  EXPECT_EQ(second.recipient_count, 0);
  ASSERT_EQ(holder->messages().size(), 2u);
  EXPECT_EQ(holder->messages()[0].message.id, first.message.id);
  EXPECT_EQ(holder->messages()[1].message.id, second.message.id);
  EXPECT_EQ(holder->messages()[1].role_epoch, holder->activations()[0].epoch);
  // In the holder's inbox once, durable: a re-attach would deliver it.
  EXPECT_EQ(store_->messages().ListInbox(second.message.id)->size(), 1u);
}

TEST_F(MessagingTest, ARoleMessageWrittenAcrossAFailoverReachesTheNewHolder) {
  auto first = Agent("holder-1");
  auto second = Agent("holder-2");
  Candidate("holder-1", 10);
  Candidate("holder-2", 5);
  MustPublish(To("topic:role:" + Wire()));  // wakes holder-1
  ASSERT_EQ(first->activations().size(), 1u);
  ASSERT_TRUE(
      activator_->Ack(AcceptingAck(first->activations()[0], "holder-1")).ok());
  ASSERT_EQ(first->messages().size(), 1u);
  // The next publish addresses holder-1; before its write, holder-1 leaves,
  // holder-2 takes the role and the backlog is handed to it.
  bool failed_over = false;
  messaging_->SetBeforePublishWriteForTesting([&] {
    if (failed_over) return;
    failed_over = true;
    ASSERT_TRUE(presence_->Deregister("holder-1", std::nullopt, {}).ok());
    activator_->OnAgentGone("holder-1", AgentGoneReason::kDeregistered);
    ASSERT_EQ(second->activations().size(), 1u);
    ASSERT_TRUE(
        activator_->Ack(AcceptingAck(second->activations()[0], "holder-2"))
            .ok());
  });
  PublishResult during = MustPublish(To("topic:role:" + Wire()));
  ASSERT_TRUE(failed_over);
  EXPECT_EQ(during.recipient_count, 1);  // holder-1, as the publish saw it
  std::vector<std::string> got;
  for (const MessageDelivery& d : second->messages())
    got.push_back(d.message.id);
  EXPECT_NE(std::find(got.begin(), got.end(), during.message.id), got.end())
      << "the new holder never got the message written across the failover";
  ASSERT_FALSE(second->messages().empty());
  EXPECT_EQ(second->messages().back().role_epoch,
            second->activations()[0].epoch);
}

TEST_F(MessagingTest, AnAgentThatAttachesDuringAPublishGetsItPushed) {
  Agent("agent-b", {}, /*attach=*/false);
  // The publish finds agent-b without a stream; agent-b attaches, and its
  // attach-time push runs, before the publish's write commits.
  auto stream = std::make_shared<RecordingStream>();
  messaging_->SetBeforePublishWriteForTesting([&] {
    if (presence_->StreamAttached("agent-b")) return;
    ASSERT_TRUE(presence_->Attach("agent-b", 1, {}, stream).ok());
    EXPECT_EQ(messaging_->PushPending("agent-b", UnixMillis(clock_.Now())), 0);
  });
  PublishResult r = MustPublish(To("agent-b"));
  EXPECT_EQ(r.recipient_count, 1);
  ASSERT_EQ(stream->messages().size(), 1u);
  EXPECT_EQ(stream->messages()[0].message.id, r.message.id);
  EXPECT_EQ(stream->messages()[0].inbox.attempts, 1);
  // A publish after the attach is pushed by itself, once.
  PublishResult next = MustPublish(To("agent-b"));
  ASSERT_EQ(stream->messages().size(), 2u);
  EXPECT_EQ(stream->messages()[1].message.id, next.message.id);
}

TEST_F(MessagingTest, ExpiryDeadLettersOnceAndNotifiesTheSenderOnce) {
  Agent("sender-1", {}, /*attach=*/false);
  PublishInput in = To("agent-b");
  in.type = "request";
  in.ttl = absl::Seconds(1);
  PublishResult req = MustPublish(in);
  PublishInput ev = To("agent-b");
  ev.ttl = absl::Seconds(1);
  PublishResult event = MustPublish(ev);
  clock_.Advance(absl::Seconds(2));
  EXPECT_EQ(*messaging_->SweepExpired(), 2);
  EXPECT_EQ(*messaging_->SweepExpired(), 0);
  EXPECT_EQ(store_->messages().GetMessage(req.message.id)->status,
            MessageStatus::kDeadLetter);
  EXPECT_EQ(store_->messages().GetDeadLetter(event.message.id)->reason,
            "ttl_expired");
  PendingQuery q;
  q.agent_id = "sender-1";
  q.peek = true;
  absl::StatusOr<PendingPage> notices = messaging_->ListPending(q);
  ASSERT_TRUE(notices.ok());
  ASSERT_EQ(notices->deliveries.size(), 1u);  // only for the request
  const MessageRecord& notice = notices->deliveries[0].message;
  EXPECT_EQ(notice.type, "system");
  EXPECT_EQ(notice.topic, "handoff.dead_letter");
  EXPECT_EQ(notice.priority, 7);
  EXPECT_NE(notice.payload_json.find(req.message.id), std::string::npos);

  DeadLetterQuery dq;
  dq.page_size = 1;
  absl::StatusOr<DeadLetterPage> dl = messaging_->ListDeadLetters(dq);
  ASSERT_TRUE(dl.ok());
  ASSERT_EQ(dl->dead_letters.size(), 1u);
  dq.page_token = dl->next_page_token;
  ASSERT_FALSE(dq.page_token.empty());
  absl::StatusOr<DeadLetterPage> rest = messaging_->ListDeadLetters(dq);
  ASSERT_EQ(rest->dead_letters.size(), 1u);
  EXPECT_TRUE(rest->next_page_token.empty());
  EXPECT_NE(rest->dead_letters[0].dead_letter.message_id,
            dl->dead_letters[0].dead_letter.message_id);
}

TEST_F(MessagingTest, RacingSweepsClaimEachRowOnceAndNotifyOnce) {
  Agent("sender-1", {}, /*attach=*/false);
  std::vector<std::string> ids;
  for (int i = 0; i < 40; ++i) {
    PublishInput in = To("agent-b");
    in.type = i % 2 == 0 ? "request" : "event";
    in.ttl = absl::Seconds(1);
    ids.push_back(MustPublish(in).message.id);
  }
  // One row already failed for another reason: its first reason stays.
  ASSERT_TRUE(*store_->messages().DeadLetterMessage(
      ids[1], "delivery_error", UnixMillis(clock_.Now()), "boom"));
  clock_.Advance(absl::Seconds(2));
  std::vector<int> claimed(4, 0);
  std::vector<std::thread> sweeps;
  for (int t = 0; t < 4; ++t) {
    sweeps.emplace_back([&, t] { claimed[t] = *messaging_->SweepExpired(); });
  }
  for (std::thread& t : sweeps) t.join();
  EXPECT_EQ(claimed[0] + claimed[1] + claimed[2] + claimed[3], 39);
  EXPECT_EQ(store_->messages().GetDeadLetter(ids[1])->reason, "delivery_error");
  EXPECT_EQ(store_->messages().GetDeadLetter(ids[2])->reason, "ttl_expired");
  PendingQuery q;
  q.agent_id = "sender-1";
  q.peek = true;
  q.page_size = 100;
  EXPECT_EQ(messaging_->ListPending(q)->deliveries.size(), 20u);
}

TEST_F(MessagingTest, TickSweepsAtMostOncePerInterval) {
  PublishInput in = To("agent-b");
  in.ttl = absl::Seconds(1);
  PublishResult r = MustPublish(in);
  messaging_->Tick();
  clock_.Advance(absl::Milliseconds(1500));
  messaging_->Tick();
  EXPECT_EQ(store_->messages().GetMessage(r.message.id)->status,
            MessageStatus::kDeadLetter);
}

TEST_F(MessagingTest, ListTraceReturnsTheTraceInTimeOrder) {
  PublishInput in = To("agent-b");
  in.trace_id = "trace-1";
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(MustPublish(in).message.id);
    clock_.Advance(absl::Milliseconds(1));
  }
  MustPublish(To("agent-b"));
  absl::StatusOr<TracePage> page = messaging_->ListTrace("trace-1", 2, "");
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->messages.size(), 2u);
  absl::StatusOr<TracePage> rest =
      messaging_->ListTrace("trace-1", 2, page->next_page_token);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->messages.size(), 1u);
  EXPECT_EQ(rest->messages[0].id, ids[2]);
  EXPECT_EQ(ReasonOf(messaging_->ListTrace("", 0, "").status()),
            "REQUEST_INVALID");
}

TEST_F(MessagingTest, AskReturnsTheResponseWithTheSameCorrelationId) {
  PublishInput ask = To("agent-b");
  ask.correlation_id = "corr-ask";
  std::thread answerer([&] {
    // Answer once the request exists.
    for (int i = 0; i < 1000; ++i) {
      PendingQuery q;
      q.agent_id = "agent-b";
      if (presence_->Get("agent-b").ok() &&
          !messaging_->ListPending(q)->deliveries.empty()) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(5));
    }
    PublishInput reply;
    reply.from_agent_id = "agent-b";
    reply.to = "sender-1";
    reply.correlation_id = "corr-ask";
    reply.payload_json = R"({"answer":42})";
    ASSERT_TRUE(messaging_->Publish(reply).ok());
  });
  Agent("agent-b", {}, /*attach=*/false);
  absl::StatusOr<AskResult> r = messaging_->Ask(ask, absl::Seconds(10));
  answerer.join();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->state, AskState::kAnswered);
  ASSERT_TRUE(r->response.has_value());
  EXPECT_EQ(r->response->payload_json, R"({"answer":42})");
  EXPECT_EQ(r->request.message.type, "request");
}

TEST_F(MessagingTest, AskWithoutAnAnswerEndsQueuedOrDelivered) {
  absl::StatusOr<AskResult> r =
      messaging_->Ask(To("agent-b"), absl::Milliseconds(20));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->state, AskState::kQueued);
  Agent("agent-c");
  r = messaging_->Ask(To("agent-c"), absl::Milliseconds(20));
  EXPECT_EQ(r->state, AskState::kDelivered);
  EXPECT_EQ(
      ReasonOf(messaging_->Ask(To("agent-c"), absl::Seconds(31)).status()),
      "REQUEST_INVALID");
}

}  // namespace
}  // namespace hub
