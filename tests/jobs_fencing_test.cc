// Fences, adversarially (issue #46, "Fencing"; docs/design/jobs.md,
// "Fences" and "When the worker goes"): real hubd processes through gRPC,
// one on SQLite and two sharing one PostgreSQL the test starts. Cells of
// workers (each its own agents, each running one job at a time, every call
// through a hub picked at random) claim and run jobs, and supersede their
// attempts every way an attempt can end: failed and retried, the worker's
// id registered again (its generation moved), its presence stream dead past
// the detach grace, the attempt timed out, and two sessions of one agent id
// racing. Between those steps each cell injects stale writes
// (HeartbeatJob, CompleteJob, FailJob) with every superseded fence, with
// another agent's id, a wrong generation, a wrong role epoch, an attempt
// from the future and a job that does not exist, and checks each is refused
// with the reason the fence's state names, and that the job (state,
// attempt, result, error, deadline, progress, updated time) is exactly as
// it was. Every accepted write is kept with its time; at the end each job's
// history must show one attempt at a time (one worker per attempt, no write
// of an attempt accepted after a later attempt was claimed) and a result
// only from the attempt the job ended on; each late result must belong to
// an attempt that was superseded, once.
//
// Randomized but seeded: JOBS_FENCING_SEED=<n> repeats a run's choices
// (thread interleavings still vary). Nothing depends on timing: every wait
// is for the event it means, with a generous deadline.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "hub/v1/job.grpc.pb.h"
#include "storage/pg/pg_test_database.h"
#include "tests/agent_stream_fixture.h"
#include "tests/hub_test_util.h"
#include "tests/hubd_process.h"
#include "tests/job_test_calls.h"

namespace hub::testing {
namespace {

using hub::v1::Job;
using hub::v1::JobAttempt;

// Stale writes each configuration injects at least (two configurations:
// 12,000 in all).
constexpr int64_t kStaleWritesPerConfiguration = 6000;
constexpr int kCells = 4;

const std::vector<std::string> kHubFlags = {
    "--detach_grace=300ms", "--synchronous=normal", "--log_level=warn"};

uint64_t Seed() {
  const char* env = std::getenv("JOBS_FENCING_SEED");
  uint64_t seed = 0;
  if (env != nullptr && absl::SimpleAtoi(env, &seed)) return seed;
  return std::random_device{}();
}

enum class Op { kHeartbeat, kComplete, kFail };

const char* OpName(Op op) {
  switch (op) {
    case Op::kHeartbeat:
      return "heartbeat";
    case Op::kComplete:
      return "complete";
    case Op::kFail:
      return "fail";
  }
  return "?";
}

// A write a hub accepted, with when the test sent it and heard back.
struct Accepted {
  std::string job_id;
  int64_t attempt = 0;
  std::string agent;
  int64_t generation = 0;
  std::string op;  // claim, heartbeat, complete, fail
  int64_t sent_us = 0;
  int64_t received_us = 0;
};

// What every cell of one configuration saw.
class Ledger {
 public:
  void Accept(const Accepted& a) {
    std::lock_guard<std::mutex> lock(mu_);
    accepted_.push_back(a);
  }
  void Injected(const std::string& reason, bool as_expected) {
    std::lock_guard<std::mutex> lock(mu_);
    ++injected_;
    if (as_expected) ++refused_as_expected_;
    ++by_reason_[reason];
  }
  void Raced(const std::string& reason, bool refused) {
    std::lock_guard<std::mutex> lock(mu_);
    ++raced_;
    if (refused) ++raced_refused_;
    ++by_reason_[absl::StrCat(reason, " (raced)")];
  }
  void Failure(const std::string& what) {
    std::lock_guard<std::mutex> lock(mu_);
    if (failures_.size() < 40) failures_.push_back(what);
    ++failure_count_;
  }
  void Final(const Job& job, std::map<int64_t, std::string> workers) {
    std::lock_guard<std::mutex> lock(mu_);
    finals_.push_back({job, std::move(workers)});
  }
  int64_t injected() const {
    std::lock_guard<std::mutex> lock(mu_);
    return injected_;
  }

