// Plans PostgresStore relies on, pinned against a real server the test
// starts itself: statements whose speed depends on the index the planner
// picks, checked with the statistics that misled it (a busy agent the last
// ANALYZE never saw), both as a generic plan and as a custom one; and the
// writer's generic plans (plan_cache_mode = force_generic_plan): each
// statement planned once per session, none reading a whole large table.
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "storage/pg/pg_job_rows.h"
#include "storage/pg/pg_message_sql.h"
#include "storage/pg/pg_role_rows.h"
#include "storage/pg/pg_schema.h"
#include "storage/pg/pg_store.h"
#include "storage/pg/pg_test_database.h"
#include "storage/test_util.h"

namespace hub::storage::pg {
namespace {

class PgPlansTest : public testing::PgDatabaseTest {
 protected:
  // A server that counts every statement's plannings (pg_stat_statements).
  static void SetUpTestSuite() {
    testing::PgTestOptions options;
    options.settings = {"shared_preload_libraries=pg_stat_statements",
                        "pg_stat_statements.track_planning=on"};
    absl::StatusOr<std::unique_ptr<testing::PgTestServer>> created =
        testing::PgTestServer::Create(options);
    ASSERT_TRUE(created.ok()) << created.status();
    server_ = created->release();
  }

  void SetUp() override {
    testing::PgDatabaseTest::SetUp();
    conn_ = Connect();
    ASSERT_NE(conn_, nullptr);
    ASSERT_TRUE(MigratePostgres(*conn_).ok());
  }

  void Sql(const std::string& sql) {
    absl::StatusOr<Result> r = conn_->Exec(sql);
    ASSERT_TRUE(r.ok()) << r.status() << "\n" << sql;
  }

  // `count` messages to `agent`, delivered, the first `acked` of them acked.
  void Inbox(const std::string& agent, int count, int acked) {
    Sql(absl::StrCat(
        "INSERT INTO messages (id, type, from_agent, to_agent, topic, "
        "priority, ttl_ms, created_at_ms, expires_at_ms, correlation_id, "
        "trace_id, payload_json, status) "
        "SELECT '",
        agent, "-' || g, 'event', 'sender', '", agent,
        "', 't', 5, 600000, g, 9000000000000, 'c' || g, 'tr', '{}', "
        "CASE WHEN g <= ",
        acked, " THEN 'acked' ELSE 'delivered' END FROM generate_series(1, ",
        count, ") g"));
    Sql(absl::StrCat(
        "INSERT INTO message_inbox (message_id, agent_id, delivered_at_ms, "
        "acked_at_ms, attempts) SELECT '",
        agent, "-' || g, '", agent, "', g, CASE WHEN g <= ", acked,
        " THEN g END, 1 FROM generate_series(1, ", count, ") g"));
  }

  // The plan of `sql` (prepared with `types`) executed with `args`, as JSON.
  std::string Plan(const std::string& mode, const std::string& sql,
                   const std::string& types, const std::string& args) {
    Sql("DEALLOCATE ALL");
    Sql(absl::StrCat("SET plan_cache_mode = ", mode));
    Sql(absl::StrCat("PREPARE s(", types, ") AS ", sql));
    absl::StatusOr<Result> r = conn_->Exec(
        absl::StrCat("EXPLAIN (FORMAT JSON) EXECUTE s(", args, ")"));
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? std::string(r->Text(0, 0)) : std::string();
  }

