// Jobs survive `kill -9` of hubd (issue #46, "Durability"): the real hubd
// as a child process serves a mixed job load (create, claim, heartbeat,
// complete, fail with retries, cancel, workers leaving and coming back)
// from driver threads that keep every acknowledged reply; it is killed
// with SIGKILL at a random moment, and restarted on the same database once
// every 1 s deadline of a running attempt passed. Then:
//   - every acknowledged create exists (and its idempotency key returns it);
//   - no acknowledged transition is lost: an acknowledged complete is
//     SUCCEEDED at its attempt, an acknowledged fail shows its attempt
//     ended (the job at a later attempt, or ended as the reply said), an
//     acknowledged cancel stays cancelled (or requested);
//   - no attempt is counted twice: attempt = retry_count + 1 within
//     max_attempts, no attempt claimed twice, and every attempt before the
//     current one was claimed (acknowledged, or in flight at the kill);
//   - deadlines are re-armed: each attempt whose deadline passed while the
//     hub was down ends (timed_out) after the restart, never stuck;
//   - attempts of workers that are gone end: a worker whose deregistration
//     was acknowledged, and one marked offline in the store while the hub
//     was down (what a hub that stopped between the gone event and the job
//     write leaves: JobStore::EndOrphanedAttempts' case);
//   - an attempt whose worker lives on and whose deadline did not pass is
//     completed by that worker after the restart with the fence it had.
//
// On SQLite, and on a PostgreSQL the test starts. JOBS_CRASH_ITERATIONS
// (default 5 per engine, to keep CI short; issue #46's figure is 20)
// sets the number of kills per engine; JOBS_CRASH_SEED repeats the choices.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"
#include "records/job.h"
#include "storage/open_store.h"
#include "storage/pg/pg_test_database.h"
#include "tests/hub_test_util.h"
#include "tests/hubd_process.h"
#include "tests/job_test_calls.h"

namespace hub::testing {
namespace {

using hub::v1::Job;
using hub::v1::JobAttempt;

constexpr int kWorkers = 3;
const char kCapability[] = "crash";

uint64_t EnvNumber(const char* name, uint64_t otherwise) {
  const char* env = std::getenv(name);
  uint64_t n = 0;
  if (env != nullptr && absl::SimpleAtoi(env, &n)) return n;
  return otherwise;
}

std::string Key(const JobAttempt& a) {
  return absl::StrCat(a.job_id(), "#", a.attempt());
}

// Everything the hub acknowledged before it was killed.
struct Acknowledged {
  std::mutex mu;
  std::map<std::string, hub::v1::CreateJobRequest> created;  // by job id
  std::map<std::string, std::string> key_of;                 // job -> key
  std::map<std::string, std::vector<JobAttempt>> claims;     // by job#attempt
  std::map<std::string, Job> completed;  // job#attempt -> reply
  std::map<std::string, Job> failed;     // job#attempt -> reply
  std::map<std::string, Job> cancelled;  // job -> last reply
  std::set<std::pair<std::string, int64_t>> deregistered;
  // Live fences of workers that did not leave: attempt -> fence.
  std::map<std::string, JobAttempt> held;
  int64_t unanswered_claims = 0;  // claims in flight at the kill
  int64_t heartbeats = 0, ops = 0;
};

class Driver {
 public:
  Driver(JobStubs* hub, uint64_t seed, int iteration)
      : hub_(hub), seed_(seed), iteration_(iteration) {}

  void Start() {
    for (int w = 0; w < kWorkers; ++w) {
      const std::string id = absl::StrCat("crash-w", w);
      Call<hub::v1::RegisterAgentResponse> r =
          RegisterWorker(*hub_, id, {kCapability});
      ASSERT_TRUE(r.ok()) << r.status.error_message();
      generation_[w] = r.reply.presence_generation();
    }
    threads_.emplace_back([this] { Create(seed_ * 31 + 1); });
    threads_.emplace_back([this] { Cancel(seed_ * 31 + 2); });
    for (int w = 0; w < kWorkers; ++w) {
      threads_.emplace_back([this, w] { Work(w, seed_ * 31 + 3 + w); });
    }
  }
  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) t.join();
  }
  int64_t ops() {
    std::lock_guard<std::mutex> lock(ack_.mu);
    return ack_.ops;
  }
  Acknowledged& ack() { return ack_; }
  int64_t generation(int w) const { return generation_[w]; }

