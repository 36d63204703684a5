#include "registry/activator.h"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "status/status.h"
#include "storage/sqlite/sqlite_store.h"
#include "storage/test_util.h"

namespace hub {
namespace {

using storage::testing::FreshDbPath;
using storage::testing::OpenOrDie;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";

// A presence stream that records what it is sent.
class RecordingStream : public PresenceStream {
 public:
  void Fence(const absl::Status& status) override {
    absl::MutexLock lock(&mu_);
    fences_.push_back(status);
  }
  bool DeliverActivation(const ActivationEnvelope& envelope) override {
    absl::MutexLock lock(&mu_);
    activations_.push_back(envelope);
    return true;
  }
  // Answers at once through `answer` (set once attached); a hung agent's
  // stream has none and never answers.
  bool DeliverProbe(const RoleProbeEnvelope& probe) override {
    std::function<void(const RoleProbeEnvelope&)> answer;
    {
      absl::MutexLock lock(&mu_);
      ++probes_;
      answer = answer_;
    }
    if (answer) answer(probe);
    return true;
  }
  void SetAnswer(std::function<void(const RoleProbeEnvelope&)> answer) {
    absl::MutexLock lock(&mu_);
    answer_ = std::move(answer);
  }
  std::vector<ActivationEnvelope> activations() {
    absl::MutexLock lock(&mu_);
    return activations_;
  }
  int probes() {
    absl::MutexLock lock(&mu_);
    return probes_;
  }
  // The id of its current attachment (kept by the test).
  std::atomic<uint64_t> stream_id{0};

 private:
  absl::Mutex mu_;
  std::vector<absl::Status> fences_;
  std::vector<ActivationEnvelope> activations_;
  std::function<void(const RoleProbeEnvelope&)> answer_;
  int probes_ = 0;
};

// A transport adapter whose answers the test scripts.
class ScriptedAdapter : public TransportAdapter {
 public:
  explicit ScriptedAdapter(std::string kind) : kind_(std::move(kind)) {}
  absl::string_view kind() const override { return kind_; }
  TransportResult Probe(const TransportLocator& l, absl::Duration) override {
    absl::MutexLock lock(&mu_);
    calls.push_back("probe " + l.transport_id);
    return {probe_code, ""};
  }
  TransportResult Wake(const TransportLocator& l, absl::string_view json,
                       absl::Duration) override {
    absl::MutexLock lock(&mu_);
    calls.push_back("wake " + l.transport_id);
    woken_with = std::string(json);
    return {wake_code, ""};
  }
  absl::Mutex mu_;
  std::string probe_code = "ok";
  std::string wake_code = "ok";
  std::vector<std::string> calls;
  std::string woken_with;

 private:
  std::string kind_;
};

class ActivatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenOrDie(FreshDbPath());
    presence_ = std::make_unique<PresenceRegistry>(
        &store_->agents(), store_->membership(), &clock_, PresenceConfig(),
        "instance", "sqlite:test");
    ASSERT_TRUE(presence_->Recover().ok());
    RoleRegistryOptions role_options;
    role_options.on_transition = [this](const RoleTransitionNote& note) {
      absl::MutexLock lock(&audit_mu_);
      notes_.push_back(note);
    };
    roles_ = std::make_unique<RoleRegistry>(&store_->roles(), &clock_,
                                            std::move(role_options));
    absl::StatusOr<RoleWatchStart> watch =
        roles_->Watch(RoleWatchFilter{}, [this](const RoleEvent& event) {
          absl::MutexLock lock(&audit_mu_);
          events_.push_back(event);
        });
    ASSERT_TRUE(watch.ok()) << watch.status();
    watch_ = std::move(watch->watch);
    reach_ = std::make_unique<PresenceStreamReach>(presence_.get());
    activator_ = std::make_unique<Activator>(roles_.get(), presence_.get(),
                                             reach_.get(), &clock_, options_);
    presence_->SetGoneListener(
        [this](const std::string& id, int64_t, AgentGoneReason reason) {
          activator_->OnAgentGone(id, reason);
        });
  }

  // Every scenario ends with the audit of all it changed.
  void TearDown() override { AuditTransitions(); }

  // Checks that every committed change of a role so far was a row of the
  // transition table, applied by the registry through the kernel: the
  // change's version has a kernel note whose (from, trigger, to) is a row of
  // RoleTransitionTable(), whose `to` is the state published and whose
  // `from` is the state of the version the change replaced. Only a new row
  // (version 0) is no transition. And the kernel refused nothing.
  void AuditTransitions() {
    std::vector<RoleEvent> events;
    std::vector<RoleTransitionNote> notes;
    {
      absl::MutexLock lock(&audit_mu_);
      events = events_;
      notes = notes_;
    }
    // By wire, version and whether the note removed the row (a REMOVED
    // change repeats the last version).
    std::map<std::tuple<std::string, int64_t, bool>, RoleTransitionNote>
        applied;
    for (const RoleTransitionNote& note : notes) {
      EXPECT_FALSE(note.refused) << "the kernel refused " << note.from << " + "
                                 << RoleTriggerName(note.trigger);
      if (note.refused) continue;
      applied[{note.role_key_wire, note.version, !note.to.has_value()}] = note;
    }
    std::map<std::string, RoleRecord> last;  // by wire
    for (const RoleEvent& event : events) {
      const RoleRecord& role = event.role;
      if (event.kind == RoleChangeKind::kCreated) {
        EXPECT_EQ(role.version, 0);
        last[role.role_key_wire] = role;
        continue;
      }
      const bool removed = event.kind == RoleChangeKind::kRemoved;
      auto found = applied.find({role.role_key_wire, role.version, removed});
      ASSERT_NE(found, applied.end())
          << "version " << role.version << " (" << role.state << ", "
          << role.last_reason << ") was not decided by the kernel";
      const RoleTransitionNote& note = found->second;
      EXPECT_TRUE(IsTableRow(note))
          << note.from << " + " << RoleTriggerName(note.trigger);
      if (removed) {
        EXPECT_EQ(note.trigger, RoleTrigger::kScopeClosed);
      } else {
        ASSERT_TRUE(note.to.has_value());
        EXPECT_EQ(*note.to, role.state);
      }
      auto before = last.find(role.role_key_wire);
      if (before != last.end() &&
          before->second.version == role.version - (removed ? 0 : 1)) {
        EXPECT_EQ(note.from, before->second.state)
            << "version " << role.version << " by "
            << RoleTriggerName(note.trigger);
      }
      covered_.emplace(std::string(RoleStateName(note.from)),
                       std::string(RoleTriggerName(note.trigger)));
      last[role.role_key_wire] = role;
    }
  }