  std::unique_ptr<Connection> conn_;
};

TEST_F(PgPlansTest, AnAckFindsItsRowsByMessageIdNotByWalkingTheAgentsInbox) {
  // The statistics know another agent only; then a new agent gets 3,000
  // messages, 2,000 of them still unacked.
  Inbox("seen", 200, 100);
  Sql("ANALYZE");
  Inbox("busy", 3000, 1000);
  for (const std::string mode : {"force_generic_plan", "force_custom_plan"}) {
    const std::string plan =
        Plan(mode, sql::kAckRowsSql, "text[], text, bigint",
             "'{busy-2999}', 'busy', 1");
    EXPECT_NE(plan.find("message_inbox_message_id_agent_id_key"),
              std::string::npos)
        << mode << "\n"
        << plan;
    EXPECT_EQ(plan.find("idx_inbox_agent"), std::string::npos) << mode << "\n"
                                                               << plan;
  }
}

TEST_F(PgPlansTest, TheAgentIndexHoldsOnlyUnackedRows) {
  Inbox("busy", 300, 200);
  absl::StatusOr<Result> r = conn_->Exec(
      "SELECT indexdef FROM pg_indexes WHERE tablename = 'message_inbox' "
      "AND indexname LIKE 'idx_inbox_agent%'");
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->rows(), 1);
  EXPECT_NE(r->Text(0, 0).find("WHERE (acked_at_ms IS NULL)"),
            std::string::npos)
      << r->Text(0, 0);
  // The pending page reads it: an agent's pending messages are read without
  // touching its acked rows.
  const std::string plan =
      Plan("force_generic_plan",
           "SELECT i.message_id FROM message_inbox i WHERE i.agent_id = $1 "
           "AND i.acked_at_ms IS NULL",
           "text", "'busy'");
  EXPECT_NE(plan.find("idx_inbox_agent_unacked"), std::string::npos) << plan;
}

// Both statements a CAS may start with: the one-statement UPDATE, and the
// row read of a CAS that PlanCas decides first.
TEST_F(PgPlansTest, ACasTakesItsScopesLockEvenWhenTheRoleHasNoRow) {
  std::unique_ptr<Connection> other = Connect();
  ASSERT_NE(other, nullptr);
  const std::string key = "hashtextextended('hub.scope-wire:rk.none', 0)";
  RoleCas cas;
  cas.role_key_wire = "rk.none";
  cas.expected_version = 0;
  cas.expected_epoch = 0;
  cas.expected_activation_seq = std::optional<int64_t>(0);
  cas.expected_activation_id = std::optional<std::string>();
  cas.patch.state = RoleState::kActive;
  for (const std::string mode : {"force_generic_plan", "force_custom_plan"}) {
    for (bool update : {true, false}) {
      SCOPED_TRACE(update ? "CasIfFence" : "LockScopeAndLoad");
      Sql(absl::StrCat("SET plan_cache_mode = ", mode));
      Sql("BEGIN");
      PgRoleRows rows(*conn_);
      absl::StatusOr<std::optional<RoleRecord>> role =
          update ? rows.CasIfFence(cas) : rows.LockScopeAndLoad("rk.none");
      ASSERT_TRUE(role.ok()) << mode << ": " << role.status();
      EXPECT_FALSE(role->has_value());
      // A close (the exclusive lock) has to wait for this transaction.
      absl::StatusOr<Result> tried =
          other->Exec(absl::StrCat("SELECT pg_try_advisory_lock(", key, ")"));
      ASSERT_TRUE(tried.ok()) << tried.status();
      EXPECT_EQ(tried->Text(0, 0), "f") << mode;
      Sql("COMMIT");
      tried = other->Exec(absl::StrCat("SELECT pg_try_advisory_lock(", key,
                                       "), "
                                       "pg_advisory_unlock(",
                                       key, ")"));
      ASSERT_TRUE(tried.ok()) << tried.status();
      EXPECT_EQ(tried->Text(0, 0), "t") << mode;
    }
  }
}

// The job queues' reads go through their partial indexes, with statistics
// that saw only ended jobs (a project that has just queued 3,000 jobs, a
// worker that has just taken 500): a claim reads its project's queued jobs
// in claim order and stops at the limit, a gone worker's attempts and the
// deadline sweep read only live attempts.
TEST_F(PgPlansTest, JobQueuesAreReadThroughTheirPartialIndexes) {
  constexpr char kJob[] =
      "INSERT INTO assign_jobs (job_id, project_id, supervisor_agent, "
      "worker_agent, worker_kind, status, hub_state, priority, created_at_ms, "
      "updated_at_ms, attempt_worker, attempt_generation, deadline_ms) ";
  Sql(absl::StrCat(kJob,
                   "SELECT 'old-' || g, 'p' || (g % 20), 'sup', 'a' || g, "
                   "'agent', 'succeeded', 'succeeded', 5, g, g, 'a' || g, 1, "
                   "NULL FROM generate_series(1, 20000) g"));
  Sql("ANALYZE");
  Sql(absl::StrCat(kJob,
                   "SELECT 'q-' || g, 'busy', 'sup', 'w', 'pool', 'queued', "
                   "'queued', g % 9 + 1, g, g, NULL, NULL, NULL "
                   "FROM generate_series(1, 3000) g"));
  Sql(absl::StrCat(kJob,
                   "SELECT 'r-' || g, 'busy', 'sup', 'w', 'agent', 'running', "
                   "'running', 5, g, g, 'w', 7, 1000 + g "
                   "FROM generate_series(1, 500) g"));
  const struct {
    const char* name;
    const char* sql;
    const char* types;
    const char* args;
    const char* index;
  } kReads[] = {
      {"Claimable", sql::kClaimableJobsSql,
       "text, bigint, text, text, text[], bigint",
       "'busy', 5000, '', 'w', '{rk.x}', 8", "idx_hub_jobs_queued"},
      {"AttemptsOf", sql::kJobAttemptsOfSql, "text, bigint", "'w', 7",
       "idx_hub_jobs_attempt_worker"},
      {"DueDeadlines", sql::kDueJobDeadlinesSql, "bigint, bigint", "1100, 100",
       "idx_hub_jobs_live_deadline"},
  };
  for (const auto& read : kReads) {
    for (const std::string mode : {"force_generic_plan", "force_custom_plan"}) {
      const std::string plan = Plan(mode, read.sql, read.types, read.args);
      EXPECT_NE(plan.find(read.index), std::string::npos)
          << read.name << " " << mode << "\n"
          << plan;
      EXPECT_EQ(plan.find("Seq Scan"), std::string::npos)
          << read.name << " " << mode << "\n"
          << plan;
    }
  }
}

// The writer's statements on tables its statistics know as large: 20,000
// agents, 20,000 messages in one inbox (100 of them pending, as in a hub
// whose agents keep up: the partial indexes of pending rows are small and
// the planner knows it), 5,000 roles (and their changes),
// candidates and reservations, 20,000 reservation changes and group commit
// ids. (The reservation sweep's read, not a write, reads every reservation:
// which have ended is a question about all of them.)
class PgWriterPlansTest : public PgPlansTest {
 protected:
  static constexpr int64_t kNow = 1'700'000'000'000;
  static constexpr int kRounds = 40;
  static constexpr int64_t kHour = 3'600'000;
  static constexpr int kPending = 100;