 private:
  void Create(uint64_t seed) {
    std::mt19937_64 rng(seed);
    for (int n = 0; !stop_; ++n) {
      hub::v1::CreateJobRequest r = PoolJob(kCapability, rng() % 2 == 0 ? 1 : 3,
                                            1 + static_cast<int>(rng() % 4));
      r.set_idempotency_key(absl::StrCat("it", iteration_, "-", n));
      Call<hub::v1::CreateJobResponse> c = CreateJob(*hub_, r);
      if (!c.ok()) continue;
      std::lock_guard<std::mutex> lock(ack_.mu);
      ack_.created[c.reply.job().job_id()] = r;
      ++ack_.ops;
      absl::SleepFor(absl::Milliseconds(2));
    }
  }

  void Cancel(uint64_t seed) {
    std::mt19937_64 rng(seed);
    while (!stop_) {
      absl::SleepFor(absl::Milliseconds(15));
      std::string id;
      {
        std::lock_guard<std::mutex> lock(ack_.mu);
        if (ack_.created.empty()) continue;
        auto it = ack_.created.begin();
        std::advance(it, rng() % ack_.created.size());
        id = it->first;
      }
      Call<hub::v1::CancelJobResponse> c = CancelJob(*hub_, id);
      if (!c.ok()) continue;
      std::lock_guard<std::mutex> lock(ack_.mu);
      ack_.cancelled[id] = c.reply.job();
      ++ack_.ops;
    }
  }

  void Work(int w, uint64_t seed) {
    std::mt19937_64 rng(seed);
    const std::string agent = absl::StrCat("crash-w", w);
    while (!stop_) {
      if (rng() % 50 == 0) {  // the worker leaves and comes back
        const int64_t gone = generation_[w];
        if (!DeregisterWorker(*hub_, agent, gone).ok()) continue;
        {
          std::lock_guard<std::mutex> lock(ack_.mu);
          ack_.deregistered.insert({agent, gone});
          ++ack_.ops;
          for (auto it = ack_.held.begin(); it != ack_.held.end();) {
            it = it->second.agent_id() == agent ? ack_.held.erase(it)
                                                : std::next(it);
          }
        }
        Call<hub::v1::RegisterAgentResponse> r =
            RegisterWorker(*hub_, agent, {kCapability});
        if (r.ok()) generation_[w] = r.reply.presence_generation();
        continue;
      }
      Call<hub::v1::ClaimJobResponse> claim =
          ClaimJob(*hub_, agent, generation_[w], "");
      if (!claim.ok() || !claim.reply.has_job()) {
        const grpc::StatusCode code = claim.status.error_code();
        if (code == grpc::StatusCode::UNAVAILABLE ||
            code == grpc::StatusCode::DEADLINE_EXCEEDED) {
          // In flight at the kill: it may have been applied.
          std::lock_guard<std::mutex> lock(ack_.mu);
          ++ack_.unanswered_claims;
        }
        absl::SleepFor(absl::Milliseconds(2));
        continue;
      }
      const JobAttempt fence = claim.reply.job().attempt();
      {
        std::lock_guard<std::mutex> lock(ack_.mu);
        ack_.claims[Key(fence)].push_back(fence);
        ack_.held[Key(fence)] = fence;
        ++ack_.ops;
      }
      if (HeartbeatJob(*hub_, fence, 1).ok()) {
        std::lock_guard<std::mutex> lock(ack_.mu);
        ++ack_.heartbeats;
        ++ack_.ops;
      }
      const uint64_t end = rng() % 20;
      if (end < 12) {
        Call<hub::v1::CompleteJobResponse> c = CompleteJob(*hub_, fence);
        std::lock_guard<std::mutex> lock(ack_.mu);
        if (c.ok()) {
          ack_.completed[Key(fence)] = c.reply.job();
          ++ack_.ops;
        }
        if (c.status.error_code() != grpc::StatusCode::UNAVAILABLE) {
          ack_.held.erase(Key(fence));
        }
      } else if (end < 18) {
        Call<hub::v1::FailJobResponse> f = FailJob(*hub_, fence, end < 17);
        std::lock_guard<std::mutex> lock(ack_.mu);
        if (f.ok()) {
          ack_.failed[Key(fence)] = f.reply.job();
          ++ack_.ops;
        }
        if (f.status.error_code() != grpc::StatusCode::UNAVAILABLE) {
          ack_.held.erase(Key(fence));
        }
      }
      // else: the worker keeps the attempt and goes on (its deadline, or
      // the worker after the restart, ends it).
    }
  }

