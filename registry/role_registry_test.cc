#include "registry/role_registry.h"

#include <algorithm>
#include <atomic>
#include <map>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "registry/clock.h"
#include "status/status.h"
#include "storage/test_util.h"

namespace hub {
namespace {

using storage::testing::FreshDbPath;
using storage::testing::OpenOrDie;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";
constexpr char kOtherProject[] = "prj_BBBBBBBBBBBBBBBBBBBBBB";
constexpr char kScope[] = "scp_CCCCCCCCCCCCCCCCCCCCCC";

RoleKeyRef Cto(const std::string& project = kProject) {
  RoleKeyRef ref;
  ref.key = RoleKeyInput{project, "cto", std::nullopt};
  return ref;
}

RoleKeyRef Lead(const std::string& project = kProject) {
  RoleKeyRef ref;
  ref.key = RoleKeyInput{project, "lead", std::string(kScope)};
  return ref;
}

std::string WireOf(const RoleKeyRef& ref) { return ResolveRoleKey(ref)->wire; }

class RoleRegistryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = OpenOrDie(FreshDbPath());
    RoleRegistryOptions options;
    options.random_unit = [] { return 0.5; };
    options.on_transition = [this](const RoleTransitionNote& note) {
      absl::MutexLock lock(&notes_mu_);
      notes_.push_back(note);
    };
    registry_ =
        std::make_unique<RoleRegistry>(&store_->roles(), &clock_, options);
  }

  std::vector<RoleTransitionNote> Notes() {
    absl::MutexLock lock(&notes_mu_);
    return notes_;
  }

  RoleRecord ReserveOk(const RoleKeyRef& role,
                       std::optional<std::string> holder = std::nullopt) {
    ReserveInput in;
    in.role = role;
    in.patch.holder_agent_id = holder;
    absl::StatusOr<ReserveResult> r = registry_->Reserve(in);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->role : RoleRecord();
  }

  // Makes agent-a a candidate of the cto role through `registry`.
  static void CandidateA(RoleRegistry& registry) {
    CandidateUpsertInput up;
    up.role = Cto();
    up.agent_id = "agent-a";
    ASSERT_TRUE(registry.UpsertCandidate(up).ok());
  }

  // A probe of agent-a for the cto role that ended with `code`.
  static ProbeReportInput ProbeOfA(const std::string& code) {
    ProbeReportInput probe;
    probe.role = Cto();
    probe.agent_id = "agent-a";
    probe.code = code;
    return probe;
  }

  CasInput CasFrom(const RoleRecord& row) {
    CasInput in;
    in.role = Cto();
    in.role.key->project_id = row.project_id;
    in.expected_version = row.version;
    in.expected_epoch = row.epoch;
    in.expected_activation_seq = row.activation_seq;
    in.expected_activation_id = row.activation_id;
    return in;
  }

  FakeClock clock_;
  std::unique_ptr<storage::SqliteStore> store_;
  std::unique_ptr<RoleRegistry> registry_;
  absl::Mutex notes_mu_;
  std::vector<RoleTransitionNote> notes_ ABSL_GUARDED_BY(notes_mu_);
};

TEST_F(RoleRegistryTest, FirstReservationCreatesTheRowAtEpochZero) {
  ReserveInput in;
  in.role = Cto();
  absl::StatusOr<ReserveResult> r = registry_->Reserve(in);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->created);
  EXPECT_EQ(r->role.epoch, 0);
  EXPECT_EQ(r->role.activation_seq, 0);
  EXPECT_EQ(r->role.version, 0);
  EXPECT_EQ(r->role.state, RoleState::kElectable);
  EXPECT_EQ(r->role.last_reason, "role_reserved");
}

TEST_F(RoleRegistryTest, EveryReReservationAdvancesEpochAndSeqByExactlyOne) {
  ReserveOk(Cto());
  for (int i = 1; i <= 3; ++i) {
    RoleRecord row = ReserveOk(Cto(), "agent-" + std::to_string(i));
    EXPECT_EQ(row.epoch, i);
    EXPECT_EQ(row.activation_seq, i);
    EXPECT_EQ(row.version, i);
    EXPECT_EQ(row.state, RoleState::kElectedProbing);
    EXPECT_TRUE(row.activation_id.has_value());
  }
}

TEST_F(RoleRegistryTest, StaleVersionIsAbortedAndCarriesTheRowsFence) {
  ReserveOk(Cto());
  RoleRecord row = ReserveOk(Cto(), "agent-a");
  ReserveInput in;
  in.role = Cto();
  in.expected_version = row.version - 1;
  absl::StatusOr<ReserveResult> r = registry_->Reserve(in);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(ReasonOf(r.status()), "STALE_VERSION");
  auto md = MetadataOf(r.status());
  EXPECT_EQ(md["version"], "1");
  EXPECT_EQ(md["epoch"], "1");
  EXPECT_EQ(md["activation_seq"], "1");
  EXPECT_EQ(md["activation_id"], *row.activation_id);
  EXPECT_EQ(md["state"], "elected-probing");
  EXPECT_EQ(md["holder_agent_id"], "agent-a");
}