  void SetUp() override {
    PgPlansTest::SetUp();
    if (HasFatalFailure()) return;
    Sql("CREATE EXTENSION pg_stat_statements");
    Sql(absl::StrCat(
        "INSERT INTO agents (agent_id, cli, last_seen_ms, lease_expires_ms, "
        "status, presence_generation) SELECT 'a' || g, 'claude', ",
        kNow, ", ", kNow + kHour,
        ", 'online', 1 FROM generate_series(1, 20000) g"));
    Inbox("a1", 20000, 20000 - kPending);
    Sql(absl::StrCat(
        "INSERT INTO role_registry (role_key_wire, project_id, role_kind, "
        "state, last_transition_ms, last_reason) SELECT 'rk.' || g, 'p' || "
        "g, 'cto', 'electable', ",
        kNow, ", 'seed' FROM generate_series(1, 5000) g"));
    Sql(absl::StrCat(
        "INSERT INTO role_candidates (role_key_wire, agent_id, source, "
        "updated_at_ms) SELECT 'rk.' || g, 'a' || g, 'grant', ",
        kNow, " FROM generate_series(1, 5000) g"));
    Sql(absl::StrCat(
        "INSERT INTO hub_reservations (reservation_id, project_id, agent_id, "
        "presence_generation, exclusive, token, reason, created_at_ms, "
        "expires_at_ms) SELECT 'r' || g, 'prj', 'a' || g, 1, 1, g, 'seed', ",
        kNow, ", ", kNow + kHour, " FROM generate_series(1, 5000) g"));
    Sql("INSERT INTO hub_reservation_patterns (reservation_id, ordinal, "
        "project_id, pattern, prefix) SELECT 'r' || g, 0, 'prj', "
        "'src/f' || g || '.cc', 'src/f' || g || '.cc' "
        "FROM generate_series(1, 5000) g");
    Sql("INSERT INTO hub_reservation_tokens (project_id, last_token, held) "
        "VALUES ('prj', 5000, 5000)");
    // A change log of 20,000 changes (seq given here: the trigger that
    // numbers them at commit is for one transaction's few).
    Sql("ALTER TABLE hub_reservation_changes DISABLE TRIGGER USER");
    Sql(absl::StrCat(
        "INSERT INTO hub_reservation_changes (seq, kind, written_at_ms, "
        "reservation_id, project_id, agent_id, presence_generation, "
        "exclusive, token, reason, created_at_ms, expires_at_ms, patterns) "
        "SELECT g, 'granted', ",
        kNow, ", 'r' || g, 'prj', 'a' || g, 1, 1, g, 'seed', ", kNow, ", ",
        kNow + kHour,
        ", 'src/f' || g || '.cc' FROM generate_series(1, 20000) g"));
    Sql("ALTER TABLE hub_reservation_changes ENABLE TRIGGER USER");
    Sql("INSERT INTO hub_reservation_change_counter (id, seq) "
        "VALUES (true, 20000) ON CONFLICT (id) DO UPDATE SET seq = 20000");
    // 20,000 ended jobs of the project the workload's jobs go to, a
    // dependency and a late result each.
    Sql(absl::StrCat(
        "INSERT INTO assign_jobs (job_id, project_id, supervisor_agent, "
        "worker_agent, status, hub_state, attempt, attempt_worker, "
        "attempt_generation, created_at_ms, updated_at_ms, completed_at_ms) "
        "SELECT 'old-' || g, 'prj', 'sup', 'a' || g, 'succeeded', "
        "'succeeded', 2, 'a' || g, 1, ",
        kNow - kHour, " + g, ", kNow - kHour, " + g, ", kNow - kHour,
        " + g FROM generate_series(1, 20000) g"));
    Sql("INSERT INTO hub_job_dependencies (job_id, parent_id) SELECT "
        "'old-' || g, 'old-' || (g - 1) FROM generate_series(2, 20000) g");
    Sql(
        absl::StrCat("INSERT INTO hub_job_late_results (job_id, attempt, "
                     "agent_id, result_json, reported_at_ms) SELECT 'old-' "
                     "|| g, 1, 'a' || g, '{}', ",
                     kNow - kHour, " FROM generate_series(1, 20000) g"));
    // Group commits' ids, one a second over the last hours.
    Sql("INSERT INTO hub_commits (id, begun_at) SELECT gen_random_uuid(), "
        "now() - interval '1 second' * g FROM generate_series(1, 20000) g");
    Sql("ANALYZE");
    conn_.reset();  // its statistics are flushed as it leaves
    monitor_ = Connect();
    ASSERT_NE(monitor_, nullptr);
  }