  JobStubs* const hub_;
  const uint64_t seed_;
  const int iteration_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  int64_t generation_[kWorkers] = {};
  Acknowledged ack_;
};

// The store's own view of the jobs (attempt, retry_count, max_retries,
// deadline), read with the hub down.
std::map<std::string, JobRecord> StoreJobs(storage::Store& store) {
  std::map<std::string, JobRecord> jobs;
  storage::JobFilter filter;
  filter.limit = 1000;
  while (true) {
    absl::StatusOr<std::vector<JobRecord>> page = store.jobs().ListJobs(filter);
    EXPECT_TRUE(page.ok()) << page.status();
    if (!page.ok() || page->empty()) break;
    for (const JobRecord& j : *page) jobs[j.job_id] = j;
    filter.after_updated_at_ms = page->back().updated_at_ms;
    filter.after_job_id = page->back().job_id;
  }
  return jobs;
}

absl::StatusOr<storage::OpenedStore> OpenDown(const std::string& db) {
  storage::OpenStoreOptions options;
  options.database = db;
  options.hub_id = "jobs-crash-test";
  options.program = "jobs_crash_test";
  return storage::OpenStore(options);
}

// No attempt counted twice, as the store has it.
void CheckCounts(const std::map<std::string, JobRecord>& jobs,
                 const std::string& when) {
  for (const auto& [id, j] : jobs) {
    EXPECT_EQ(j.attempt, j.retry_count + 1) << when << ": " << id;
    EXPECT_LE(j.retry_count, j.max_retries) << when << ": " << id;
  }
}

struct Figures {
  int64_t acknowledged = 0, jobs = 0, deadlines_rearmed = 0, orphans_ended = 0,
          deregistered_ended = 0, resumed = 0;
};