TEST_F(RoleRegistryTest, StaleEpochAndWrongNextValuesAreFailedPrecondition) {
  ReserveOk(Cto());
  ReserveOk(Cto());  // epoch 1
  ReserveInput in;
  in.role = Cto();
  in.expected_epoch = 0;
  EXPECT_EQ(ReasonOf(registry_->Reserve(in).status()), "STALE_EPOCH");
  in.expected_epoch.reset();
  in.next_epoch = 5;
  EXPECT_EQ(ReasonOf(registry_->Reserve(in).status()), "STALE_EPOCH");
  in.next_epoch = 2;
  in.next_activation_seq = 7;
  absl::Status s = registry_->Reserve(in).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(s), "STALE_ACTIVATION_SEQ");
  in.next_activation_seq = 2;
  EXPECT_TRUE(registry_->Reserve(in).ok());
}

TEST_F(RoleRegistryTest, GuardsOnARowThatDoesNotExistMustNameTheZeroRow) {
  ReserveInput in;
  in.role = Cto();
  in.expected_version = 3;
  EXPECT_EQ(ReasonOf(registry_->Reserve(in).status()), "STALE_VERSION");
  in.expected_version = 0;
  in.next_epoch = 1;
  EXPECT_EQ(ReasonOf(registry_->Reserve(in).status()), "STALE_EPOCH");
  EXPECT_EQ(registry_->Get(Cto()).status().code(), absl::StatusCode::kNotFound);
  in.next_epoch = 0;
  EXPECT_TRUE(registry_->Reserve(in).ok());
}

TEST_F(RoleRegistryTest, KeyGivenBothWaysMustNameOneRole) {
  RoleKeyRef both = Cto();
  both.wire = WireOf(Lead());
  EXPECT_EQ(ReasonOf(ResolveRoleKey(both).status()), "ROLE_KEY_MISMATCH");
  both.wire = WireOf(Cto());
  EXPECT_TRUE(ResolveRoleKey(both).ok());
  EXPECT_EQ(ReasonOf(ResolveRoleKey(RoleKeyRef{}).status()),
            "ROLE_KEY_INVALID");
  RoleKeyRef bad_wire;
  bad_wire.wire = "rk1.xyz";
  EXPECT_EQ(ReasonOf(ResolveRoleKey(bad_wire).status()),
            "ROLE_KEY_WIRE_PREFIX");
  RoleKeyRef bad_scope = Cto();
  bad_scope.key->scope_id = kScope;
  absl::Status s = ResolveRoleKey(bad_scope).status();
  EXPECT_EQ(ReasonOf(s), "ROLE_SCOPE_FORBIDDEN");
  EXPECT_EQ(MetadataOf(s)["field"], "role_key.scope_id");
}

TEST_F(RoleRegistryTest, CompareAndSetNeedsAllFourGuards) {
  RoleRecord row = ReserveOk(Cto());
  CasInput in = CasFrom(row);
  in.expected_activation_id.reset();
  absl::Status s = registry_->CompareAndSet(in).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(s), "INVALID_CAS");
  in = CasFrom(row);
  in.expected_activation_seq.reset();
  EXPECT_EQ(ReasonOf(registry_->CompareAndSet(in).status()), "INVALID_CAS");
}

TEST_F(RoleRegistryTest, CompareAndSetOnAMissingRoleIsRoleNotFound) {
  CasInput in = CasFrom(RoleRecord{});
  in.role = Lead();
  absl::Status s = registry_->CompareAndSet(in).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ReasonOf(s), "ROLE_NOT_FOUND");
}

TEST_F(RoleRegistryTest, CompareAndSetReportsEachStaleGuardInOrder) {
  ReserveOk(Cto());
  RoleRecord row = ReserveOk(Cto(), "agent-a");
  CasInput in = CasFrom(row);
  in.expected_version = row.version + 1;
  in.expected_epoch = row.epoch + 1;
  absl::Status s = registry_->CompareAndSet(in).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(ReasonOf(s), "STALE_VERSION");
  in.expected_version = row.version;
  EXPECT_EQ(ReasonOf(registry_->CompareAndSet(in).status()), "STALE_EPOCH");
  in.expected_epoch = row.epoch;
  in.expected_activation_seq = 0;
  EXPECT_EQ(ReasonOf(registry_->CompareAndSet(in).status()),
            "STALE_ACTIVATION_SEQ");
  in.expected_activation_seq = row.activation_seq;
  in.expected_activation_id = std::optional<std::string>();  // "none"
  s = registry_->CompareAndSet(in).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReasonOf(s), "STALE_ACTIVATION_ID");
  in.expected_activation_id = row.activation_id;
  in.patch.state = RoleState::kActive;
  absl::StatusOr<RoleRecord> done = registry_->CompareAndSet(in);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->version, row.version + 1);
  EXPECT_EQ(done->epoch, row.epoch);
  EXPECT_EQ(done->activation_seq, row.activation_seq);
}