  // Checks each job's history of accepted writes; returns the report.
  std::string Check() {
    std::lock_guard<std::mutex> lock(mu_);
    std::map<std::string, std::vector<const Accepted*>> by_job;
    for (const Accepted& a : accepted_) by_job[a.job_id].push_back(&a);
    for (const auto& [job_id, writes] : by_job) CheckJob(job_id, writes);
    int64_t late = 0;
    for (const auto& [job, workers] : finals_) late += CheckLate(job, workers);
    std::string report = absl::StrCat(
        "  stale writes injected: ", injected_,
        ", refused with the expected code and reason: ", refused_as_expected_,
        "\n  raced writes of duplicate sessions: ", raced_, ", refused ",
        raced_refused_, "\n  accepted writes: ", accepted_.size(), " over ",
        finals_.size(), " jobs; late results kept: ", late,
        "\n  late results of an agent that never held the attempt: ",
        misattributed_, "\n  refusals by reason:");
    for (const auto& [reason, n] : by_reason_) {
      absl::StrAppend(&report, "\n    ", reason, ": ", n);
    }
    return report;
  }

  int64_t failure_count() const { return failure_count_; }
  const std::vector<std::string>& failures() const { return failures_; }
  int64_t refused_as_expected() const { return refused_as_expected_; }

 private:
  void FailureLocked(const std::string& what) {
    if (failures_.size() < 40) failures_.push_back(what);
    ++failure_count_;
  }

  // One attempt at a time: one worker per attempt, one claim per attempt,
  // no write of an attempt accepted when sent after a later attempt's claim
  // was answered; completions only of the attempt the job ended on.
  void CheckJob(const std::string& job_id,
                const std::vector<const Accepted*>& writes) {
    std::map<int64_t, std::set<std::pair<std::string, int64_t>>> holders;
    std::map<int64_t, int> claims;
    std::map<int64_t, int64_t> claimed_at;
    std::set<int64_t> completed;
    for (const Accepted* a : writes) {
      holders[a->attempt].insert({a->agent, a->generation});
      if (a->op == "claim") {
        ++claims[a->attempt];
        claimed_at[a->attempt] = a->received_us;
      }
      if (a->op == "complete") completed.insert(a->attempt);
    }
    for (const auto& [attempt, who] : holders) {
      if (who.size() != 1) {
        FailureLocked(absl::StrCat(job_id, " attempt ", attempt, ": ",
                                   who.size(), " workers had writes accepted"));
      }
    }
    for (const auto& [attempt, n] : claims) {
      if (n != 1) {
        FailureLocked(absl::StrCat(job_id, " attempt ", attempt, " claimed ", n,
                                   " times"));
      }
    }
    for (const Accepted* a : writes) {
      for (const auto& [attempt, at] : claimed_at) {
        if (attempt > a->attempt && a->sent_us > at) {
          FailureLocked(
              absl::StrCat(job_id, ": a ", a->op, " of attempt ", a->attempt,
                           " was accepted although sent after attempt ",
                           attempt, " was claimed: two attempts at once"));
        }
      }
    }
    if (completed.size() > 1) {
      FailureLocked(absl::StrCat(job_id, ": completions of ", completed.size(),
                                 " attempts accepted"));
    }
    for (const auto& [job, workers] : finals_) {
      if (job.job_id() != job_id) continue;
      const bool succeeded = job.state() == hub::v1::JOB_STATE_SUCCEEDED;
      if (succeeded != !completed.empty() ||
          (succeeded && *completed.begin() != job.attempt().attempt())) {
        FailureLocked(
            absl::StrCat(job_id, " ended ", hub::v1::JobState_Name(job.state()),
                         " at attempt ", job.attempt().attempt(), " with ",
                         completed.size(), " accepted completions"));
      }
      if (succeeded && job.result().fields().at("attempt").number_value() !=
                           static_cast<double>(job.attempt().attempt())) {
        FailureLocked(absl::StrCat(job_id, ": its result is not its last ",
                                   "attempt's: ", job.result().DebugString()));
      }
    }
  }

  // Each late result: an attempt that was superseded (before the job's
  // current one, or the current one ended without it), once, reported by
  // the worker that held it.
  int64_t CheckLate(const Job& job,
                    const std::map<int64_t, std::string>& workers) {
    std::set<int64_t> seen;
    for (const hub::v1::JobLateResult& late : job.late_results()) {
      if (!seen.insert(late.attempt()).second) {
        FailureLocked(absl::StrCat(job.job_id(), ": two late results of ",
                                   "attempt ", late.attempt()));
      }
      const bool superseded =
          late.attempt() < job.attempt().attempt() ||
          (late.attempt() == job.attempt().attempt() && IsEnded(job.state()) &&
           job.state() != hub::v1::JOB_STATE_SUCCEEDED);
      if (!superseded) {
        FailureLocked(absl::StrCat(job.job_id(), ": a late result of attempt ",
                                   late.attempt(), " that was not superseded"));
      }
      // Only the worker that held the attempt has its late result kept.
      auto it = workers.find(late.attempt());
      if (it == workers.end() || it->second != late.agent_id()) {
        ++misattributed_;
        FailureLocked(absl::StrCat(job.job_id(), ": the late result of ",
                                   "attempt ", late.attempt(), " is ",
                                   late.agent_id(), "'s, who never held it"));
      }
    }
    return static_cast<int64_t>(seen.size());
  }