// One kill: load, SIGKILL, a worker marked gone while down, restart,
// checks.
void OneKill(const std::string& db, int iteration, uint64_t seed,
             Figures* figures) {
  SCOPED_TRACE(absl::StrCat("iteration ", iteration, " seed ", seed));
  std::mt19937_64 rng(seed);
  HubdProcessOptions quiet;
  const char* dir = std::getenv("TEST_TMPDIR");
  quiet.stderr_path = absl::StrCat(dir != nullptr ? dir : "/tmp", "/hubd.log");
  HubdProcess hubd(db, {"--detach_grace=300ms", "--log_level=warn"}, quiet);
  ASSERT_TRUE(hubd.Start().ok());
  auto before = std::make_unique<JobStubs>(hubd.address());
  Driver driver(before.get(), seed, iteration);
  driver.Start();
  // Under way first (an event, not a time), then the kill at a random
  // moment.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (driver.ops() < 40 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_GE(driver.ops(), 40) << "the load never got going";
  absl::SleepFor(absl::Milliseconds(static_cast<int64_t>(rng() % 1500)));
  hubd.Kill();
  const absl::Time killed = absl::Now();
  driver.Stop();
  Acknowledged& ack = driver.ack();

  // Down: what the store holds; one worker that holds an attempt is marked
  // offline, as a hub that saw it go and stopped before the job write
  // leaves it.
  std::map<std::string, JobRecord> down;
  std::optional<std::pair<std::string, int64_t>> orphaned;
  // Workers gone as the store has it (deregistered or registered again,
  // acknowledged or in flight at the kill).
  std::set<std::pair<std::string, int64_t>> gone;
  {
    absl::StatusOr<storage::OpenedStore> opened = OpenDown(db);
    ASSERT_TRUE(opened.ok()) << opened.status();
    down = StoreJobs(*opened->store);
    CheckCounts(down, "after the kill");
    for (const auto& [id, j] : down) {
      if (!j.attempt_worker.has_value()) continue;
      absl::StatusOr<AgentRecord> agent =
          opened->store->agents().GetAgent(*j.attempt_worker);
      ASSERT_TRUE(agent.ok()) << agent.status();
      if (agent->status == AgentStatus::kOffline ||
          agent->presence_generation != *j.attempt_generation) {
        gone.insert({*j.attempt_worker, *j.attempt_generation});
      }
    }
    for (const auto& worker : ack.deregistered) {
      absl::StatusOr<AgentRecord> agent =
          opened->store->agents().GetAgent(worker.first);
      ASSERT_TRUE(agent.ok()) << agent.status();
      EXPECT_TRUE(agent->status == AgentStatus::kOffline ||
                  agent->presence_generation > worker.second)
          << "acknowledged deregistration of " << worker.first << " lost";
    }
    for (const auto& [id, j] : down) {
      if (j.state != JobState::kRunning || !j.attempt_worker.has_value()) {
        continue;
      }
      if (gone.count({*j.attempt_worker, *j.attempt_generation})) continue;
      orphaned.emplace(*j.attempt_worker, *j.attempt_generation);
      if (rng() % 2 == 0) break;
    }
    if (orphaned.has_value()) {
      absl::StatusOr<storage::PresenceWrite> w =
          opened->store->agents().SetAgentStatusForGeneration(
              orphaned->first, orphaned->second, AgentStatus::kOffline);
      ASSERT_TRUE(w.ok()) << w.status();
    }
    opened->store.reset();
  }
  // Every 1 s deadline set before the kill passes while the hub is down.
  absl::SleepFor(killed + absl::Milliseconds(1500) - absl::Now());
  const int64_t restarted_ms = absl::ToUnixMillis(absl::Now());
  ASSERT_TRUE(hubd.Start().ok());
  // A new channel: the old one backs off from the killed hub.
  JobStubs hub(hubd.address());

  // No job lost, no acknowledged transition lost.
  for (const auto& [id, request] : ack.created) {
    Call<hub::v1::GetJobResponse> got = GetJob(hub, id);
    ASSERT_TRUE(got.ok()) << "acknowledged job " << id
                          << " lost: " << got.status.error_message();
    Call<hub::v1::CreateJobResponse> again = CreateJob(hub, request);
    ASSERT_TRUE(again.ok()) << again.status.error_message();
    EXPECT_FALSE(again.reply.created()) << id;
    EXPECT_EQ(again.reply.job().job_id(), id);
  }
  auto now_of = [&](const std::string& id) {
    Call<hub::v1::GetJobResponse> got = GetJob(hub, id);
    EXPECT_TRUE(got.ok()) << id << ": " << got.status.error_message();
    return got.reply.job();
  };
  for (const auto& [key, reply] : ack.completed) {
    const Job job = now_of(reply.job_id());
    EXPECT_EQ(job.state(), hub::v1::JOB_STATE_SUCCEEDED) << key;
    EXPECT_EQ(job.attempt().attempt(), reply.attempt().attempt()) << key;
  }
  for (const auto& [key, reply] : ack.failed) {
    const Job job = now_of(reply.job_id());
    if (IsEnded(reply.state())) {
      EXPECT_EQ(job.state(), reply.state()) << key;
      EXPECT_EQ(job.attempt().attempt(), reply.attempt().attempt()) << key;
    } else {
      EXPECT_GE(job.attempt().attempt(), reply.attempt().attempt()) << key;
    }
  }
  for (const auto& [id, reply] : ack.cancelled) {
    const Job job = now_of(id);
    if (reply.state() == hub::v1::JOB_STATE_CANCELLED) {
      EXPECT_EQ(job.state(), hub::v1::JOB_STATE_CANCELLED) << id;
    } else if (job.state() == hub::v1::JOB_STATE_RUNNING &&
               reply.cancel_requested() &&
               job.attempt().attempt() == reply.attempt().attempt()) {
      EXPECT_TRUE(job.cancel_requested()) << id;
    }
  }
  // No attempt claimed twice; every attempt before the current one was
  // claimed (or a claim was in flight at the kill).
  int64_t unexplained = 0;
  for (const auto& [key, claims] : ack.claims) {
    EXPECT_EQ(claims.size(), 1u) << key << " claimed more than once";
  }
  for (const auto& [id, j] : down) {
    EXPECT_GE(j.attempt, 1) << id;
    for (int64_t k = 1; k < j.attempt; ++k) {
      if (ack.claims.count(absl::StrCat(id, "#", k)) == 0) ++unexplained;
    }
  }
  EXPECT_LE(unexplained, ack.unanswered_claims)
      << "attempts that ended without a claim";

  // Deadlines re-armed, gone workers' attempts ended: each attempt running
  // at the kill whose deadline passed while down, or whose worker is gone,
  // ends.
  for (const auto& [id, j] : down) {
    if (j.state != JobState::kRunning) continue;
    const bool past =
        j.deadline_ms.has_value() && *j.deadline_ms < restarted_ms;
    const std::pair<std::string, int64_t> worker = {*j.attempt_worker,
                                                    *j.attempt_generation};
    const bool orphan = orphaned.has_value() && worker == *orphaned;
    const bool deregistered = gone.count(worker) > 0;
    if (!past && !orphan && !deregistered) continue;
    Job job;
    const absl::Time give_up = absl::Now() + absl::Seconds(30);
    while (absl::Now() < give_up) {
      job = now_of(id);
      if (job.state() != hub::v1::JOB_STATE_RUNNING ||
          job.attempt().attempt() != j.attempt) {
        break;
      }
      absl::SleepFor(absl::Milliseconds(20));
    }
    ASSERT_FALSE(job.state() == hub::v1::JOB_STATE_RUNNING &&
                 job.attempt().attempt() == j.attempt)
        << id << " attempt " << j.attempt << " still runs after the restart"
        << (past ? " (deadline passed while down)" : "")
        << (orphan ? " (worker marked gone while down)" : "")
        << (deregistered ? " (worker deregistered)" : "");
    if (job.state() == hub::v1::JOB_STATE_SUCCEEDED) continue;
    const std::string reason = job.error().reason();
    if (orphan || deregistered) {
      EXPECT_TRUE(reason == "worker_gone" || (past && reason == "timed_out"))
          << id << ": " << reason;
      if (reason == "worker_gone") {
        ++(orphan ? figures->orphans_ended : figures->deregistered_ended);
      }
    } else {
      EXPECT_TRUE(reason == "timed_out" || reason == "cancelled")
          << id << ": " << reason;
      ++figures->deadlines_rearmed;
    }
  }
  // A live worker whose attempt's deadline did not pass finishes it with
  // the fence it had before the kill.
  for (const auto& [key, fence] : ack.held) {
    auto it = down.find(fence.job_id());
    if (it == down.end() || it->second.state != JobState::kRunning ||
        it->second.attempt != fence.attempt()) {
      continue;
    }
    const std::pair<std::string, int64_t> worker = {
        fence.agent_id(), fence.presence_generation()};
    if ((orphaned.has_value() && worker == *orphaned) || gone.count(worker)) {
      continue;
    }
    // A deadline at least 1 s away after the restart: it holds.
    const Job job = now_of(fence.job_id());
    if (job.state() != hub::v1::JOB_STATE_RUNNING ||
        job.attempt().attempt() != fence.attempt() ||
        absl::FromUnixMillis(it->second.deadline_ms.value_or(0)) <
            absl::Now() + absl::Seconds(1)) {
      continue;
    }
    Call<hub::v1::CompleteJobResponse> c = CompleteJob(hub, fence);
    if (c.ok()) {
      ++figures->resumed;
      continue;
    }
    // Only its deadline may have ended it meanwhile.
    EXPECT_EQ(now_of(fence.job_id()).error().reason(), "timed_out")
        << key << ": " << Reason(c.status);
  }
  // Never stuck: every running attempt ends (completed above, or its
  // deadline), within a generous deadline.
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  std::string stuck;
  do {
    stuck.clear();
    Call<hub::v1::ListJobsResponse> list;
    hub::v1::ListJobsRequest r;
    r.add_states(hub::v1::JOB_STATE_RUNNING);
    r.set_page_size(1000);
    list.status = hub.jobs->ListJobs(CallContext().get(), r, &list.reply);
    ASSERT_TRUE(list.ok()) << list.status.error_message();
    if (list.reply.jobs_size() > 0) stuck = list.reply.jobs(0).job_id();
    if (!stuck.empty()) absl::SleepFor(absl::Milliseconds(50));
  } while (!stuck.empty() && absl::Now() < give_up);
  EXPECT_EQ(stuck, "") << "still running 60 s after the restart";

  hubd.Kill();
  {
    absl::StatusOr<storage::OpenedStore> opened = OpenDown(db);
    ASSERT_TRUE(opened.ok()) << opened.status();
    const std::map<std::string, JobRecord> end = StoreJobs(*opened->store);
    CheckCounts(end, "at the end");
    for (const auto& [id, j] : down) {
      ASSERT_EQ(end.count(id), 1u) << id;
      EXPECT_GE(end.at(id).attempt, j.attempt) << id;
    }
    figures->jobs += static_cast<int64_t>(end.size());
  }
  int64_t acknowledged = 0;
  {
    std::lock_guard<std::mutex> lock(ack.mu);
    acknowledged = ack.ops;
  }
  figures->acknowledged += acknowledged;
}