  static bool IsTableRow(const RoleTransitionNote& note) {
    for (const RoleTransition& row : RoleTransitionTable()) {
      if (row.from == note.from && row.trigger == note.trigger &&
          row.to == note.to) {
        return true;
      }
    }
    return false;
  }

  // The states the role went through, as its watchers saw them.
  std::vector<std::string> StatesSeen() {
    absl::MutexLock lock(&audit_mu_);
    std::vector<std::string> states;
    for (const RoleEvent& e : events_) {
      if (e.role.role_key_wire == Wire()) {
        states.push_back(std::string(RoleStateName(e.role.state)));
      }
    }
    return states;
  }

  // The triggers the kernel applied to the role, in order.
  std::vector<std::string> TriggersApplied() {
    absl::MutexLock lock(&audit_mu_);
    std::vector<std::string> triggers;
    for (const RoleTransitionNote& n : notes_) {
      if (n.role_key_wire == Wire() && !n.refused) {
        triggers.emplace_back(RoleTriggerName(n.trigger));
      }
    }
    return triggers;
  }

  // A registered candidate agent; with a stream unless `stream` is false.
  // `answers_probes` false: the stream is attached but the agent is hung.
  std::shared_ptr<RecordingStream> Candidate(const std::string& id,
                                             bool stream = true,
                                             const std::string& locators = "",
                                             bool answers_probes = true) {
    RegisterInput in;
    in.agent_id = id;
    in.cli = "claude";
    in.capabilities = {"role:cto:candidate"};
    in.project_id = kProject;
    in.ttl = absl::Seconds(60);
    if (!locators.empty()) in.transport_locators_json = locators;
    absl::StatusOr<AgentView> view = presence_->Register(in);
    EXPECT_TRUE(view.ok()) << view.status();
    CandidateUpsertInput c;
    c.role.wire = Wire();
    c.agent_id = id;
    c.patch.source = "operator";
    EXPECT_TRUE(roles_->UpsertCandidate(c).ok());
    if (!stream) return nullptr;
    auto s = std::make_shared<RecordingStream>();
    absl::StatusOr<uint64_t> stream_id =
        presence_->Attach(id, view->record.presence_generation, {}, s);
    EXPECT_TRUE(stream_id.ok());
    s->stream_id = stream_id.value_or(0);
    if (answers_probes) {
      s->SetAnswer([this, id, raw = s.get()](const RoleProbeEnvelope& probe) {
        EXPECT_TRUE(
            presence_->AnswerProbe(id, raw->stream_id, probe.probe_id, true)
                .ok());
      });
    }
    return s;
  }

  std::string Wire() {
    RoleKeyInput in;
    in.project_id = kProject;
    in.role_kind = "cto";
    return *EncodeRoleKey(*NormalizeRoleKey(in));
  }

  absl::StatusOr<EnsureReceipt> Ensure(const std::string& trigger = "manual") {
    EnsureRequest r;
    r.role.wire = Wire();
    r.trigger = trigger;
    r.cause_id = "test";
    return activator_->Ensure(r);
  }

  bool Heartbeat(const std::string& id) {
    HeartbeatInput in;
    in.agent_id = id;
    return presence_->Heartbeat(in).ok();
  }

  RoleRecord Row() { return *roles_->Get(RoleKeyRef{std::nullopt, Wire()}); }

  ActivationAck AckFor(const ActivationEnvelope& e,
                       const std::string& principal) {
    return AcceptingAck(e, principal);
  }

  FakeClock clock_;
  ActivatorOptions options_;
  std::unique_ptr<storage::SqliteStore> store_;
  std::unique_ptr<PresenceRegistry> presence_;
  std::unique_ptr<RoleRegistry> roles_;
  std::unique_ptr<PresenceStreamReach> reach_;
  std::unique_ptr<Activator> activator_;
  absl::Mutex audit_mu_;
  std::vector<RoleEvent> events_ ABSL_GUARDED_BY(audit_mu_);
  std::vector<RoleTransitionNote> notes_ ABSL_GUARDED_BY(audit_mu_);
  // (from, trigger) pairs the audit saw applied.
  std::set<std::pair<std::string, std::string>> covered_;
  std::unique_ptr<RoleWatch> watch_;  // last: cancelled first
};

// §9.5 #10: a closed lead scope answers scope_closed, accepted false, and
// nothing is written; a disabled manager still answers first (§5.8 order).
TEST_F(ActivatorTest, AClosedLeadScopeAnswersScopeClosedAndWritesNothing) {
  RoleKeyInput in;
  in.project_id = kProject;
  in.role_kind = "lead";
  in.scope_id = "scp_CCCCCCCCCCCCCCCCCCCCCC";
  const std::string lead = *EncodeRoleKey(*NormalizeRoleKey(in));
  int notified = 0;
  ActivatorOptions options;
  options.on_scope_closed = [&](const storage::ScopeCloseResult& r) {
    EXPECT_FALSE(r.already_closed);
    ++notified;
  };
  Activator activator(roles_.get(), presence_.get(), reach_.get(), &clock_,
                      options);
  ScopeCloseInput close;
  close.role.wire = lead;
  close.closed_by = "ops";
  ASSERT_TRUE(activator.CloseScope(close).ok());
  absl::StatusOr<ScopeCloseOutcome> again = activator.CloseScope(close);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->result.already_closed);
  EXPECT_EQ(notified, 1);

  EnsureRequest ensure;
  ensure.role.wire = lead;
  ensure.trigger = "manual";
  ensure.cause_id = "test";
  absl::StatusOr<EnsureReceipt> r = activator.Ensure(ensure);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->accepted);
  EXPECT_EQ(r->disposition, EnsureDisposition::kScopeClosed);
  EXPECT_EQ(r->role.role_key_wire, lead);
  EXPECT_TRUE(r->no_row);
  EXPECT_EQ(ReasonOf(roles_->Get(RoleKeyRef{std::nullopt, lead}).status()),
            "ROLE_NOT_FOUND");

  ActivatorOptions off;
  off.lead_manager_enabled = false;
  Activator disabled(roles_.get(), presence_.get(), reach_.get(), &clock_, off);
  r = disabled.Ensure(ensure);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->accepted);
  EXPECT_EQ(r->disposition, EnsureDisposition::kManagerDisabled);
  EXPECT_TRUE(r->no_row);
  EXPECT_EQ(ReasonOf(roles_->Get(RoleKeyRef{std::nullopt, lead}).status()),
            "ROLE_NOT_FOUND");

  ActivationAck ack;
  ack.schema = "tfx.role-activation-ack.v1";
  ack.role.wire = lead;
  ack.reachable = true;
  ack.has_charter_ack = true;
  ack.charter_role.wire = lead;
  EXPECT_EQ(ReasonOf(activator.Ack(ack).status()), "ROLE_SCOPE_CLOSED");
}