  mutable std::mutex mu_;
  std::vector<Accepted> accepted_;
  std::vector<std::pair<Job, std::map<int64_t, std::string>>> finals_;
  std::map<std::string, int64_t> by_reason_;
  int64_t injected_ = 0, refused_as_expected_ = 0, raced_ = 0,
          raced_refused_ = 0, misattributed_ = 0;
  std::vector<std::string> failures_;
  int64_t failure_count_ = 0;
};

std::string FenceText(const JobAttempt& f) {
  return absl::StrCat(f.job_id(), "#", f.attempt(), " by ", f.agent_id(), "@",
                      f.presence_generation(), "/e", f.role_epoch());
}

bool SameFence(const JobAttempt& a, const JobAttempt& b) {
  return a.job_id() == b.job_id() && a.attempt() == b.attempt() &&
         a.agent_id() == b.agent_id() &&
         a.presence_generation() == b.presence_generation() &&
         a.role_epoch() == b.role_epoch();
}

// What a refused write must not change: everything but the late results.
std::string Core(Job job) {
  job.clear_late_results();
  return job.DebugString();
}

// The code and reason a write with `fence` must get from `job` as it is
// (proto/hub/v1/job.proto, HeartbeatJob's attempt reasons).
std::pair<grpc::StatusCode, std::string> Expected(const Job& job,
                                                  const JobAttempt& fence) {
  if (fence.job_id() != job.job_id()) {
    return {grpc::StatusCode::NOT_FOUND, "ASSIGN_NOT_FOUND"};
  }
  if (fence.attempt() != job.attempt().attempt()) {
    return {grpc::StatusCode::FAILED_PRECONDITION, "ASSIGN_ATTEMPT_MISMATCH"};
  }
  if (job.state() != hub::v1::JOB_STATE_RUNNING) {
    return {grpc::StatusCode::FAILED_PRECONDITION, "JOB_NOT_RUNNING"};
  }
  return {grpc::StatusCode::FAILED_PRECONDITION, "ASSIGN_WORKER_MISMATCH"};
}

// A cell: its own agents (two workers of the pool of jobs with its
// capability), one job at a time, every call through a random hub.
class Cell {
 public:
  Cell(int index, uint64_t seed, std::vector<JobStubs*> hubs, Ledger* ledger)
      : index_(index),
        rng_(seed),
        hubs_(std::move(hubs)),
        ledger_(ledger),
        capability_(absl::StrCat("fence:cell", index)),
        agents_({absl::StrCat("fence-c", index, "-a"),
                 absl::StrCat("fence-c", index, "-b")}) {}

  void Run(int64_t stale_target, absl::Time give_up) {
    for (const std::string& agent : agents_) Register(agent);
    while (ledger_->injected() < stale_target && absl::Now() < give_up &&
           ledger_->failure_count() == 0) {
      ++rounds_;
      if (rng_() % 6 == 0) {
        TimeoutRound();
      } else {
        Round();
      }
    }
  }

 private:
  JobStubs& Hub() { return *hubs_[rng_() % hubs_.size()]; }
  const std::string& AnyAgent() { return agents_[rng_() % agents_.size()]; }
  const std::string& Other(const std::string& agent) {
    return agent == agents_[0] ? agents_[1] : agents_[0];
  }
  std::string Where() const {
    return absl::StrCat("cell ", index_, " round ", rounds_, ": ");
  }

  int64_t Register(const std::string& agent) {
    Call<hub::v1::RegisterAgentResponse> r =
        RegisterWorker(Hub(), agent, {capability_});
    if (!r.ok()) {
      ledger_->Failure(absl::StrCat(Where(), "register ", agent, ": ",
                                    r.status.error_code(), " ",
                                    r.status.error_message()));
      return 0;
    }
    generation_[agent] = r.reply.presence_generation();
    return r.reply.presence_generation();
  }

  Job Get(const std::string& id) {
    Call<hub::v1::GetJobResponse> r = GetJob(Hub(), id);
    if (!r.ok()) {
      ledger_->Failure(
          absl::StrCat(Where(), "get ", id, ": ", r.status.error_message()));
    }
    return r.reply.job();
  }