  std::unique_ptr<PostgresStore> OpenStore() {
    PostgresStoreOptions options;
    options.conninfo = server_->ConnInfo(database_);
    // No prune of hub_commits (whose 20,000 rows here are all older than it
    // keeps) within the workload, which with the jobs' writes makes more
    // groups than prune_every's default: the workload is about the
    // statements of every write, as before.
    options.commits.prune_every = 1 << 20;
    absl::StatusOr<std::unique_ptr<PostgresStore>> store =
        PostgresStore::Open(std::move(options));
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }

  // Waits until no client but the monitor is connected to this database:
  // a backend flushes its table statistics before it leaves.
  void AwaitNoOtherClients() {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (true) {
      absl::StatusOr<Result> r = monitor_->Exec(
          "SELECT count(*) FROM pg_stat_activity WHERE datname = "
          "current_database() AND backend_type = 'client backend' "
          "AND pid <> pg_backend_pid()");
      ASSERT_TRUE(r.ok()) << r.status();
      if (r->Text(0, 0) == "0") return;
      ASSERT_LT(absl::Now(), deadline) << r->Text(0, 0) << " still connected";
      absl::SleepFor(absl::Milliseconds(10));
    }
  }

  // A statistics view's counter by name (`sql` reads the two columns).
  std::map<std::string, int64_t> Counters(const std::string& sql) {
    absl::StatusOr<Result> r = monitor_->Exec(sql);
    EXPECT_TRUE(r.ok()) << r.status();
    std::map<std::string, int64_t> counters;
    if (!r.ok()) return counters;
    for (int i = 0; i < r->rows(); ++i) {
      counters[std::string(r->Text(i, 0))] =
          std::stoll(std::string(r->Text(i, 1)));
    }
    return counters;
  }