TEST_F(RoleRegistryTest, MaskClearsListedFieldsAndAbsentFieldsAreKept) {
  RoleRecord row = ReserveOk(Cto(), "agent-a");
  CasInput keep = CasFrom(row);
  keep.patch.blocked_reason = "no_candidate";
  absl::StatusOr<RoleRecord> kept = registry_->CompareAndSet(keep);
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->activation_id, row.activation_id);
  CasInput clear = CasFrom(*kept);
  clear.patch.update_mask = {"activation_id", "state"};
  clear.patch.state = RoleState::kElectable;
  absl::StatusOr<RoleRecord> cleared = registry_->CompareAndSet(clear);
  ASSERT_TRUE(cleared.ok()) << cleared.status();
  EXPECT_FALSE(cleared->activation_id.has_value());
  EXPECT_EQ(cleared->blocked_reason, "no_candidate");
  // The "none" guard now matches.
  CasInput none = CasFrom(*cleared);
  none.expected_activation_id = std::optional<std::string>();
  EXPECT_TRUE(registry_->CompareAndSet(none).ok());
}

TEST_F(RoleRegistryTest, BadMasksAndValuesAreRefusedWithStableReasons) {
  RoleRecord row = ReserveOk(Cto(), "agent-a");
  auto reason = [&](auto edit) {
    CasInput in = CasFrom(row);
    edit(in.patch);
    return ReasonOf(registry_->CompareAndSet(in).status());
  };
  EXPECT_EQ(reason([](RolePatchInput& p) { p.update_mask = {"epoch"}; }),
            "UPDATE_MASK_INVALID");
  EXPECT_EQ(reason([](RolePatchInput& p) {
              p.update_mask = {"state", "state"};
              p.state = RoleState::kActive;
            }),
            "UPDATE_MASK_INVALID");
  EXPECT_EQ(reason([](RolePatchInput& p) {
              p.update_mask = {"blocked_reason"};
              p.state = RoleState::kActive;
            }),
            "UPDATE_MASK_INVALID");
  EXPECT_EQ(reason([](RolePatchInput& p) { p.update_mask = {"retry_count"}; }),
            "REQUEST_INVALID");
  EXPECT_EQ(reason([](RolePatchInput& p) { p.state_unknown = true; }),
            "ROLE_REACHABILITY_STATE_INVALID");
  EXPECT_EQ(reason([](RolePatchInput& p) { p.holder_agent_id = "x"; }),
            "AGENT_ID_INVALID");
  EXPECT_EQ(reason([](RolePatchInput& p) { p.charter_acked_epoch = 9; }),
            "REQUEST_INVALID");
  EXPECT_EQ(reason([](RolePatchInput& p) {
              p.state = RoleState::kActive;
              p.update_mask = {"state", "holder_agent_id"};
            }),
            "REQUEST_INVALID");
  // Nothing of the refused requests was written.
  EXPECT_EQ(registry_->Get(Cto())->version, row.version);
}

TEST_F(RoleRegistryTest, ActiveWithoutAHolderIsRefusedBeforeTheStore) {
  RoleRecord row = ReserveOk(Cto());
  CasInput in = CasFrom(row);
  in.patch.state = RoleState::kActive;
  absl::Status s = registry_->CompareAndSet(in).status();
  EXPECT_EQ(ReasonOf(s), "REQUEST_INVALID");
  EXPECT_EQ(MetadataOf(s)["field"], "patch.state");
}

TEST_F(RoleRegistryTest, ListFiltersAndPagesByWire) {
  ReserveOk(Cto());
  ReserveOk(Lead());
  ReserveOk(Cto(kOtherProject), "agent-a");
  RoleListFilter all;
  absl::StatusOr<RolePage> page = registry_->List(all, 2, "");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->roles.size(), 2u);
  EXPECT_LT(page->roles[0].role_key_wire, page->roles[1].role_key_wire);
  ASSERT_FALSE(page->next_page_token.empty());
  absl::StatusOr<RolePage> rest =
      registry_->List(all, 2, page->next_page_token);
  ASSERT_TRUE(rest.ok());
  ASSERT_EQ(rest->roles.size(), 1u);
  EXPECT_TRUE(rest->next_page_token.empty());
  RoleListFilter lead;
  lead.kind = RoleKind::kLead;
  EXPECT_EQ(registry_->List(lead, 0, "")->roles.size(), 1u);
  EXPECT_EQ(ReasonOf(registry_->List(lead, 2, page->next_page_token).status()),
            "PAGE_TOKEN_INVALID");
  RoleListFilter probing;
  probing.states = {RoleState::kElectedProbing};
  EXPECT_EQ(registry_->List(probing, 0, "")->roles.size(), 1u);
  probing.states_unknown = true;
  EXPECT_EQ(ReasonOf(registry_->List(probing, 0, "").status()),
            "ROLE_REACHABILITY_STATE_INVALID");
  EXPECT_EQ(ReasonOf(registry_->List(all, -1, "").status()), "REQUEST_INVALID");
}