TEST_F(ActivatorTest,
       WithoutACandidateTheRoleWaitsBlockedAndNothingIsReserved) {
  absl::StatusOr<EnsureReceipt> r = Ensure();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->disposition, EnsureDisposition::kNoCandidate);
  EXPECT_EQ(Row().state, RoleState::kElectable);
  EXPECT_EQ(Row().blocked_reason, "no_candidate");
  EXPECT_EQ(Row().epoch, 0);
}

TEST_F(ActivatorTest,
       AnAttachedCandidateIsReservedWokenOverItsStreamAndActivatedByItsAck) {
  auto stream = Candidate("agent-a");
  absl::StatusOr<EnsureReceipt> r = Ensure("session_start");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->disposition, EnsureDisposition::kStarted);
  RoleRecord row = Row();
  EXPECT_EQ(row.state, RoleState::kElectedProbing);
  EXPECT_EQ(row.holder_agent_id, "agent-a");
  EXPECT_EQ(row.epoch, 1);
  ASSERT_EQ(stream->activations().size(), 1u);
  const ActivationEnvelope e = stream->activations()[0];
  EXPECT_EQ(e.epoch, 1);
  EXPECT_EQ(e.activation_id, row.activation_id.value_or(""));
  EXPECT_EQ(e.charter_version, "tfx.cto-charter.v1");

  absl::StatusOr<AckOutcome> ack = activator_->Ack(AckFor(e, "agent-a"));
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_FALSE(ack->idempotent);
  EXPECT_EQ(Row().state, RoleState::kActive);
  EXPECT_EQ(Row().charter_acked_epoch, 1);
  // A repeated ACK changes nothing.
  absl::StatusOr<AckOutcome> again = activator_->Ack(AckFor(e, "agent-a"));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->idempotent);
  EXPECT_EQ(again->role.version, ack->role.version);
  // And the role is now simply active.
  EXPECT_EQ(Ensure()->disposition, EnsureDisposition::kAlreadyActive);
}

TEST_F(ActivatorTest, AckChecksRejectWrongSchemaHolderEpochAndCharter) {
  auto stream = Candidate("agent-a");
  Candidate("agent-b");
  ASSERT_TRUE(Ensure().ok());
  const ActivationEnvelope e = stream->activations().at(0);
  ActivationAck bad = AckFor(e, "agent-a");
  bad.schema = "v0";
  EXPECT_EQ(ReasonOf(activator_->Ack(bad).status()), "ACTIVATION_ACK_INVALID");
  bad = AckFor(e, "agent-a");
  bad.reachable = false;
  EXPECT_EQ(ReasonOf(activator_->Ack(bad).status()), "ACTIVATION_ACK_INVALID");
  bad = AckFor(e, "agent-a");
  bad.epoch = e.epoch + 1;
  EXPECT_EQ(ReasonOf(activator_->Ack(bad).status()), "STALE_EPOCH");
  bad = AckFor(e, "agent-a");
  bad.activation_id = "someone-else";
  EXPECT_EQ(ReasonOf(activator_->Ack(bad).status()), "STALE_EPOCH");
  EXPECT_EQ(ReasonOf(activator_->Ack(AckFor(e, "agent-b")).status()),
            "HOLDER_MISMATCH");
  bad = AckFor(e, "agent-a");
  bad.charter_version = "tfx.cto-charter.v0";
  EXPECT_EQ(ReasonOf(activator_->Ack(bad).status()),
            "CHARTER_VERSION_MISMATCH");
  EXPECT_EQ(Row().state, RoleState::kElectedProbing);
}