  // Waits until the job no longer runs `attempt` (it ended, or another
  // attempt began).
  Job WaitMoved(const std::string& id, int64_t attempt) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      Job job = Get(id);
      if (job.state() != hub::v1::JOB_STATE_RUNNING ||
          job.attempt().attempt() != attempt) {
        return job;
      }
      absl::SleepFor(absl::Milliseconds(10));
    }
    ledger_->Failure(absl::StrCat(Where(), id, " attempt ", attempt,
                                  " still runs after 60 s"));
    return Get(id);
  }

  // A legitimate write of the job's current holder, timed and kept when
  // accepted.
  template <typename Reply>
  Call<Reply> Legit(const JobAttempt& fence, Op op, bool retryable = true) {
    const int64_t sent = SteadyMicros();
    Call<Reply> call;
    if constexpr (std::is_same_v<Reply, hub::v1::HeartbeatJobResponse>) {
      call = HeartbeatJob(Hub(), fence, ++steps_);
    } else if constexpr (std::is_same_v<Reply, hub::v1::CompleteJobResponse>) {
      call = CompleteJob(Hub(), fence);
    } else {
      call = FailJob(Hub(), fence, retryable);
    }
    if (call.ok()) {
      ledger_->Accept({fence.job_id(), fence.attempt(), fence.agent_id(),
                       fence.presence_generation(), OpName(op), sent,
                       SteadyMicros()});
    }
    return call;
  }

  // The holder's write, which must be accepted (its attempt is live and
  // its deadline minutes away).
  void MustHeartbeat(const JobAttempt& fence) {
    auto r = Legit<hub::v1::HeartbeatJobResponse>(fence, Op::kHeartbeat);
    if (!r.ok()) {
      ledger_->Failure(absl::StrCat(Where(), "the holder's heartbeat ",
                                    FenceText(fence),
                                    " refused: ", Reason(r.status)));
    }
  }
  Job MustFail(const JobAttempt& fence, bool retryable) {
    Call<hub::v1::FailJobResponse> r =
        Legit<hub::v1::FailJobResponse>(fence, Op::kFail, retryable);
    if (!r.ok()) {
      ledger_->Failure(absl::StrCat(Where(), "the holder's fail ",
                                    FenceText(fence),
                                    " refused: ", Reason(r.status)));
    }
    return r.reply.job();
  }

  // Claims the queued job for `agent`; the claimed job (state RUNNING), or
  // the job as it is when it cannot be claimed any more.
  Job Claim(const std::string& id, const std::string& agent) {
    const absl::Time deadline = absl::Now() + absl::Seconds(60);
    while (absl::Now() < deadline) {
      const int64_t sent = SteadyMicros();
      Call<hub::v1::ClaimJobResponse> r =
          ClaimJob(Hub(), agent, generation_[agent], id);
      const int64_t received = SteadyMicros();
      if (r.ok() && r.reply.has_job()) {
        const JobAttempt& a = r.reply.job().attempt();
        ledger_->Accept({id, a.attempt(), a.agent_id(), a.presence_generation(),
                         "claim", sent, received});
        workers_[a.attempt()] = a.agent_id();
        return r.reply.job();
      }
      if (Reason(r.status) != "JOB_NOT_CLAIMABLE") {
        ledger_->Failure(absl::StrCat(Where(), agent, " claiming ", id, ": ",
                                      r.status.error_code(), " ",
                                      Reason(r.status)));
        return Get(id);
      }
      // Not claimable: its 1 ms backoff, or it ended.
      Job job = Get(id);
      if (job.state() != hub::v1::JOB_STATE_QUEUED) return job;
      absl::SleepFor(absl::Milliseconds(2));
    }
    ledger_->Failure(absl::StrCat(Where(), id, " not claimable for 60 s"));
    return Get(id);
  }