TEST_F(RoleRegistryTest, WatchersSeeEachRolesVersionsInAscendingOrder) {
  ReserveOk(Cto());
  absl::Mutex mu;
  std::vector<int64_t> versions;
  RoleWatchFilter filter;
  filter.project_id = kProject;
  absl::StatusOr<RoleWatchStart> start =
      registry_->Watch(filter, [&](const RoleEvent& e) {
        absl::MutexLock lock(&mu);
        versions.push_back(e.role.version);
      });
  ASSERT_TRUE(start.ok()) << start.status();
  ASSERT_EQ(start->snapshot.size(), 1u);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10; ++i) ReserveOk(Cto());
    });
  }
  for (std::thread& t : threads) t.join();
  ReserveOk(Cto(kOtherProject));  // filtered out
  absl::MutexLock lock(&mu);
  ASSERT_FALSE(versions.empty());
  for (size_t i = 1; i < versions.size(); ++i) {
    EXPECT_LT(versions[i - 1], versions[i]);
  }
  EXPECT_EQ(versions.back(), 40);
}

TEST_F(RoleRegistryTest, ACancelledWatchIsNeverCalledAgain) {
  std::atomic<int> calls{0};
  absl::StatusOr<RoleWatchStart> start = registry_->Watch(
      RoleWatchFilter{}, [&](const RoleEvent&) { calls.fetch_add(1); });
  ASSERT_TRUE(start.ok());
  ReserveOk(Cto());
  EXPECT_EQ(calls.load(), 1);
  start->watch->Cancel();
  ReserveOk(Cto());
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(RoleRegistryTest, UpsertCreatesTheRoleAndMergesLaterWrites) {
  CandidateUpsertInput in;
  in.role = Lead();
  in.agent_id = "agent-a";
  in.patch.priority = 5;
  in.patch.excluded_until_ms = 1'700'000'100'000;
  absl::StatusOr<CandidateUpsertResult> first = registry_->UpsertCandidate(in);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  EXPECT_EQ(first->candidate.source, "operator");
  EXPECT_EQ(first->candidate.excluded_until_ms, 1'700'000'100'000);
  EXPECT_EQ(registry_->Get(Lead())->state, RoleState::kElectable);
  CandidateUpsertInput merge;
  merge.role = Lead();
  merge.agent_id = "agent-a";
  merge.patch.source = "grant";
  absl::StatusOr<CandidateUpsertResult> second =
      registry_->UpsertCandidate(merge);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->created);
  EXPECT_EQ(second->candidate.priority, 5);
  EXPECT_EQ(second->candidate.excluded_until_ms, 1'700'000'100'000);
  merge.patch.source.reset();
  merge.patch.update_mask = {"excluded_until"};
  second = registry_->UpsertCandidate(merge);
  ASSERT_TRUE(second.ok());
  EXPECT_FALSE(second->candidate.excluded_until_ms.has_value());
  EXPECT_EQ(registry_->Get(Lead())->version, 0);  // the role was not touched
}