TEST_F(ActivatorTest, FiftyConcurrentEnsuresMakeExactlyOneReservation) {
  auto stream = Candidate("agent-a");
  std::vector<std::thread> threads;
  absl::Mutex mu;
  int started = 0, joined = 0;
  for (int i = 0; i < 50; ++i) {
    threads.emplace_back([&] {
      absl::StatusOr<EnsureReceipt> r = Ensure();
      ASSERT_TRUE(r.ok()) << r.status();
      absl::MutexLock lock(&mu);
      if (r->disposition == EnsureDisposition::kStarted) ++started;
      if (r->disposition == EnsureDisposition::kJoined) ++joined;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(started, 1);
  EXPECT_EQ(joined, 49);
  EXPECT_EQ(stream->activations().size(), 1u);
  EXPECT_EQ(Row().epoch, 1);
}

TEST_F(ActivatorTest, AnAckTimeoutExcludesTheCandidateAndALateAckIsStale) {
  auto stream = Candidate("agent-a");
  ASSERT_TRUE(Ensure().ok());
  const ActivationEnvelope first = stream->activations().at(0);
  clock_.Advance(absl::Seconds(46));
  ASSERT_TRUE(Heartbeat("agent-a"));
  activator_->Tick();
  RoleRecord row = Row();
  EXPECT_EQ(row.state, RoleState::kUnreachable);
  EXPECT_EQ(row.last_reason, "ack_timeout");
  EXPECT_EQ(row.retry_count, 1);
  EXPECT_FALSE(row.activation_id.has_value());
  ASSERT_TRUE(row.next_probe_ms.has_value());
  EXPECT_EQ(ReasonOf(activator_->Ack(AckFor(first, "agent-a")).status()),
            "STALE_EPOCH");
  // Before the exclusion ends the role waits; after it, a new epoch.
  EXPECT_EQ(Ensure()->disposition, EnsureDisposition::kJoined);
  clock_.Set(absl::FromUnixMillis(*row.next_probe_ms));
  ASSERT_TRUE(Heartbeat("agent-a"));
  activator_->Tick();
  ASSERT_EQ(stream->activations().size(), 2u);
  const ActivationEnvelope second = stream->activations()[1];
  EXPECT_GT(second.epoch, first.epoch);
  EXPECT_NE(second.activation_id, first.activation_id);
  EXPECT_TRUE(activator_->Ack(AckFor(second, "agent-a")).ok());
  EXPECT_EQ(Row().state, RoleState::kActive);
}

TEST_F(ActivatorTest,
       AnAttachedAgentThatNeverAnswersItsProbeIsUnreachableAndTheNextIsTried) {
  options_.config.probe_timeout = absl::Milliseconds(20);
  activator_ = std::make_unique<Activator>(roles_.get(), presence_.get(),
                                           reach_.get(), &clock_, options_);
  auto hung = Candidate("agent-a", true, "", /*answers_probes=*/false);
  auto b = Candidate("agent-b");
  ASSERT_TRUE(Ensure().ok());
  EXPECT_EQ(hung->probes(), 1);
  EXPECT_TRUE(hung->activations().empty());  // never woken
  ASSERT_EQ(b->activations().size(), 1u);
  EXPECT_EQ(Row().holder_agent_id, "agent-b");
  // §5.2's path: the failed candidate is excluded (unreachable), the role is
  // released to the alternate (electable) and elected again.
  EXPECT_EQ(TriggersApplied(),
            (std::vector<std::string>{"candidate_selected", "probe_failed",
                                      "alternate_candidate_available",
                                      "candidate_selected"}));
  absl::StatusOr<CandidatePage> page = roles_->ListCandidates({});
  ASSERT_TRUE(page.ok());
  for (const CandidateRecord& c : page->candidates) {
    if (c.agent_id != "agent-a") continue;
    EXPECT_EQ(c.consecutive_probe_failures, 1);
    EXPECT_EQ(c.last_probe_code, "timeout");
  }
}

TEST_F(ActivatorTest, AProbeAnsweredNotReadyIsTargetNotFound) {
  Candidate("agent-a", true, "", /*answers_probes=*/false);
  absl::StatusOr<AgentView> view = presence_->Get("agent-a");
  ASSERT_TRUE(view.ok());
  // Attach again to learn the stream id, answering "not ready".
  auto s = std::make_shared<RecordingStream>();
  absl::StatusOr<uint64_t> sid =
      presence_->Attach("agent-a", view->record.presence_generation, {}, s);
  ASSERT_TRUE(sid.ok());
  s->SetAnswer([this, sid = *sid](const RoleProbeEnvelope& probe) {
    EXPECT_TRUE(
        presence_->AnswerProbe("agent-a", sid, probe.probe_id, false).ok());
    // A second answer to the same probe is refused.
    EXPECT_EQ(
        ReasonOf(presence_->AnswerProbe("agent-a", sid, probe.probe_id, true)),
        "REQUEST_INVALID");
  });
  ASSERT_TRUE(Ensure().ok());
  EXPECT_EQ(s->probes(), 1);
  EXPECT_TRUE(s->activations().empty());
  EXPECT_EQ(Row().state, RoleState::kUnreachable);
  EXPECT_EQ(Row().last_reason, "target_not_found");
}

TEST_F(ActivatorTest,
       WhenTheHolderIsGoneTheNextCandidateTakesOverWithANewEpoch) {
  auto a = Candidate("agent-a");
  auto b = Candidate("agent-b");
  ASSERT_TRUE(Ensure().ok());
  ASSERT_EQ(a->activations().size(), 1u);
  ASSERT_TRUE(activator_->Ack(AckFor(a->activations()[0], "agent-a")).ok());
  const int64_t active_epoch = Row().epoch;
  // agent-a deregisters: the presence registry says it is gone.
  ASSERT_TRUE(presence_->Deregister("agent-a", std::nullopt, {}).ok());
  RoleRecord row = Row();
  EXPECT_EQ(row.state, RoleState::kElectedProbing);
  EXPECT_EQ(row.holder_agent_id, "agent-b");
  EXPECT_GT(row.epoch, active_epoch);
  ASSERT_EQ(b->activations().size(), 1u);
  // The old holder's late ACK is fenced; the new holder's is accepted.
  EXPECT_EQ(
      ReasonOf(
          activator_->Ack(AckFor(a->activations()[0], "agent-a")).status()),
      "STALE_EPOCH");
  EXPECT_TRUE(activator_->Ack(AckFor(b->activations()[0], "agent-b")).ok());
  EXPECT_EQ(Row().state, RoleState::kActive);
  EXPECT_EQ(Row().holder_agent_id, "agent-b");
}

TEST_F(ActivatorTest, ALocatorCandidateIsProbedAndWokenThroughItsAdapter) {
  auto tmux = std::make_unique<ScriptedAdapter>("tmux");
  ScriptedAdapter* adapter = tmux.get();
  activator_->AddAdapter(std::move(tmux));
  const int64_t expires = UnixMillis(clock_.Now()) + 50'000;
  Candidate("agent-t", /*stream=*/false,
            absl::StrCat(
                R"([{"schema_version":"tfx.transport-locator.v1",)",
                R"("transport_id":"trn_t","kind":"tmux","host_id":"hst_h",)",
                R"("capabilities":["probe","wake","activate"],"priority":1,)",
                R"("expires_at_ms":)", expires,
                R"(,"locator":{"session_name":"s","mux_server_id":"m"}}])"));
  absl::StatusOr<EnsureReceipt> r = Ensure();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->disposition, EnsureDisposition::kStarted);
  EXPECT_EQ(adapter->calls,
            (std::vector<std::string>{"probe trn_t", "wake trn_t"}));
  EXPECT_NE(adapter->woken_with.find("\"schema\":\"tfx.role-activation.v1\""),
            std::string::npos);
  EXPECT_EQ(Row().state, RoleState::kElectedProbing);
}

TEST_F(ActivatorTest,
       AFailedProbeCountsAgainstTheCandidateAndLeavesTheRoleUnreachable) {
  auto tmux = std::make_unique<ScriptedAdapter>("tmux");
  tmux->probe_code = "target_not_found";
  activator_->AddAdapter(std::move(tmux));
  const int64_t expires = UnixMillis(clock_.Now()) + 50'000;
  Candidate("agent-t", /*stream=*/false,
            absl::StrCat(
                R"([{"schema_version":"tfx.transport-locator.v1",)",
                R"("transport_id":"trn_t","kind":"tmux","host_id":"hst_h",)",
                R"("capabilities":["probe","wake","activate"],"priority":1,)",
                R"("expires_at_ms":)", expires,
                R"(,"locator":{"session_name":"s","mux_server_id":"m"}}])"));
  ASSERT_TRUE(Ensure().ok());
  RoleRecord row = Row();
  EXPECT_EQ(row.state, RoleState::kUnreachable);
  EXPECT_EQ(row.last_reason, "target_not_found");
  EXPECT_FALSE(row.holder_agent_id.has_value());
  CandidateListInput list;
  list.role = RoleKeyRef{std::nullopt, Wire()};
  absl::StatusOr<CandidatePage> page = roles_->ListCandidates(list);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->candidates.at(0).consecutive_probe_failures, 1);
}

TEST_F(ActivatorTest,
       ADisabledManagerFencesTheHolderAndReportsManagerDisabled) {
  auto stream = Candidate("agent-a");
  ASSERT_TRUE(Ensure().ok());
  ASSERT_TRUE(
      activator_->Ack(AckFor(stream->activations()[0], "agent-a")).ok());
  options_.cto_manager_enabled = false;
  activator_ = std::make_unique<Activator>(roles_.get(), presence_.get(),
                                           reach_.get(), &clock_, options_);
  absl::StatusOr<EnsureReceipt> r = Ensure();
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->disposition, EnsureDisposition::kManagerDisabled);
  EXPECT_FALSE(r->accepted);
  RoleRecord row = Row();
  EXPECT_EQ(row.state, RoleState::kElectable);
  EXPECT_FALSE(row.holder_agent_id.has_value());
  EXPECT_EQ(row.blocked_reason, "manager_disabled");
  EXPECT_EQ(stream->activations().size(), 1u);
  EXPECT_EQ(TriggersApplied().back(), "manager_disabled");
}