  // Sends every stale write it can make of the job as it is now and checks
  // each is refused with its reason and changes nothing.
  void Inject(const std::string& id) {
    const Job before = Get(id);
    const JobAttempt& current = before.attempt();
    const bool running = before.state() == hub::v1::JOB_STATE_RUNNING;
    // The fences to forge from: the holder's, or (no holder) a worker's at
    // its generation.
    JobAttempt base = current;
    if (base.agent_id().empty()) {
      base.set_agent_id(AnyAgent());
      base.set_presence_generation(generation_[base.agent_id()]);
    }
    std::vector<JobAttempt> fences = stale_;
    auto forge = [&](auto change) {
      JobAttempt f = base;
      change(f);
      fences.push_back(f);
    };
    forge([&](JobAttempt& f) {  // another agent of the pool
      f.set_agent_id(Other(base.agent_id()));
      f.set_presence_generation(generation_[f.agent_id()]);
    });
    forge([](JobAttempt& f) { f.set_agent_id("fence-ghost"); });
    forge([](JobAttempt& f) {
      f.set_presence_generation(f.presence_generation() + 1);
    });
    if (base.presence_generation() > 1) {
      forge([](JobAttempt& f) {
        f.set_presence_generation(f.presence_generation() - 1);
      });
    }
    forge([](JobAttempt& f) { f.set_role_epoch(7); });
    forge([](JobAttempt& f) { f.set_attempt(f.attempt() + 1); });
    forge([](JobAttempt& f) { f.set_attempt(f.attempt() + 1000); });
    forge([](JobAttempt& f) { f.set_job_id(f.job_id() + "-gone"); });
    for (const JobAttempt& old : stale_) {  // a superseded attempt, forged
      JobAttempt f = old;
      f.set_agent_id(Other(old.agent_id()));
      f.set_presence_generation(generation_[f.agent_id()]);
      fences.push_back(f);
    }
    std::shuffle(fences.begin(), fences.end(), rng_);
    for (const JobAttempt& fence : fences) {
      if (running && SameFence(fence, current)) continue;  // the holder
      for (Op op : {Op::kHeartbeat, Op::kComplete, Op::kFail}) {
        // The same call again of the attempt that ended the job this way is
        // answered with the job as it is (a lost reply): not stale.
        const bool own =
            fence.attempt() == current.attempt() &&
            fence.agent_id() == current.agent_id() &&
            fence.presence_generation() == current.presence_generation() &&
            fence.job_id() == current.job_id();
        if (own && op == Op::kComplete &&
            before.state() == hub::v1::JOB_STATE_SUCCEEDED) {
          continue;
        }
        if (own && op == Op::kFail &&
            (before.state() == hub::v1::JOB_STATE_FAILED ||
             before.state() == hub::v1::JOB_STATE_CANCELLED)) {
          continue;
        }
        Stale(before, fence, op);
      }
    }
    const Job after = Get(id);
    if (Core(after) != Core(before)) {
      ledger_->Failure(absl::StrCat(Where(), "refused writes changed ", id,
                                    ":\nbefore ", Core(before), "\nafter ",
                                    Core(after)));
    }
  }

  void Stale(const Job& before, const JobAttempt& fence, Op op) {
    const auto [code, reason] = Expected(before, fence);
    const int64_t sent = SteadyMicros();
    grpc::Status status;
    switch (op) {
      case Op::kHeartbeat:
        status = HeartbeatJob(Hub(), fence, ++steps_).status;
        break;
      case Op::kComplete:
        status = CompleteJob(Hub(), fence).status;
        break;
      case Op::kFail:
        status = FailJob(Hub(), fence, rng_() % 2 == 0).status;
        break;
    }
    const bool as_expected =
        status.error_code() == code && Reason(status) == reason;
    ledger_->Injected(status.ok() ? "OK (accepted!)" : Reason(status),
                      as_expected);
    if (status.ok()) {
      ledger_->Accept({fence.job_id(), fence.attempt(), fence.agent_id(),
                       fence.presence_generation(), OpName(op), sent,
                       SteadyMicros()});
    }
    if (!as_expected) {
      ledger_->Failure(
          absl::StrCat(Where(), "stale ", OpName(op), " ", FenceText(fence),
                       " against ", hub::v1::JobState_Name(before.state()), " ",
                       FenceText(before.attempt()), ": got ",
                       status.error_code(), " ", Reason(status), " (",
                       status.error_message(), "), want ", code, " ", reason));
    }
  }

  void Superseded(const JobAttempt& fence) { stale_.push_back(fence); }