TEST_F(RoleRegistryTest,
       CandidatesOfEveryRolePageByWireThenActivatorOrderEachOnce) {
  const std::vector<RoleKeyRef> roles = {Cto(), Lead(), Cto(kOtherProject),
                                         Lead(kOtherProject)};
  for (const RoleKeyRef& role : roles) {
    for (int i = 0; i < 25; ++i) {
      CandidateUpsertInput up;
      up.role = role;
      up.agent_id = absl::StrCat("agent-", i);
      up.patch.priority = i % 4;  // ties broken by updated_at, then agent
      clock_.Advance(absl::Milliseconds(i % 3));
      ASSERT_TRUE(registry_->UpsertCandidate(up).ok());
    }
  }
  // Pages of `size` as `scope` sees them, as "wire/agent" keys.
  auto all = [&](int size, const ProjectScope& scope) {
    std::vector<std::string> keys;
    CandidateListInput list;
    list.page_size = size;
    list.scope = scope;
    for (int pages = 0; pages < 1000; ++pages) {
      absl::StatusOr<CandidatePage> page = registry_->ListCandidates(list);
      EXPECT_TRUE(page.ok()) << page.status();
      if (!page.ok()) break;
      for (const CandidateRecord& c : page->candidates)
        keys.push_back(absl::StrCat(c.role_key_wire, "/", c.agent_id));
      if (page->next_page_token.empty()) break;
      EXPECT_EQ(static_cast<int>(page->candidates.size()), size);
      list.page_token = page->next_page_token;
    }
    return keys;
  };
  // The reference: each role's candidates in activator order, by wire.
  std::vector<std::string> wires;
  for (const RoleKeyRef& role : roles) wires.push_back(WireOf(role));
  std::sort(wires.begin(), wires.end());
  std::vector<std::string> expected, expected_project;
  for (const std::string& wire : wires) {
    absl::StatusOr<std::vector<CandidateRecord>> rows =
        store_->roles().ListCandidates(wire);
    ASSERT_TRUE(rows.ok());
    ASSERT_EQ(rows->size(), 25u);
    const bool in_project =
        store_->roles().GetRole(wire)->project_id == kProject;
    for (const CandidateRecord& c : *rows) {
      expected.push_back(absl::StrCat(wire, "/", c.agent_id));
      if (in_project) expected_project.push_back(expected.back());
    }
  }
  ProjectScope project;
  project.all = false;
  project.projects = {kProject};
  for (int size : {1, 7, 100}) {
    EXPECT_EQ(all(size, ProjectScope()), expected) << "page size " << size;
    EXPECT_EQ(all(size, project), expected_project) << "page size " << size;
  }
  // A page reads itself and the row that proves the next one.
  CandidateListInput list;
  list.page_size = 7;
  const int64_t before = store_->rows_read();
  ASSERT_TRUE(registry_->ListCandidates(list).ok());
  EXPECT_EQ(store_->rows_read() - before, 8);
  // One role: its candidates alone, in the same order.
  list.role = Lead(kOtherProject);
  list.page_size = 10;
  std::vector<std::string> one;
  for (int pages = 0; pages < 10; ++pages) {
    absl::StatusOr<CandidatePage> page = registry_->ListCandidates(list);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const CandidateRecord& c : page->candidates)
      one.push_back(absl::StrCat(c.role_key_wire, "/", c.agent_id));
    if (page->next_page_token.empty()) break;
    list.page_token = page->next_page_token;
  }
  std::vector<std::string> expected_one;
  for (const std::string& key : expected) {
    if (absl::StartsWith(key, WireOf(Lead(kOtherProject)) + "/"))
      expected_one.push_back(key);
  }
  EXPECT_EQ(one, expected_one);
}