// §5.7: a restart re-probes a live holder under the epoch and activation id
// recovery gave it; the activator carries that reservation out (its answer
// arms the ACK deadline: probe_succeeded) instead of reserving again.
TEST_F(ActivatorTest, ARecoveredReservationIsProbedAndActivatedUnderItsEpoch) {
  auto stream = Candidate("agent-a");
  ASSERT_TRUE(Ensure().ok());
  ASSERT_TRUE(
      activator_->Ack(AckFor(stream->activations().at(0), "agent-a")).ok());
  ASSERT_TRUE(store_->roles().RecoverRoles(UnixMillis(clock_.Now())).ok());
  const RoleRecord recovered = Row();
  ASSERT_EQ(recovered.state, RoleState::kElectedProbing);
  ASSERT_EQ(recovered.holder_agent_id, "agent-a");
  ASSERT_FALSE(recovered.activation_deadline_ms.has_value());

  absl::StatusOr<EnsureReceipt> r = Ensure("restart_recovery");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->disposition, EnsureDisposition::kStarted);
  ASSERT_EQ(stream->activations().size(), 2u);
  const ActivationEnvelope e = stream->activations()[1];
  EXPECT_EQ(e.epoch, recovered.epoch);
  EXPECT_EQ(e.activation_id, recovered.activation_id.value_or(""));
  const RoleRecord armed = Row();
  EXPECT_EQ(armed.epoch, recovered.epoch);
  ASSERT_TRUE(armed.activation_deadline_ms.has_value());
  EXPECT_EQ(e.ack_deadline_ms, *armed.activation_deadline_ms);
  EXPECT_EQ(TriggersApplied().back(), "probe_succeeded");
  ASSERT_TRUE(activator_->Ack(AckFor(e, "agent-a")).ok());
  EXPECT_EQ(Row().state, RoleState::kActive);
  EXPECT_EQ(Row().epoch, recovered.epoch);
}

// §5.2 charter_reissued (reserve_reack): the active holder keeps the role
// and acknowledges again under a new epoch, even when another candidate
// comes first in the candidates' order.
TEST_F(ActivatorTest, ACharterReissueReservesTheSameHolderForANewAck) {
  auto a = Candidate("agent-a");
  ASSERT_TRUE(Ensure().ok());
  ASSERT_TRUE(activator_->Ack(AckFor(a->activations().at(0), "agent-a")).ok());
  const RoleRecord active = Row();
  clock_.Advance(absl::Milliseconds(5));
  auto b = Candidate("agent-b");  // newer: first in the candidates' order

  absl::StatusOr<EnsureReceipt> r = Ensure("charter_issued");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->disposition, EnsureDisposition::kStarted);
  RoleRecord row = Row();
  EXPECT_EQ(row.state, RoleState::kElectedProbing);
  EXPECT_EQ(row.holder_agent_id, "agent-a");
  EXPECT_EQ(row.epoch, active.epoch + 1);
  EXPECT_EQ(row.last_reason, "charter_reissued");
  EXPECT_TRUE(b->activations().empty());
  ASSERT_EQ(a->activations().size(), 2u);
  EXPECT_EQ(
      ReasonOf(
          activator_->Ack(AckFor(a->activations()[0], "agent-a")).status()),
      "STALE_EPOCH");
  ASSERT_TRUE(activator_->Ack(AckFor(a->activations()[1], "agent-a")).ok());
  EXPECT_EQ(Row().state, RoleState::kActive);
  EXPECT_EQ(Row().charter_acked_epoch, active.epoch + 1);
}

// A tmux locator that is usable for 50 s (within the agent's lease).
std::string TmuxLocators(int64_t now_ms) {
  return absl::StrCat(
      R"([{"schema_version":"tfx.transport-locator.v1",)",
      R"("transport_id":"trn_t","kind":"tmux","host_id":"hst_h",)",
      R"("capabilities":["probe","wake","activate"],"priority":1,)",
      R"("expires_at_ms":)", now_ms + 50'000,
      R"(,"locator":{"session_name":"s","mux_server_id":"m"}}])");
}