  // Two sessions of one agent id race: each registers the id (the later
  // registration fences the earlier), claims the queued job at its
  // generation, heartbeats and completes.
  void RaceSessions(const std::string& id) {
    const std::string agent = AnyAgent();
    std::vector<JobAttempt> claimed(2);
    std::vector<int64_t> generations(2, 0);
    std::vector<std::thread> sessions;
    std::vector<uint64_t> seeds = {rng_(), rng_()};
    for (int s = 0; s < 2; ++s) {
      sessions.emplace_back([&, s] {
        std::mt19937_64 rng(seeds[s]);
        auto hub = [&]() -> JobStubs& { return *hubs_[rng() % hubs_.size()]; };
        Call<hub::v1::RegisterAgentResponse> reg =
            RegisterWorker(hub(), agent, {capability_});
        if (!reg.ok()) return;
        generations[s] = reg.reply.presence_generation();
        int64_t sent = SteadyMicros();
        Call<hub::v1::ClaimJobResponse> claim =
            ClaimJob(hub(), agent, generations[s], id);
        if (!claim.ok() || !claim.reply.has_job()) return;
        const JobAttempt fence = claim.reply.job().attempt();
        claimed[s] = fence;
        ledger_->Accept({id, fence.attempt(), agent,
                         fence.presence_generation(), "claim", sent,
                         SteadyMicros()});
        sent = SteadyMicros();
        const grpc::Status beat = HeartbeatJob(hub(), fence, 0).status;
        Raced(beat, fence, "heartbeat", sent);
        sent = SteadyMicros();
        const grpc::Status done = CompleteJob(hub(), fence).status;
        Raced(done, fence, "complete", sent);
      });
    }
    for (std::thread& t : sessions) t.join();
    generation_[agent] = std::max(generations[0], generations[1]);
    for (const JobAttempt& fence : claimed) {
      if (fence.job_id().empty()) continue;
      workers_[fence.attempt()] = fence.agent_id();
      if (fence.presence_generation() != generation_[agent]) {
        Superseded(fence);
      }
    }
  }

  void Raced(const grpc::Status& status, const JobAttempt& fence,
             const char* op, int64_t sent) {
    const std::string reason = Reason(status);
    const bool refused =
        status.error_code() == grpc::StatusCode::FAILED_PRECONDITION &&
        (reason == "ASSIGN_ATTEMPT_MISMATCH" ||
         reason == "ASSIGN_WORKER_MISMATCH" || reason == "JOB_NOT_RUNNING");
    if (status.ok()) {
      ledger_->Accept({fence.job_id(), fence.attempt(), fence.agent_id(),
                       fence.presence_generation(), op, sent, SteadyMicros()});
    } else {
      ledger_->Raced(reason, refused);
      if (!refused) {
        ledger_->Failure(absl::StrCat(Where(), "raced ", op, " ",
                                      FenceText(fence), ": ",
                                      status.error_code(), " ", reason));
      }
    }
  }

  // Claims the job again when it is queued; the job as it is then.
  Job Reclaim(const std::string& id) {
    Job job = Get(id);
    if (job.state() == hub::v1::JOB_STATE_QUEUED) {
      job = Claim(id, AnyAgent());
      if (job.state() == hub::v1::JOB_STATE_RUNNING) {
        MustHeartbeat(job.attempt());
      }
    }
    return job;
  }

  // A job with a long deadline, superseded one to three times by a failure,
  // a new registration of its worker, its worker's stream dying, or two
  // sessions of one worker racing; then completed, cancelled or failed.
  void Round() {
    stale_.clear();
    workers_.clear();
    Call<hub::v1::CreateJobResponse> created =
        CreateJob(Hub(), PoolJob(capability_, 600, 12));
    if (!created.ok()) {
      ledger_->Failure(
          absl::StrCat(Where(), "create: ", created.status.error_message()));
      return;
    }
    const std::string id = created.reply.job().job_id();
    Job job = Claim(id, AnyAgent());
    if (job.state() == hub::v1::JOB_STATE_RUNNING) MustHeartbeat(job.attempt());
    const int steps = 1 + static_cast<int>(rng_() % 3);
    for (int step = 0; step < steps && !IsEnded(job.state()); ++step) {
      const JobAttempt holder = job.attempt();
      switch (rng_() % 4) {
        case 0:  // failed, retried
          job = MustFail(holder, true);
          break;
        case 1:  // the worker's id registered again: its generation moved
          Register(holder.agent_id());
          job = WaitMoved(id, holder.attempt());
          ExpectError(job, "worker_gone");
          break;
        case 2: {  // its presence stream died past the grace
          AttachedAgent stream =
              AttachOk(Hub().presence.get(), holder.agent_id(),
                       holder.presence_generation());
          stream.context->TryCancel();
          job = WaitMoved(id, holder.attempt());
          ExpectError(job, "worker_gone");
          Register(holder.agent_id());  // the worker comes back
          break;
        }
        default:  // failed, then two sessions of one worker race for it
          job = MustFail(holder, true);
          Superseded(holder);
          if (rng_() % 2 == 0) Inject(id);
          RaceSessions(id);
          job = Get(id);
          Inject(id);
          if (job.state() == hub::v1::JOB_STATE_QUEUED) job = Reclaim(id);
          if (job.state() == hub::v1::JOB_STATE_RUNNING) Inject(id);
          continue;
      }
      Superseded(holder);
      if (rng_() % 2 == 0) Inject(id);  // while queued
      job = Reclaim(id);
      Inject(id);  // against the new holder
    }
    if (job.state() == hub::v1::JOB_STATE_RUNNING) {
      const JobAttempt holder = job.attempt();
      const uint64_t end = rng_() % 10;
      if (end < 7) {
        auto r = Legit<hub::v1::CompleteJobResponse>(holder, Op::kComplete);
        if (!r.ok()) {
          ledger_->Failure(absl::StrCat(Where(), "the holder's complete ",
                                        FenceText(holder),
                                        " refused: ", Reason(r.status)));
        }
      } else if (end < 9) {
        if (!CancelJob(Hub(), id).ok()) {
          ledger_->Failure(absl::StrCat(Where(), "cancel ", id));
        }
        auto beat =
            Legit<hub::v1::HeartbeatJobResponse>(holder, Op::kHeartbeat);
        if (!beat.ok() || !beat.reply.cancel_requested()) {
          ledger_->Failure(absl::StrCat(Where(), "the holder did not hear ",
                                        "of the cancel"));
        }
        MustFail(holder, true);
      } else {
        MustFail(holder, false);
      }
    }
    Inject(id);  // against the ended job
    Finish(id);
  }