  // How much each of Counters(sql) grew while a store ran `work` (default:
  // Work), read once its backends had left (each flushes its statistics as
  // it leaves).
  std::map<std::string, int64_t> GrowthOverWork(
      const std::string& sql,
      const std::function<void(PostgresStore&)>& work = nullptr) {
    std::map<std::string, int64_t> growth;
    AwaitNoOtherClients();
    if (HasFatalFailure()) return growth;
    const std::map<std::string, int64_t> before = Counters(sql);
    std::unique_ptr<PostgresStore> store = OpenStore();
    EXPECT_NE(store, nullptr);
    if (store == nullptr) return growth;
    if (work) {
      work(*store);
    } else {
      Work(*store);
    }
    if (HasFatalFailure()) return growth;
    store.reset();
    AwaitNoOtherClients();
    if (HasFatalFailure()) return growth;
    for (const auto& [name, count] : Counters(sql)) {
      const auto was = before.find(name);
      growth[name] = count - (was == before.end() ? 0 : was->second);
    }
    return growth;
  }

  // The store's writes of a working hub, kRounds times each.
  void Work(PostgresStore& store) {
    for (int i = 0; i < kRounds; ++i) {
      const int64_t now = kNow + i;
      const std::string agent = absl::StrCat("a", 100 + i);
      AgentRegistration reg;
      reg.agent_id = absl::StrCat("new", i);
      reg.cli = "codex";
      reg.now_ms = now;
      ASSERT_TRUE(store.agents().RegisterAgent(reg).ok());
      reg.agent_id = agent;  // an agent the table had
      absl::StatusOr<AgentRecord> registered =
          store.agents().RegisterAgent(reg);
      ASSERT_TRUE(registered.ok()) << registered.status();
      const int64_t generation = registered->presence_generation;
      ASSERT_TRUE(store.agents()
                      .RefreshLeaseForGeneration(agent, generation, now, 30'000)
                      .ok());
      ASSERT_TRUE(store.agents()
                      .CheckpointLeases(
                          {{agent, generation, now, now + 30'000, 30'000}})
                      .ok());
      ASSERT_TRUE(store.agents()
                      .SetAgentStatusForGeneration(reg.agent_id, generation,
                                                   AgentStatus::kOnline)
                      .ok());
      ASSERT_TRUE(store.agents().SweepAgentPresence(now, 300'000).ok());

      RoleReservation reserve;
      reserve.role_key_wire = absl::StrCat("rk.", 1 + i);
      reserve.project_id = absl::StrCat("p", 1 + i);
      reserve.role_kind = "cto";
      reserve.patch.holder_agent_id = agent;
      reserve.now_ms = now;
      absl::StatusOr<RoleWrite> reserved = store.roles().ReserveRole(reserve);
      ASSERT_TRUE(reserved.ok()) << reserved.status();
      ASSERT_TRUE(reserved->role.has_value());
      RoleCas cas;
      cas.role_key_wire = reserve.role_key_wire;
      cas.expected_version = reserved->role->version;
      cas.expected_epoch = reserved->role->epoch;
      cas.expected_activation_seq =
          std::optional<int64_t>(reserved->role->activation_seq);
      cas.expected_activation_id = reserved->role->activation_id;
      cas.patch.state = RoleState::kActive;
      cas.now_ms = now;
      absl::StatusOr<RoleWrite> set = store.roles().CompareAndSetRole(cas);
      ASSERT_TRUE(set.ok()) << set.status();
      EXPECT_EQ(set->outcome, RoleOutcome::kApplied);
      CandidateUpsert candidate;
      candidate.role_key_wire = reserve.role_key_wire;
      candidate.agent_id = agent;
      candidate.source = "standup";
      candidate.now_ms = now;
      ASSERT_TRUE(store.roles().UpsertCandidate(candidate).ok());

      // A publish to the busy inbox, delivered and acked; one dead-lettered;
      // the expiry sweep.
      const std::string id = absl::StrCat("m", i);
      absl::StatusOr<std::vector<InboxRecord>> published =
          store.messages().InsertMessageDelivering(
              storage::testing::TestMessage(id, 5, now), {"a1"}, {"a1"}, now,
              100'000);
      ASSERT_TRUE(published.ok()) << published.status();
      ASSERT_TRUE(store.messages().MarkDeliveredIfUnacked(id, "a1", now).ok());
      absl::StatusOr<std::vector<bool>> acked = store.messages().AckMessages(
          "a1", {id, absl::StrCat("a1-", 20000 - i)}, now, std::nullopt);
      ASSERT_TRUE(acked.ok()) << acked.status();
      EXPECT_EQ(*acked, std::vector<bool>({true, true}));
      const std::string dead = absl::StrCat("d", i);
      ASSERT_TRUE(store.messages()
                      .InsertMessageDelivering(
                          storage::testing::TestMessage(dead, 5, now), {"a1"},
                          {}, now, 100'000)
                      .ok());
      ASSERT_TRUE(store.messages()
                      .DeadLetterMessage(dead, "test", now, std::nullopt)
                      .ok());
      DeadLetterRedrive redrive;
      redrive.message_id = dead;
      redrive.now_ms = now;
      redrive.max_pending_per_inbox = 100'000;
      ASSERT_TRUE(store.messages().RedriveDeadLetter(redrive).ok());
      ASSERT_TRUE(store.messages().SweepExpiredMessages(now).ok());
      ASSERT_TRUE(store.roles().PruneRoleChanges(kHour, 100).ok());

      ReservationRequest request;
      request.reservation_id = absl::StrCat("new-r", i);
      request.project_id = "prj";
      request.agent_id = agent;
      request.patterns = {absl::StrCat("lib/g", i, ".cc")};
      request.reason = "editing";
      request.now_ms = now;
      request.ttl_ms = 60'000;
      absl::StatusOr<ReservationOutcome> granted =
          store.reservations().Reserve(request);
      ASSERT_TRUE(granted.ok()) << granted.status();
      ASSERT_TRUE(granted->granted.has_value());
      ASSERT_TRUE(store.reservations()
                      .RenewReservation({request.reservation_id, agent,
                                         granted->granted->token, now, 60'000})
                      .ok());
      ReservationRelease release;
      release.reservation_id = request.reservation_id;
      release.agent_id = agent;
      release.token = granted->granted->token;
      release.now_ms = now;
      ASSERT_TRUE(store.reservations().ReleaseReservation(release).ok());
      ASSERT_TRUE(store.reservations()
                      .ReleaseAgentReservations(agent, generation, now)
                      .ok());
      ASSERT_TRUE(
          store.reservations().PruneReservationChanges(kNow - kHour, 100).ok());

      WorkOnJobs(store, agent, generation, now, i);
    }
  }

  // A job that waits on one that succeeded, claimed as the next one
  // claimable, heartbeated, completed late by a stale attempt and then by
  // its own; one whose worker goes; one cancelled while queued and retried.
  // (Not the deadline sweep: JobCalls reads whether anything is due on a
  // reader connection first, whose plans are not the writer's.)
  void WorkOnJobs(PostgresStore& store, const std::string& agent,
                  int64_t generation, int64_t now, int round) {
    JobRecord job;
    job.job_id = absl::StrCat("job-", round);
    job.project_id = "prj";
    job.supervisor_agent = "sup";
    job.worker_agent = agent;
    job.depends_on = {absl::StrCat("old-", 1 + round)};
    job.idempotency_key = absl::StrCat("key-", round);
    job.created_at_ms = job.updated_at_ms = now;
    absl::StatusOr<JobOutcome> created = store.jobs().CreateJob(job);
    ASSERT_TRUE(created.ok()) << created.status();
    ASSERT_EQ(created->refusal, JobRefusal::kNone);
    ASSERT_EQ(created->job->state, JobState::kQueued);
    JobClaim claim;
    claim.agent_id = agent;
    claim.presence_generation = generation;
    claim.project_id = "prj";
    claim.now_ms = now;
    absl::StatusOr<JobOutcome> claimed = store.jobs().ClaimJob(claim);
    ASSERT_TRUE(claimed.ok()) << claimed.status();
    ASSERT_EQ(claimed->refusal, JobRefusal::kNone);
    ASSERT_TRUE(claimed->job.has_value());
    ASSERT_EQ(claimed->job->job_id, job.job_id);
    JobAttemptFence fence;
    fence.job_id = job.job_id;
    fence.attempt = claimed->job->attempt;
    fence.agent_id = agent;
    fence.presence_generation = generation;
    ASSERT_TRUE(store.jobs().HeartbeatJob(fence, "{}", now).ok());
    JobAttemptFence stale = fence;
    stale.attempt = fence.attempt + 1;
    absl::StatusOr<JobOutcome> late =
        store.jobs().CompleteJob(stale, "{}", now);
    ASSERT_TRUE(late.ok()) << late.status();
    EXPECT_EQ(late->refusal, JobRefusal::kAttemptMismatch);
    absl::StatusOr<JobOutcome> done =
        store.jobs().CompleteJob(fence, "{}", now);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_EQ(done->refusal, JobRefusal::kNone);

    job.job_id = absl::StrCat("gone-", round);
    job.depends_on.clear();
    job.idempotency_key.reset();
    ASSERT_TRUE(store.jobs().CreateJob(job).ok());
    claim.job_id = job.job_id;
    claimed = store.jobs().ClaimJob(claim);
    ASSERT_TRUE(claimed.ok()) << claimed.status();
    EXPECT_EQ(claimed->refusal, JobRefusal::kNone);
    absl::StatusOr<std::vector<JobRecord>> ended =
        store.jobs().EndAttemptsOf(agent, generation, now);
    ASSERT_TRUE(ended.ok()) << ended.status();
    EXPECT_EQ(ended->size(), 1u);

    job.job_id = absl::StrCat("cancelled-", round);
    ASSERT_TRUE(store.jobs().CreateJob(job).ok());
    ASSERT_TRUE(store.jobs().CancelJob(job.job_id, "not needed", now).ok());
    ASSERT_TRUE(store.jobs().RetryJob(job.job_id, now).ok());
  }

  std::unique_ptr<Connection> monitor_;
};

TEST_F(PgWriterPlansTest, TheWriterPlansEachOfItsStatementsOnce) {
  std::unique_ptr<PostgresStore> store = OpenStore();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(monitor_->Exec("SELECT pg_stat_statements_reset()").ok());
  Work(*store);
  if (HasFatalFailure()) return;
  // Statements the workload ran at least once per round: planned at most
  // a few times (an autovacuum's ANALYZE may invalidate a plan), not once
  // per call. Only this test's database; the monitor's reads are planned
  // per call and run far fewer times.
  absl::StatusOr<Result> r = monitor_->Exec(
      "SELECT calls, plans, query FROM pg_stat_statements s JOIN "
      "pg_database d ON d.oid = s.dbid WHERE d.datname = current_database() "
      "ORDER BY query");
  ASSERT_TRUE(r.ok()) << r.status();
  int checked = 0;
  for (int i = 0; i < r->rows(); ++i) {
    const int64_t calls = std::stoll(std::string(r->Text(i, 0)));
    const int64_t plans = std::stoll(std::string(r->Text(i, 1)));
    if (calls < kRounds) continue;
    ++checked;
    EXPECT_LE(plans, 3) << calls << " calls: " << r->Text(i, 2);
  }
  // Registrations, leases, roles, candidates, publishes, acks, dead letters,
  // sweeps and reservations: dozens of distinct statements.
  EXPECT_GE(checked, 15);
}

TEST_F(PgWriterPlansTest, NoWriteReadsAWholeLargeTable) {
  const std::map<std::string, int64_t> scans =
      GrowthOverWork("SELECT relname, seq_scan FROM pg_stat_user_tables");
  if (HasFatalFailure()) return;
  for (const std::string table :
       {"agents", "messages", "message_inbox", "role_registry",
        "role_candidates", "hub_role_changes", "hub_reservations",
        "hub_reservation_patterns", "hub_reservation_changes", "hub_commits",
        "assign_jobs", "hub_job_dependencies", "hub_job_late_results"}) {
    ASSERT_TRUE(scans.count(table)) << table;
    EXPECT_EQ(scans.at(table), 0) << table << " was read whole";
  }
}

// A write about one message (an ack, its status, the pending count's
// trigger, a dead letter, a re-drive) finds it by its key, never by walking
// the pending messages' or unacked rows' partial indexes: those are small in
// a hub that keeps up, so the planner likes them, but each walk reads every
// pending row and every entry not vacuumed yet (docs/design/postgres.md).
// The expiry sweep reads its range of the expiry index: nothing is due.
TEST_F(PgWriterPlansTest, AWriteAboutOneMessageDoesNotWalkThePendingIndexes) {
  const std::map<std::string, int64_t> read = GrowthOverWork(
      "SELECT indexrelname, idx_tup_read FROM pg_stat_user_indexes");
  if (HasFatalFailure()) return;
  for (const std::string index :
       {"idx_messages_expiry_pending", "idx_inbox_agent_unacked",
        "idx_inbox_undelivered"}) {
    ASSERT_TRUE(read.count(index)) << index;
    // A walk reads the ~100 pending rows per statement, thousands a run.
    EXPECT_LT(read.at(index), kRounds * 4)
        << index << ": " << read.at(index) << " entries read";
  }
}

// A check reads the reservations its paths' ranges meet (at or above each
// path, and below it) through their keys, not the project's 5,000 whole: a
// check runs before each edit, on a reader (custom plans).
TEST_F(PgWriterPlansTest, ACheckReadsOnlyTheReservationsItsPathsMeet) {
  const std::map<std::string, int64_t> scans = GrowthOverWork(
      "SELECT relname, seq_scan FROM pg_stat_user_tables",
      [](PostgresStore& store) {
        for (int i = 0; i < kRounds; ++i) {
          ReservationCheck check;
          check.project_id = "prj";
          check.patterns = {absl::StrCat("src/f", 1 + i, ".cc"),
                            absl::StrCat("src/f", 2000 + i, ".cc/"), "lib/"};
          check.literal = true;
          check.now_ms = kNow;
          absl::StatusOr<std::vector<ReservationConflict>> conflicts =
              store.reservations().CheckReservations(check);
          ASSERT_TRUE(conflicts.ok()) << conflicts.status();
          EXPECT_EQ(conflicts->size(), 2u);  // lib/ is not reserved
        }
      });
  if (HasFatalFailure()) return;
  for (const std::string table :
       {"agents", "hub_reservations", "hub_reservation_patterns"}) {
    ASSERT_TRUE(scans.count(table)) << table;
    EXPECT_EQ(scans.at(table), 0) << table << " was read whole";
  }
}

}  // namespace
}  // namespace hub::storage::pg