// Three failed probes quarantine the role (unreachable + retries_exhausted);
// when the exclusion ends the role is first restored to electable
// (exclusion_expired), then elected.
TEST_F(ActivatorTest, AnExpiredQuarantineIsRestoredToElectableThenElected) {
  auto tmux = std::make_unique<ScriptedAdapter>("tmux");
  ScriptedAdapter* adapter = tmux.get();
  tmux->probe_code = "target_not_found";
  activator_->AddAdapter(std::move(tmux));
  Candidate("agent-t", /*stream=*/false,
            TmuxLocators(UnixMillis(clock_.Now())));
  ASSERT_TRUE(Ensure().ok());
  for (int failures = 1; Row().state != RoleState::kQuarantined; ++failures) {
    ASSERT_LE(failures, 3) << Row().state;
    ASSERT_EQ(Row().state, RoleState::kUnreachable);
    clock_.Set(absl::FromUnixMillis(*Row().next_probe_ms));
    ASSERT_TRUE(Heartbeat("agent-t"));
    activator_->Tick();
  }
  const RoleRecord quarantined = Row();
  EXPECT_EQ(quarantined.last_reason, "candidates_excluded");
  // Before the exclusion ends nothing moves.
  EXPECT_EQ(Ensure()->disposition, EnsureDisposition::kJoined);
  EXPECT_EQ(Row().version, quarantined.version);
  {
    absl::MutexLock lock(&adapter->mu_);
    adapter->probe_code = "ok";
  }
  while (UnixMillis(clock_.Now()) < *quarantined.next_probe_ms) {
    clock_.Advance(absl::Seconds(20));
    ASSERT_TRUE(Heartbeat("agent-t"));
  }
  // The agent registers again with a fresh locator (the old one expired).
  Candidate("agent-t", /*stream=*/false,
            TmuxLocators(UnixMillis(clock_.Now())));
  activator_->Tick();
  EXPECT_EQ(Row().state, RoleState::kElectedProbing);
  EXPECT_EQ(Row().holder_agent_id, "agent-t");
  const std::vector<std::string> triggers = TriggersApplied();
  ASSERT_GE(triggers.size(), 4u);
  EXPECT_EQ(
      std::vector<std::string>(triggers.end() - 4, triggers.end()),
      (std::vector<std::string>{"probe_failed", "retries_exhausted",
                                "exclusion_expired", "candidate_selected"}));
}

// An unreachable role whose retry is due with nobody to retry stays as it is
// (§5.2 has no row for that); the receipt says no_candidate.
TEST_F(ActivatorTest, AnUnreachableRoleWithNobodyToRetryIsLeftAsItIs) {
  auto tmux = std::make_unique<ScriptedAdapter>("tmux");
  tmux->probe_code = "target_not_found";
  activator_->AddAdapter(std::move(tmux));
  Candidate("agent-t", /*stream=*/false,
            TmuxLocators(UnixMillis(clock_.Now())));
  ASSERT_TRUE(Ensure().ok());
  ASSERT_EQ(Row().state, RoleState::kUnreachable);
  ASSERT_TRUE(presence_->Deregister("agent-t", std::nullopt, {}).ok());
  const RoleRecord waiting = Row();
  clock_.Set(absl::FromUnixMillis(*waiting.next_probe_ms));
  absl::StatusOr<EnsureReceipt> r = Ensure();
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->disposition, EnsureDisposition::kNoCandidate);
  EXPECT_EQ(Row().version, waiting.version);
  EXPECT_EQ(Row().state, RoleState::kUnreachable);
}

// Thousands of random steps (ensures, charter reissues, ACKs old and new,
// deregistrations, re-registrations, stream drops, clock jumps, ticks, a
// disabled manager, new candidates) with the invariants checked after every
// step: epochs never go back, an ACK is accepted only for the current epoch
// and activation, an active role has its holder's ACK for that epoch, and no
// epoch is ever activated twice. At the end, every state change the walk
// made is a row of the transition table that the kernel applied
// (AuditTransitions).
TEST_F(ActivatorTest, RandomStepsNeverBreakTheAuthorityInvariants) {
  ActivatorOptions off = options_;
  off.cto_manager_enabled = false;
  Activator disabled(roles_.get(), presence_.get(), reach_.get(), &clock_, off);
  int new_candidates = 0;
  std::mt19937 random(20261130);
  const std::vector<std::string> agents = {"agent-0", "agent-1", "agent-2"};
  std::map<std::string, std::shared_ptr<RecordingStream>> streams;
  std::map<std::string, int64_t> generations;
  std::map<std::string, uint64_t> stream_ids;
  for (const std::string& id : agents) {
    streams[id] = Candidate(id);
    generations[id] = store_->agents().GetAgent(id)->presence_generation;
  }
  std::vector<ActivationEnvelope> seen;  // every activation ever sent
  int64_t last_epoch = 0;
  std::map<int64_t, std::string> activated;  // epoch -> agent
  int accepted = 0;
  for (int step = 0; step < 3000; ++step) {
    const std::string agent = agents[random() % agents.size()];
    switch (random() % 10) {
      case 0:
      case 1:
        ASSERT_TRUE(Ensure().ok());
        break;
      case 7:
        ASSERT_TRUE(Ensure("charter_issued").ok());
        break;
      case 8: {  // now and then an ensure finds the kind's manager off
        if (random() % 4 != 0) break;
        EnsureRequest r;
        r.role.wire = Wire();
        r.trigger = "manual";
        r.cause_id = "test";
        ASSERT_TRUE(disabled.Ensure(r).ok());
        break;
      }
      case 9: {  // a new candidate registers (an agent not present yet)
        if (new_candidates >= 30) break;
        CandidateUpsertInput c;
        c.role.wire = Wire();
        c.agent_id = absl::StrCat("agent-new-", new_candidates++);
        ASSERT_TRUE(roles_->UpsertCandidate(c).ok());
        break;
      }
      case 2: {  // some activation ever sent is acknowledged by its holder
        seen.clear();
        for (const auto& [id, s] : streams) {
          for (const ActivationEnvelope& e : s->activations())
            seen.push_back(e);
        }
        std::sort(seen.begin(), seen.end(),
                  [](const ActivationEnvelope& a, const ActivationEnvelope& b) {
                    return a.epoch < b.epoch;
                  });
        if (seen.empty()) break;
        // Mostly the newest activation (a holder answering), sometimes any
        // older one (a late or replayed ACK).
        const ActivationEnvelope e =
            random() % 4 != 0 ? seen.back() : seen[random() % seen.size()];
        const RoleRecord before = Row();
        absl::StatusOr<AckOutcome> ack =
            activator_->Ack(AckFor(e, e.holder_agent_id));
        if (ack.ok() && !ack->idempotent) {
          ++accepted;
          ASSERT_EQ(e.epoch, before.epoch) << "step " << step;
          ASSERT_EQ(e.activation_id, before.activation_id.value_or(""));
          ASSERT_EQ(activated.count(e.epoch), 0u) << "epoch activated twice";
          activated[e.epoch] = e.holder_agent_id;
        }
        if (!ack.ok()) {
          ASSERT_NE(ReasonOf(ack.status()), "") << ack.status();
        }
        break;
      }
      case 3:  // the agent leaves, then comes back as a new registration
        (void)presence_->Deregister(agent, std::nullopt, {});
        if (random() % 2 == 0) {
          streams[agent] = Candidate(agent);
          generations[agent] =
              store_->agents().GetAgent(agent)->presence_generation;
        }
        break;
      case 4: {  // its stream drops; sometimes it re-attaches within grace
        absl::StatusOr<uint64_t> id =
            presence_->Attach(agent, generations[agent], {}, streams[agent]);
        if (!id.ok()) break;
        presence_->Detach(agent, *id);
        if (random() % 2 == 0) {
          absl::StatusOr<uint64_t> again =
              presence_->Attach(agent, generations[agent], {}, streams[agent]);
          if (again.ok()) streams[agent]->stream_id = *again;
        }
        break;
      }
      case 5:
        clock_.Advance(absl::Milliseconds(random() % 5000));
        presence_->Tick();
        activator_->Tick();
        break;
      case 6:
        clock_.Advance(absl::Seconds(random() % 60));
        for (const std::string& id : agents) (void)Heartbeat(id);
        presence_->Tick();
        activator_->Tick();
        break;
    }
    const RoleRecord row = Row();
    ASSERT_GE(row.epoch, last_epoch) << "epoch went back at step " << step;
    last_epoch = row.epoch;
    if (row.state == RoleState::kActive) {
      ASSERT_TRUE(row.holder_agent_id.has_value());
      ASSERT_EQ(row.charter_acked_epoch, row.epoch);
      ASSERT_EQ(activated[row.epoch], *row.holder_agent_id)
          << "active holder without its own ACK at step " << step;
    }
  }
  EXPECT_GT(accepted, 10);  // the walk did exercise activations
  EXPECT_GT(last_epoch, 10);
  AuditTransitions();
  std::string covered;
  for (const auto& [from, trigger] : covered_) {
    absl::StrAppend(&covered, " ", from, "+", trigger);
  }
  std::cout << "rows applied:" << covered << "\n";
  for (const auto& pair : std::vector<std::pair<std::string, std::string>>{
           {"electable", "candidate_selected"},
           {"electable", "no_candidate"},
           {"elected-probing", "activation_acked"},
           {"elected-probing", "probe_failed"},
           {"active", "holder_offline"},
           {"active", "charter_reissued"},
           {"active", "manager_disabled"},
           {"unreachable", "alternate_candidate_available"}}) {
    EXPECT_EQ(covered_.count(pair), 1u) << pair.first << "+" << pair.second;
  }
}

}  // namespace
}  // namespace hub