  // A job whose attempts time out (1 s): the first is left to its
  // deadline, later ones try to complete in time; each ended attempt is
  // stale.
  void TimeoutRound() {
    stale_.clear();
    workers_.clear();
    Call<hub::v1::CreateJobResponse> created =
        CreateJob(Hub(), PoolJob(capability_, 1, 3));
    if (!created.ok()) {
      ledger_->Failure(
          absl::StrCat(Where(), "create: ", created.status.error_message()));
      return;
    }
    const std::string id = created.reply.job().job_id();
    Job job = created.reply.job();
    while (job.state() == hub::v1::JOB_STATE_QUEUED) {
      job = Claim(id, AnyAgent());
      if (job.state() != hub::v1::JOB_STATE_RUNNING) break;
      const JobAttempt holder = job.attempt();
      if (holder.attempt() > 1) {
        // In time or not: either is right, and the ledger keeps it.
        Legit<hub::v1::CompleteJobResponse>(holder, Op::kComplete);
      }
      job = WaitMoved(id, holder.attempt());
      if (job.state() != hub::v1::JOB_STATE_SUCCEEDED) {
        ExpectError(job, "timed_out");
      }
      Superseded(holder);
      Inject(id);
    }
    Finish(id);
  }

  void ExpectError(const Job& job, const std::string& reason) {
    if (job.error().reason() != reason) {
      ledger_->Failure(absl::StrCat(Where(), job.job_id(), " ended its attempt",
                                    " with ", job.error().reason(), ", not ",
                                    reason));
    }
  }

  void Finish(const std::string& id) {
    Job job = Get(id);
    if (!IsEnded(job.state())) {
      ledger_->Failure(absl::StrCat(
          Where(), id, " did not end: ", hub::v1::JobState_Name(job.state())));
    }
    ledger_->Final(job, workers_);
  }

  const int index_;
  std::mt19937_64 rng_;
  const std::vector<JobStubs*> hubs_;
  Ledger* const ledger_;
  const std::string capability_;
  const std::vector<std::string> agents_;
  std::map<std::string, int64_t> generation_;
  std::vector<JobAttempt> stale_;  // the current job's superseded fences
  std::map<int64_t, std::string> workers_;  // attempt -> who claimed it
  int64_t steps_ = 0;
  int rounds_ = 0;
};

// Runs the cells against `hubs` until they injected the target, then
// checks the histories and prints the figures.
void RunCells(const std::string& configuration,
              const std::vector<JobStubs*>& hubs) {
  const uint64_t seed = Seed();
  std::printf("%s: seed %llu (JOBS_FENCING_SEED=%llu repeats its choices)\n",
              configuration.c_str(), static_cast<unsigned long long>(seed),
              static_cast<unsigned long long>(seed));
  Ledger ledger;
  const absl::Time started = absl::Now();
  const absl::Time give_up = started + absl::Seconds(150);
  std::vector<std::thread> cells;
  for (int i = 0; i < kCells; ++i) {
    cells.emplace_back([&, i] {
      Cell cell(i, seed * 1000003 + static_cast<uint64_t>(i), hubs, &ledger);
      cell.Run(kStaleWritesPerConfiguration, give_up);
    });
  }
  for (std::thread& t : cells) t.join();
  const std::string report = ledger.Check();
  std::printf("%s (%d hub%s), %.1f s:\n%s\n", configuration.c_str(),
              static_cast<int>(hubs.size()), hubs.size() > 1 ? "s" : "",
              absl::ToDoubleSeconds(absl::Now() - started), report.c_str());
  std::fflush(stdout);
  EXPECT_GE(ledger.injected(), kStaleWritesPerConfiguration);
  EXPECT_EQ(ledger.refused_as_expected(), ledger.injected());
  EXPECT_EQ(ledger.failure_count(), 0);
  for (const std::string& f : ledger.failures()) ADD_FAILURE() << f;
}