TEST_F(RoleRegistryTest, ProbeFailuresBackOffThenQuarantineAndOkResets) {
  CandidateA(*registry_);
  ProbeReportInput probe = ProbeOfA("timeout");
  const int64_t now = UnixMillis(clock_.Now());
  absl::StatusOr<CandidateRecord> c = registry_->ReportProbe(probe);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->consecutive_probe_failures, 1);
  EXPECT_EQ(c->excluded_until_ms, now + 1'000);  // jitter 0.5 = none
  EXPECT_EQ(c->last_probe_code, "timeout");
  c = registry_->ReportProbe(probe);
  EXPECT_EQ(c->excluded_until_ms, now + 2'000);
  c = registry_->ReportProbe(probe);
  EXPECT_EQ(c->consecutive_probe_failures, 3);
  EXPECT_EQ(c->excluded_until_ms, now + 120'000);
  probe.code = "adapter_unavailable";
  c = registry_->ReportProbe(probe);
  EXPECT_EQ(c->consecutive_probe_failures, 3);
  probe.code = "ok";
  c = registry_->ReportProbe(probe);
  EXPECT_EQ(c->consecutive_probe_failures, 0);
  EXPECT_FALSE(c->excluded_until_ms.has_value());
  probe.agent_id = "agent-b";
  EXPECT_EQ(ReasonOf(registry_->ReportProbe(probe).status()),
            "CANDIDATE_NOT_FOUND");
  probe.code = "";
  EXPECT_EQ(ReasonOf(registry_->ReportProbe(probe).status()),
            "REQUEST_INVALID");
}

TEST_F(RoleRegistryTest, ANewCandidateReleasesAQuarantinedRole) {
  RoleRecord row = ReserveOk(Cto());
  CasInput q = CasFrom(row);
  q.patch.state = RoleState::kQuarantined;
  q.patch.retry_count = 4;
  ASSERT_TRUE(registry_->CompareAndSet(q).ok());
  CandidateUpsertInput up;
  up.role = Cto();
  up.agent_id = "agent-new";
  ASSERT_TRUE(registry_->UpsertCandidate(up).ok());
  absl::StatusOr<RoleRecord> after = registry_->Get(Cto());
  EXPECT_EQ(after->state, RoleState::kElectable);
  EXPECT_EQ(after->epoch, row.epoch + 1);
  EXPECT_EQ(after->retry_count, 0);
  EXPECT_EQ(after->last_reason, "candidate_registered");
  ASSERT_FALSE(Notes().empty());
  EXPECT_EQ(Notes().back().trigger, RoleTrigger::kCandidateRegistered);
  EXPECT_EQ(Notes().back().from, RoleState::kQuarantined);
  EXPECT_EQ(Notes().back().to, RoleState::kElectable);
}

TEST_F(RoleRegistryTest, NewLocatorsOfACandidateReleaseAQuarantinedRole) {
  CandidateUpsertInput up;
  up.role = Cto();
  up.agent_id = "agent-a";
  ASSERT_TRUE(registry_->UpsertCandidate(up).ok());
  RoleRecord row = *registry_->Get(Cto());
  CasInput q = CasFrom(row);
  q.patch.state = RoleState::kQuarantined;
  ASSERT_TRUE(registry_->CompareAndSet(q).ok());
  const int64_t expires = UnixMillis(clock_.Now()) + 50'000;
  up.patch.transport_locators_json = absl::StrCat(
      R"([{"schema_version":"tfx.transport-locator.v1",)",
      R"("transport_id":"trn_t","kind":"tmux","host_id":"hst_h",)",
      R"("capabilities":["probe","wake","activate"],"priority":1,)",
      R"("expires_at_ms":)", expires,
      R"(,"locator":{"session_name":"s","mux_server_id":"m"}}])");
  ASSERT_TRUE(registry_->UpsertCandidate(up).ok());
  absl::StatusOr<RoleRecord> after = registry_->Get(Cto());
  EXPECT_EQ(after->state, RoleState::kElectable);
  EXPECT_EQ(after->epoch, row.epoch + 1);
  EXPECT_EQ(after->last_reason, "locator_registered");
  ASSERT_FALSE(Notes().empty());
  EXPECT_EQ(Notes().back().trigger, RoleTrigger::kLocatorRegistered);
}

TEST_F(RoleRegistryTest, ATransitionWritesTheKernelsStateFencedAndPublished) {
  const RoleRecord row = ReserveOk(Cto(), "agent-a");
  ASSERT_EQ(row.state, RoleState::kElectedProbing);
  std::vector<int64_t> seen;
  absl::StatusOr<RoleWatchStart> start = registry_->Watch(
      RoleWatchFilter{},
      [&](const RoleEvent& e) { seen.push_back(e.role.version); });
  ASSERT_TRUE(start.ok());
  TransitionInput in;
  in.from = row;
  in.trigger = RoleTrigger::kActivationAcked;
  in.write = TransitionWrite::kCompareAndSet;
  in.patch.charter_acked_epoch = row.epoch;
  in.patch.update_mask = {"charter_acked_epoch"};
  absl::StatusOr<TransitionResult> done = registry_->Transition(in);
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_EQ(done->role.state, RoleState::kActive);
  EXPECT_EQ(done->role.charter_acked_epoch, row.epoch);
  EXPECT_EQ(done->role.version, row.version + 1);
  EXPECT_EQ(done->role.epoch, row.epoch);  // a compare-and-set
  EXPECT_EQ(done->transition.action, RoleAction::kRecordActivationAck);
  EXPECT_EQ(seen, std::vector<int64_t>{done->role.version});
  ASSERT_EQ(Notes().size(), 1u);
  EXPECT_EQ(Notes()[0].from, RoleState::kElectedProbing);
  EXPECT_EQ(Notes()[0].trigger, RoleTrigger::kActivationAcked);
  EXPECT_EQ(Notes()[0].to, RoleState::kActive);
  EXPECT_FALSE(Notes()[0].refused);
  EXPECT_EQ(Notes()[0].version, done->role.version);

  // The same `from` again: the fence refuses it, as any stale write.
  absl::Status stale = registry_->Transition(in).status();
  EXPECT_EQ(stale.code(), absl::StatusCode::kAborted);
  EXPECT_EQ(ReasonOf(stale), "STALE_VERSION");

  // A reservation fences the holder: epoch + 1.
  TransitionInput offline;
  offline.from = done->role;
  offline.trigger = RoleTrigger::kHolderOffline;
  offline.write = TransitionWrite::kReserve;
  offline.patch.update_mask = {"holder_agent_id", "activation_id"};
  absl::StatusOr<TransitionResult> revoked = registry_->Transition(offline);
  ASSERT_TRUE(revoked.ok()) << revoked.status();
  EXPECT_EQ(revoked->role.state, RoleState::kElectable);
  EXPECT_EQ(revoked->role.epoch, row.epoch + 1);
  EXPECT_FALSE(revoked->role.holder_agent_id.has_value());
  EXPECT_EQ(seen.size(), 2u);
}

TEST_F(RoleRegistryTest, APairTheTableRefusesWritesNothing) {
  const RoleRecord probing = ReserveOk(Cto(), "agent-a");
  TransitionInput ack;
  ack.from = probing;
  ack.trigger = RoleTrigger::kActivationAcked;
  ack.patch.charter_acked_epoch = probing.epoch;
  absl::StatusOr<TransitionResult> active = registry_->Transition(ack);
  ASSERT_TRUE(active.ok()) << active.status();
  int published = 0;
  absl::StatusOr<RoleWatchStart> start = registry_->Watch(
      RoleWatchFilter{}, [&](const RoleEvent&) { ++published; });
  ASSERT_TRUE(start.ok());

  // active + probe_succeeded is no row of §5.2; stale_ack's row only
  // rejects an ACK and scope_closed's removes the role (CloseScope), so
  // neither can be written here.
  for (RoleTrigger trigger :
       {RoleTrigger::kProbeSucceeded, RoleTrigger::kRetryDue,
        RoleTrigger::kStaleAck, RoleTrigger::kScopeClosed}) {
    SCOPED_TRACE(RoleTriggerName(trigger));
    TransitionInput in;
    in.from = active->role;
    in.trigger = trigger;
    in.write = TransitionWrite::kReserve;
    in.patch.last_reason = "should_not_be_written";
    absl::Status refused = registry_->Transition(in).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(ReasonOf(refused), "INVALID_ROLE_TRANSITION");
    const std::map<std::string, std::string> meta = MetadataOf(refused);
    EXPECT_EQ(meta.at("state"), "active");
    EXPECT_EQ(meta.at("trigger"), RoleTriggerName(trigger));
    EXPECT_EQ(meta.at("role_key_wire"), active->role.role_key_wire);
    EXPECT_EQ(meta.at("version"), absl::StrCat(active->role.version));
    ASSERT_FALSE(Notes().empty());
    EXPECT_TRUE(Notes().back().refused);
    EXPECT_EQ(Notes().back().trigger, trigger);
    EXPECT_EQ(Notes().back().from, RoleState::kActive);
  }
  absl::StatusOr<RoleRecord> after = registry_->Get(Cto());
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->version, active->role.version);
  EXPECT_EQ(after->epoch, active->role.epoch);
  EXPECT_EQ(after->state, RoleState::kActive);
  EXPECT_EQ(after->last_reason, active->role.last_reason);
  EXPECT_EQ(published, 0);

  // The state is the kernel's to decide.
  TransitionInput with_state;
  with_state.from = active->role;
  with_state.trigger = RoleTrigger::kHolderOffline;
  with_state.patch.state = RoleState::kElectable;
  absl::Status bad = registry_->Transition(with_state).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(bad), "REQUEST_INVALID");
  EXPECT_EQ(registry_->Get(Cto())->version, active->role.version);
}