namespace hub {
namespace {

// A StreamReach whose first Attached() answer is read, then held until the
// test releases it: an ensure that looked at a candidate just before it
// attached.
// A StreamReach that forwards to another; tests override what they change.
class ForwardingReach : public StreamReach {
 public:
  explicit ForwardingReach(StreamReach* inner) : inner_(inner) {}
  bool Attached(const std::string& agent_id) override {
    return inner_->Attached(agent_id);
  }
  StreamProbeResult Probe(const std::string& agent_id,
                          const RoleProbeEnvelope& probe,
                          absl::Duration timeout) override {
    return inner_->Probe(agent_id, probe, timeout);
  }
  bool Deliver(const std::string& agent_id,
               const ActivationEnvelope& envelope) override {
    return inner_->Deliver(agent_id, envelope);
  }

 private:
  StreamReach* const inner_;
};

class StaleFirstLook : public ForwardingReach {
 public:
  explicit StaleFirstLook(StreamReach* inner) : ForwardingReach(inner) {}
  bool Attached(const std::string& agent_id) override {
    const bool attached = ForwardingReach::Attached(agent_id);
    if (!held_.exchange(true)) {
      looked_.Notify();
      release_.WaitForNotification();
    }
    return attached;
  }
  absl::Notification looked_;
  absl::Notification release_;

 private:
  std::atomic<bool> held_{false};
};

TEST_F(ActivatorTest,
       ACandidateThatArrivesWhileAnEnsureLooksTheOtherWayIsStillElected) {
  Candidate("agent-a", /*stream=*/false);
  StaleFirstLook reach(reach_.get());
  Activator activator(roles_.get(), presence_.get(), &reach, &clock_, {});
  std::thread publish([&] {
    EnsureRequest r;
    r.role.wire = Wire();
    r.trigger = "publish_no_holder";
    r.cause_id = "msg-1";
    absl::StatusOr<EnsureReceipt> receipt = activator.Ensure(r);
    ASSERT_TRUE(receipt.ok()) << receipt.status();
    EXPECT_EQ(receipt->disposition, EnsureDisposition::kNoCandidate);
  });
  reach.looked_.WaitForNotification();
  // The candidate attaches after the ensure saw it without a stream; its
  // arrival event comes while that ensure is still in flight.
  auto stream = std::make_shared<RecordingStream>();
  const int64_t generation =
      presence_->Get("agent-a")->record.presence_generation;
  absl::StatusOr<uint64_t> id =
      presence_->Attach("agent-a", generation, {}, stream);
  ASSERT_TRUE(id.ok());
  stream->stream_id = *id;
  stream->SetAnswer([this, raw = stream.get()](const RoleProbeEnvelope& p) {
    EXPECT_TRUE(
        presence_->AnswerProbe("agent-a", raw->stream_id, p.probe_id, true)
            .ok());
  });
  activator.OnCandidateArrived("agent-a");
  reach.release_.Notify();
  publish.join();  // its landing looked again and elected agent-a

  const RoleRecord row = Row();
  EXPECT_EQ(row.state, RoleState::kElectedProbing);
  EXPECT_EQ(row.holder_agent_id, "agent-a");
  ASSERT_EQ(stream->activations().size(), 1u);
  EXPECT_EQ(stream->activations()[0].epoch, row.epoch);
}

TEST_F(ActivatorTest, ACandidateOfARoleNobodyAskedForDoesNotActivateIt) {
  auto stream = Candidate("agent-a");
  activator_->OnCandidateArrived("agent-a");
  activator_->OnCandidateChanged(Wire(), "agent-a");
  EXPECT_EQ(Row().state, RoleState::kElectable);
  EXPECT_EQ(stream->activations().size(), 0u);
  // Asked for, it is.
  EXPECT_EQ(Ensure()->disposition, EnsureDisposition::kStarted);
}

// Hubs sharing a database, as one hub's activator sees them: the test says
// which agents another hub holds, and records the hubs flights are handed
// to.
class SharedReach : public ForwardingReach {
 public:
  explicit SharedReach(StreamReach* inner) : ForwardingReach(inner) {}
  bool Attached(const std::string& agent_id) override {
    return !HeldByOther(agent_id) && ForwardingReach::Attached(agent_id);
  }
  bool Shared() override { return true; }
  bool HeldHere(const std::string& agent_id) override {
    absl::MutexLock lock(&mu_);
    return stale_.count(agent_id) > 0 || elsewhere_.count(agent_id) == 0;
  }
  std::map<std::string, std::string> HeldElsewhere(
      const std::vector<std::string>& agent_ids) override {
    absl::MutexLock lock(&mu_);
    std::map<std::string, std::string> out;
    for (const std::string& id : agent_ids) {
      auto it = elsewhere_.find(id);
      if (it != elsewhere_.end()) out[id] = it->second;
    }
    return out;
  }
  void HandOver(const std::string& hub_id) override {
    absl::MutexLock lock(&mu_);
    handed_.push_back(hub_id);
  }
  void HoldElsewhere(const std::string& agent_id, const std::string& hub_id) {
    absl::MutexLock lock(&mu_);
    elsewhere_[agent_id] = hub_id;
  }
  void HoldHere(const std::string& agent_id) {
    absl::MutexLock lock(&mu_);
    elsewhere_.erase(agent_id);
  }
  // This hub's memory still says it holds `agent_id` (with no stream),
  // though the store says another hub does: nobody told it of the claim.
  void RememberHolding(const std::string& agent_id) {
    absl::MutexLock lock(&mu_);
    stale_.insert(agent_id);
  }
  std::vector<std::string> handed() {
    absl::MutexLock lock(&mu_);
    return handed_;
  }