HubdProcessOptions QuietHubd(const std::string& name) {
  HubdProcessOptions options;
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  if (dir == nullptr) dir = std::getenv("TEST_TMPDIR");
  options.stderr_path =
      absl::StrCat(dir != nullptr ? dir : "/tmp", "/", name, ".stderr");
  return options;
}

TEST(JobsFencingTest, StaleWritesToOneHubOnSqliteAreAllRefused) {
  HubdProcess hubd(TempDbPath("fencing"), kHubFlags, QuietHubd("hubd-sqlite"));
  ASSERT_TRUE(hubd.Start().ok());
  JobStubs hub(hubd.address());
  RunCells("SQLite, one hub", {&hub});
}

class JobsFencingPgTest : public storage::pg::testing::PgDatabaseTest {};

TEST_F(JobsFencingPgTest, StaleWritesToTwoHubsOnPostgresAreAllRefused) {
  const std::string url = absl::StrCat("postgresql://hub@/", database_,
                                       "?host=", server_->directory());
  HubdProcess a(url, kHubFlags, QuietHubd("hubd-pg-a"));
  HubdProcess b(url, kHubFlags, QuietHubd("hubd-pg-b"));
  ASSERT_TRUE(a.Start().ok());
  ASSERT_TRUE(b.Start().ok());
  JobStubs hub_a(a.address());
  JobStubs hub_b(b.address());
  RunCells("PostgreSQL, two hubs", {&hub_a, &hub_b});
}

// Known bug, found by the randomized run above: a refused CompleteJob of a
// superseded attempt is kept as that attempt's late result whoever sends it.
// job_ops.cc's Refused() keeps any fence whose attempt is below the job's
// current one (ASSIGN_ATTEMPT_MISMATCH) without checking that the fence's
// agent and generation held that attempt: the row remembers only the
// current attempt's worker. So another agent's forged result is what the
// supervisor hears as the late result (a late_result notice), and the
// worker that did hold the attempt has its own late result dropped (once
// per attempt). Enable when the store keeps each attempt's worker.
TEST(JobsFencingTest, ALateResultIsKeptOnlyFromTheAttemptsWorker) {
  HubdProcess hubd(TempDbPath("late"), kHubFlags, QuietHubd("hubd-late"));
  ASSERT_TRUE(hubd.Start().ok());
  JobStubs hub(hubd.address());
  const int64_t a =
      RegisterWorker(hub, "late-a", {"late"}).reply.presence_generation();
  const int64_t b =
      RegisterWorker(hub, "late-b", {"late"}).reply.presence_generation();
  Call<hub::v1::CreateJobResponse> created =
      CreateJob(hub, PoolJob("late", 600, 3));
  ASSERT_TRUE(created.ok());
  const std::string id = created.reply.job().job_id();
  Call<hub::v1::ClaimJobResponse> claimed = ClaimJob(hub, "late-a", a, id);
  ASSERT_TRUE(claimed.ok() && claimed.reply.has_job());
  const JobAttempt first = claimed.reply.job().attempt();
  ASSERT_TRUE(FailJob(hub, first, true).ok());  // attempt 2 is queued
  JobAttempt forged = first;  // attempt 1, but late-b never held it
  forged.set_agent_id("late-b");
  forged.set_presence_generation(b);
  EXPECT_EQ(Reason(CompleteJob(hub, forged).status), "ASSIGN_ATTEMPT_MISMATCH");
  EXPECT_EQ(Reason(CompleteJob(hub, first).status), "ASSIGN_ATTEMPT_MISMATCH");
  const Job job = GetJob(hub, id).reply.job();
  ASSERT_EQ(job.late_results_size(), 1);
  EXPECT_EQ(job.late_results(0).agent_id(), "late-a")
      << "the late result of attempt 1 is late-b's forged one";
}

}  // namespace
}  // namespace hub::testing