TEST_F(RoleRegistryTest, ClosingAScopeReportsTheKernelsScopeClosedRow) {
  const RoleRecord lead = ReserveOk(Lead(), "agent-a");
  ScopeCloseInput close;
  close.role = Lead();
  close.closed_by = "ops";
  ASSERT_TRUE(registry_->CloseScope(close).ok());
  ASSERT_EQ(Notes().size(), 1u);
  EXPECT_EQ(Notes()[0].trigger, RoleTrigger::kScopeClosed);
  EXPECT_EQ(Notes()[0].from, RoleState::kElectedProbing);
  EXPECT_FALSE(Notes()[0].to.has_value());
  EXPECT_FALSE(Notes()[0].refused);
  EXPECT_EQ(Notes()[0].version, lead.version);
}

TEST_F(RoleRegistryTest, ProbeExclusionFollowsTheConfiguredPolicyWithJitter) {
  double u = 1.0;  // the largest jitter: +20 %
  RoleRegistryOptions options;
  options.random_unit = [&u] { return u; };
  options.policy.backoff_base = absl::Milliseconds(500);
  options.policy.backoff_factor = 3.0;
  options.policy.backoff_max = absl::Seconds(4);
  options.policy.max_probe_failures = 4;
  options.policy.candidate_quarantine = absl::Minutes(1);
  RoleRegistry registry(&store_->roles(), &clock_, options);
  CandidateA(registry);
  ProbeReportInput probe = ProbeOfA("transport_error");
  probe.probed_at_ms = UnixMillis(clock_.Now());
  const int64_t at = *probe.probed_at_ms;
  // 500 ms, 1.5 s, 4.5 s capped at 4 s, each +20 %; then the quarantine.
  EXPECT_EQ(registry.ReportProbe(probe)->excluded_until_ms, at + 600);
  EXPECT_EQ(registry.ReportProbe(probe)->excluded_until_ms, at + 1'800);
  EXPECT_EQ(registry.ReportProbe(probe)->excluded_until_ms, at + 4'800);
  EXPECT_EQ(registry.ReportProbe(probe)->excluded_until_ms, at + 60'000);
  probe.code = "ok";
  ASSERT_TRUE(registry.ReportProbe(probe).ok());
  u = 0.0;  // the smallest: -20 %
  probe.code = "timeout";
  EXPECT_EQ(registry.ReportProbe(probe)->excluded_until_ms, at + 400);
}

TEST_F(RoleRegistryTest, TheDefaultPolicyIsTrifluxs) {
  double u = 0.0;
  RoleRegistryOptions options;
  options.random_unit = [&u] { return u; };
  RoleRegistry registry(&store_->roles(), &clock_, options);
  CandidateA(registry);
  ProbeReportInput probe = ProbeOfA("timeout");
  probe.probed_at_ms = UnixMillis(clock_.Now());
  const int64_t at = *probe.probed_at_ms;
  EXPECT_EQ(registry.ReportProbe(probe)->excluded_until_ms, at + 800);
  u = 1.0;
  EXPECT_EQ(registry.ReportProbe(probe)->excluded_until_ms, at + 2'400);
  EXPECT_EQ(registry.ReportProbe(probe)->excluded_until_ms, at + 120'000);
}

TEST_F(RoleRegistryTest, AFailuresExclusionFollowsTheCountTheReportCommits) {
  CandidateA(*registry_);
  ProbeReportInput probe = ProbeOfA("timeout");
  probe.probed_at_ms = UnixMillis(clock_.Now());
  const int64_t at = *probe.probed_at_ms;
  // An overridden count is the count the exclusion follows (1 s, 2 s, then
  // the quarantine from the third failure)...
  probe.consecutive_probe_failures = 2;
  absl::StatusOr<CandidateRecord> c = registry_->ReportProbe(probe);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->consecutive_probe_failures, 2);
  EXPECT_EQ(c->excluded_until_ms, at + 2'000);
  // ... and a failure reported with a count of 0 still excludes as one.
  probe.consecutive_probe_failures = 0;
  c = registry_->ReportProbe(probe);
  EXPECT_EQ(c->consecutive_probe_failures, 0);
  EXPECT_EQ(c->excluded_until_ms, at + 1'000);
  probe.consecutive_probe_failures.reset();
  c = registry_->ReportProbe(probe);
  EXPECT_EQ(c->consecutive_probe_failures, 1);
  EXPECT_EQ(c->excluded_until_ms, at + 1'000);
  // An explicit exclusion end wins over the derived one.
  probe.excluded_until_ms = at + 5;
  c = registry_->ReportProbe(probe);
  EXPECT_EQ(c->consecutive_probe_failures, 2);
  EXPECT_EQ(c->excluded_until_ms, at + 5);
}

TEST_F(RoleRegistryTest,
       ConcurrentFailureReportsEachDeriveTheExclusionFromTheirOwnCount) {
  // Every failure count has its own exclusion (1 ms * 2^(n-1), no jitter, no
  // quarantine within n <= 16), so a report that derived its exclusion from
  // another report's count would show up.
  constexpr int kReports = 16;
  RoleRegistryOptions options;
  options.random_unit = [] { return 0.5; };
  options.policy.backoff_base = absl::Milliseconds(1);
  options.policy.backoff_factor = 2.0;
  options.policy.backoff_max = absl::Hours(1);
  options.policy.max_probe_failures = kReports + 1;
  RoleRegistry registry(&store_->roles(), &clock_, options);
  CandidateA(registry);
  ProbeReportInput probe = ProbeOfA("timeout");
  probe.probed_at_ms = UnixMillis(clock_.Now());
  const int64_t at = *probe.probed_at_ms;
  auto exclusion = [at](int64_t failures) {
    return at + (int64_t{1} << (failures - 1));
  };

  absl::Mutex mu;
  std::vector<CandidateRecord> rows;
  std::vector<std::thread> threads;
  std::atomic<bool> go{false};
  for (int t = 0; t < kReports; ++t) {
    threads.emplace_back([&] {
      while (!go.load()) std::this_thread::yield();
      absl::StatusOr<CandidateRecord> row = registry.ReportProbe(probe);
      ASSERT_TRUE(row.ok()) << row.status();
      absl::MutexLock lock(&mu);
      rows.push_back(*row);
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();

  // Each report committed its own count, and its exclusion is that count's.
  ASSERT_EQ(rows.size(), static_cast<size_t>(kReports));
  std::vector<bool> seen(kReports + 1, false);
  for (const CandidateRecord& row : rows) {
    const int64_t n = row.consecutive_probe_failures;
    ASSERT_GE(n, 1);
    ASSERT_LE(n, kReports);
    EXPECT_FALSE(seen[n]) << "two reports committed count " << n;
    seen[n] = true;
    EXPECT_EQ(row.excluded_until_ms, exclusion(n)) << "count " << n;
  }
  CandidateListInput list;
  list.role = Cto();
  absl::StatusOr<CandidatePage> page = registry.ListCandidates(list);
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->candidates.size(), 1u);
  EXPECT_EQ(page->candidates[0].consecutive_probe_failures, kReports);
  EXPECT_EQ(page->candidates[0].excluded_until_ms, exclusion(kReports));
}

}  // namespace
}  // namespace hub