 private:
  bool HeldByOther(const std::string& agent_id) {
    absl::MutexLock lock(&mu_);
    return elsewhere_.count(agent_id) > 0;
  }
  absl::Mutex mu_;
  std::map<std::string, std::string> elsewhere_;
  std::set<std::string> stale_;
  std::vector<std::string> handed_;
};

TEST_F(ActivatorTest,
       AReservationForACandidateAnotherHubHoldsIsHandedThereAndNotProbedHere) {
  auto stream = Candidate("agent-a");
  SharedReach here(reach_.get());
  here.HoldElsewhere("agent-a", "hub-b");
  Activator activator(roles_.get(), presence_.get(), &here, &clock_, options_);
  EnsureRequest r;
  r.role.wire = Wire();
  r.trigger = "manual";
  r.cause_id = "test";
  absl::StatusOr<EnsureReceipt> receipt = activator.Ensure(r);
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  EXPECT_EQ(receipt->disposition, EnsureDisposition::kStarted);
  EXPECT_EQ(Row().state, RoleState::kElectedProbing);
  EXPECT_EQ(Row().holder_agent_id, "agent-a");
  EXPECT_EQ(here.handed(), std::vector<std::string>{"hub-b"});
  EXPECT_EQ(stream->probes(), 0);
  EXPECT_TRUE(stream->activations().empty());
  // Its ACK deadline passes: the timeout is the holding hub's to count,
  // not this one's.
  clock_.Advance(absl::Seconds(46));
  ASSERT_TRUE(Heartbeat("agent-a"));
  activator.Tick();
  EXPECT_EQ(Row().state, RoleState::kElectedProbing);
  // This hub took the agent over: now it is.
  here.HoldHere("agent-a");
  activator.Tick();
  EXPECT_EQ(Row().state, RoleState::kUnreachable);
  EXPECT_EQ(Row().last_reason, "ack_timeout");
}

TEST_F(ActivatorTest,
       AHubThatStillRemembersHoldingACandidateHandsItsFlightToTheStoresHolder) {
  auto stream = Candidate("agent-a");
  SharedReach here(reach_.get());
  here.HoldElsewhere("agent-a", "hub-b");
  here.RememberHolding("agent-a");
  Activator activator(roles_.get(), presence_.get(), &here, &clock_, options_);
  EnsureRequest r;
  r.role.wire = Wire();
  r.trigger = "manual";
  r.cause_id = "test";
  absl::StatusOr<EnsureReceipt> receipt = activator.Ensure(r);
  ASSERT_TRUE(receipt.ok()) << receipt.status();
  EXPECT_EQ(receipt->disposition, EnsureDisposition::kStarted);
  // Handed to the hub the store names, not probed here, no failure counted.
  EXPECT_EQ(Row().state, RoleState::kElectedProbing);
  EXPECT_EQ(here.handed(), std::vector<std::string>{"hub-b"});
  EXPECT_EQ(stream->probes(), 0);
  EXPECT_EQ(Row().retry_count, 0);
  // Nor is its ACK timeout this hub's to count.
  clock_.Advance(absl::Seconds(46));
  ASSERT_TRUE(Heartbeat("agent-a"));
  activator.Tick();
  EXPECT_EQ(Row().state, RoleState::kElectedProbing);
}

TEST_F(ActivatorTest, AReservationHandedToTheHolderHubIsFlownThereOnce) {
  auto stream = Candidate("agent-a");
  // Hub B reserves for A's agent and hands the flight over.
  SharedReach at_b(reach_.get());
  at_b.HoldElsewhere("agent-a", "hub-a");
  Activator b(roles_.get(), presence_.get(), &at_b, &clock_, options_);
  EnsureRequest r;
  r.role.wire = Wire();
  r.trigger = "manual";
  r.cause_id = "test";
  ASSERT_TRUE(b.Ensure(r).ok());
  ASSERT_TRUE(stream->activations().empty());
  // Hub A, hinted (or at its tick), probes its agent and pushes the
  // activation of B's reservation, once however often it looks.
  SharedReach at_a(reach_.get());
  Activator a(roles_.get(), presence_.get(), &at_a, &clock_, options_);
  a.ContinueHandedFlights();
  a.ContinueHandedFlights();
  a.Tick();
  EXPECT_EQ(stream->probes(), 1);
  ASSERT_EQ(stream->activations().size(), 1u);
  const ActivationEnvelope activation = stream->activations()[0];
  EXPECT_EQ(activation.epoch, Row().epoch);
  EXPECT_EQ(activation.activation_id, Row().activation_id.value_or(""));
  EXPECT_TRUE(a.Ack(AckFor(activation, "agent-a")).ok());
  EXPECT_EQ(Row().state, RoleState::kActive);
  // Acknowledged: neither hub's next scan keeps a memory of the flight.
  EXPECT_EQ(a.remembered_flights(), 1u);
  EXPECT_EQ(b.remembered_flights(), 1u);
  a.ContinueHandedFlights();
  b.ContinueHandedFlights();
  EXPECT_EQ(a.remembered_flights(), 0u);
  EXPECT_EQ(b.remembered_flights(), 0u);
}

}  // namespace
}  // namespace hub