void RunKills(const std::string& engine,
              const std::function<std::string(int)>& database) {
  const int iterations =
      static_cast<int>(EnvNumber("JOBS_CRASH_ITERATIONS", 5));
  const uint64_t seed = EnvNumber("JOBS_CRASH_SEED", std::random_device{}());
  std::printf("%s: %d kills, seed %llu (JOBS_CRASH_SEED repeats it)\n",
              engine.c_str(), iterations,
              static_cast<unsigned long long>(seed));
  std::fflush(stdout);
  Figures figures;
  int passed = 0;
  for (int i = 0; i < iterations; ++i) {
    // Each kill's failures are counted, then reported as they came.
    ::testing::TestPartResultArray results;
    {
      ::testing::ScopedFakeTestPartResultReporter reporter(
          ::testing::ScopedFakeTestPartResultReporter::INTERCEPT_ALL_THREADS,
          &results);
      OneKill(database(i), i, seed + static_cast<uint64_t>(i), &figures);
    }
    bool failed = false;
    for (int k = 0; k < results.size(); ++k) {
      const ::testing::TestPartResult& r = results.GetTestPartResult(k);
      if (!r.failed()) continue;
      failed = true;
      ADD_FAILURE_AT(r.file_name() != nullptr ? r.file_name() : "?",
                     r.line_number())
          << r.message();
    }
    if (!failed) ++passed;
  }
  std::printf(
      "%s: %d/%d kills passed; %lld acknowledged writes, %lld jobs, %lld "
      "attempts timed out after the restart (deadline passed while down), "
      "%lld attempts of a worker marked gone while down ended, %lld of "
      "deregistered workers, %lld attempts completed after the restart "
      "with their fence\n",
      engine.c_str(), passed, iterations,
      static_cast<long long>(figures.acknowledged),
      static_cast<long long>(figures.jobs),
      static_cast<long long>(figures.deadlines_rearmed),
      static_cast<long long>(figures.orphans_ended),
      static_cast<long long>(figures.deregistered_ended),
      static_cast<long long>(figures.resumed));
  std::fflush(stdout);
  EXPECT_EQ(passed, iterations);
}

TEST(JobsCrashTest, SqliteKeepsEveryAcknowledgedJobWriteThroughSigkill) {
  RunKills("SQLite",
           [](int i) { return TempDbPath(absl::StrCat("jobs-crash-", i)); });
}

class JobsCrashPgTest : public storage::pg::testing::PgDatabaseTest {};

TEST_F(JobsCrashPgTest, PostgresKeepsEveryAcknowledgedJobWriteThroughSigkill) {
  RunKills("PostgreSQL", [this](int i) {
    const std::string name = absl::StrCat(database_, "_", i);
    EXPECT_TRUE(server_->CreateDatabase(name).ok());
    return absl::StrCat("postgresql://hub@/", name,
                        "?host=", server_->directory());
  });
}

}  // namespace
}  // namespace hub::testing
