// jobs: JobService against a running hubd (issue 46's figures). One
// workload per run, one JSON line on stdout; tools/hubbench/jobs.sh starts
// the servers and prints the table.
//
//   jobs --addr=HOST:PORT --workload=W [--workers=8] [--duration=3s]
//        [--warmup=1s] [--rounds=20] [--server_pid=PID]
//
//   throughput   --workers closed loops, each an attached worker agent
//                (PresenceSession, acking its messages): CreateJob (the
//                worker is the supervisor, the job's worker a pool every
//                agent matches) -> ClaimJob (the next claimable) ->
//                CompleteJob. Cycles completed per second over the window,
//                p50/p99 of one cycle.
//   publish      hub's durable publish rate from this driver: hubbench's
//                publish workload (--workers publishers to one attached
//                agent that acks every message).
//   dead_worker  --rounds times: a worker in a child process (this binary,
//                --worker_child) registers, attaches its presence stream
//                and claims a job; it is sent SIGKILL, and the clock runs
//                from the kill to another attached worker's first
//                successful ClaimJob of that job (polled every --poll).
//   fail         the same, ended by the worker's FailJob (retryable,
//                retry_policy.initial_backoff 0): from the call's start.
//   deregister   the same, ended by the worker's Deregister (fenced by its
//                generation): from the call's start.
//   deadline     a job with a 1 s timeout claimed and left: from its
//                deadline (the claim's Job.deadline, the server's clock on
//                this machine) to GetJob reading TIMED_OUT (polled).
//   child        a parent and a child that depends on it: from the
//                parent's CompleteJob call to the child's first successful
//                ClaimJob by another worker.
//
// Latency rows print samples, p50/p99/max in ms; the throughput and publish
// rows ops/s.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "clients/cpp/hub_client.h"
#include "clients/cpp/presence_session.h"
#include "tools/hubbench/bench.h"
#include "tools/hubbench/publish.h"

ABSL_FLAG(std::string, addr, "", "hubd's host:port");
ABSL_FLAG(std::string, workload, "throughput",
          "throughput, publish, dead_worker, fail, deregister, deadline or "
          "child");
ABSL_FLAG(int, workers, 8, "throughput and publish: concurrent clients");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(3),
          "throughput and publish: the measured window");
ABSL_FLAG(absl::Duration, warmup, absl::Seconds(1),
          "throughput and publish: before the window");
ABSL_FLAG(int, rounds, 20, "latency rows: samples");
ABSL_FLAG(absl::Duration, poll, absl::Milliseconds(1),
          "latency rows: the pause between two polls");
ABSL_FLAG(int, server_pid, 0, "hubd's pid: its CPU per op (throughput)");
ABSL_FLAG(std::string, store, "", "printed as the row's store");
ABSL_FLAG(bool, worker_child, false,
          "internal: the dead_worker row's worker process");
ABSL_FLAG(std::string, agent, "", "internal: the child's agent id");
ABSL_FLAG(std::string, job, "", "internal: the job the child claims");

namespace {

using hub::client::CallOptions;
using hub::client::HubClient;
using hub::client::HubClientOptions;
using hub::client::PresenceCallbacks;
using hub::client::PresenceSession;
using hub::client::PresenceSessionOptions;

// Every agent and job of a run is in this project.
constexpr char kProject[] = "prj_hubbenchjobs0000000000";
constexpr char kCapability[] = "hubbench-jobs";

int Fail(const std::string& what) {
  std::fprintf(stderr, "jobs: %s\n", what.c_str());
  return 1;
}

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

std::unique_ptr<HubClient> Connect(const std::string& addr) {
  HubClientOptions options;
  options.address = addr;
  return std::make_unique<HubClient>(options);
}

// An attached agent of the run's project with the pool's capability, that
// acknowledges every message (the job notices: results of its jobs).
std::unique_ptr<PresenceSession> Attach(const HubClient* client,
                                        const std::string& agent_id,
                                        std::string* error) {
  PresenceSessionOptions options;
  options.registration.set_agent_id(agent_id);
  options.registration.set_cli(hub::v1::AGENT_CLI_CLAUDE);
  options.registration.set_project_id(kProject);
  options.registration.add_capabilities(kCapability);
  options.deregister_on_stop = false;
  PresenceCallbacks callbacks;
  callbacks.on_message = [](const hub::v1::MessageDelivery&) { return true; };
  auto session =
      std::make_unique<PresenceSession>(client, options, std::move(callbacks));
  absl::Status s = session->Start();
  if (s.ok()) s = session->AwaitAttached(absl::Seconds(30));
  if (!s.ok()) {
    *error = absl::StrCat(agent_id, " did not attach: ", s.ToString());
    return nullptr;
  }
  return session;
}

// A job for any agent of the pool, supervised by `supervisor`.
hub::v1::CreateJobRequest JobRequest(const std::string& supervisor) {
  hub::v1::CreateJobRequest r;
  r.set_project_id(kProject);
  r.mutable_supervisor()->set_agent_id(supervisor);
  r.mutable_worker()->mutable_pool()->add_capabilities(kCapability);
  r.set_task("hubbench");
  (*r.mutable_payload()->mutable_fields())["n"].set_number_value(1);
  return r;
}

absl::StatusOr<hub::v1::Job> Claim(const HubClient& client,
                                   const std::string& agent,
                                   const std::string& job_id = "") {
  hub::v1::ClaimJobRequest r;
  r.set_agent_id(agent);
  r.set_project_id(kProject);
  r.set_job_id(job_id);
  auto response = client.ClaimJob(r);
  if (!response.ok()) return response.status();
  return response->job();
}

absl::Status Complete(const HubClient& client, const hub::v1::Job& job) {
  hub::v1::CompleteJobRequest r;
  *r.mutable_attempt() = job.attempt();
  (*r.mutable_result()->mutable_fields())["ok"].set_bool_value(true);
  return client.CompleteJob(r).status();
}

// Polls ClaimJob of `job_id` for `agent` until it succeeds: the time of the
// successful answer. JOB_NOT_CLAIMABLE is the expected refusal until then.
absl::StatusOr<absl::Time> ClaimWhenClaimable(const HubClient& client,
                                              const std::string& agent,
                                              const std::string& job_id,
                                              absl::Duration give_up,
                                              hub::v1::Job* claimed) {
  const absl::Time until = absl::Now() + give_up;
  const absl::Duration pause = absl::GetFlag(FLAGS_poll);
  while (absl::Now() < until) {
    auto job = Claim(client, agent, job_id);
    if (job.ok()) {
      *claimed = *job;
      return absl::Now();
    }
    if (hub::client::ReasonOf(job.status()) != "JOB_NOT_CLAIMABLE") {
      return job.status();
    }
    absl::SleepFor(pause);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      job_id, " not claimable within ", absl::FormatDuration(give_up)));
}

struct Samples {
  std::vector<double> ms;
  std::string Json(const std::string& head) {
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) {
      return ms[std::min(ms.size() - 1, static_cast<size_t>(q * ms.size()))];
    };
    return absl::StrCat(head, ",\"status\":\"ok\",\"samples\":", ms.size(),
                        ",\"p50_ms\":", at(0.5), ",\"p99_ms\":", at(0.99),
                        ",\"min_ms\":", ms.front(), ",\"max_ms\":", ms.back(),
                        "}");
  }
};

// ---- the worker child (dead_worker) ----

int RunWorkerChild(const std::string& addr) {
  auto client = Connect(addr);
  std::string error;
  auto session = Attach(client.get(), absl::GetFlag(FLAGS_agent), &error);
  if (session == nullptr) return Fail(error);
  hub::v1::ClaimJobRequest r;
  r.set_agent_id(absl::GetFlag(FLAGS_agent));
  r.set_project_id(kProject);
  r.set_job_id(absl::GetFlag(FLAGS_job));
  r.set_presence_generation(session->generation());
  auto claimed = client->ClaimJob(r);
  if (!claimed.ok() || !claimed->has_job()) {
    return Fail(absl::StrCat("child claim: ", claimed.status().ToString()));
  }
  std::printf("claimed %lld\n",
              static_cast<long long>(claimed->job().attempt().attempt()));
  std::fflush(stdout);
  for (;;) pause();  // until SIGKILL
}

// Starts this binary as a worker that claims `job_id`; returns its pid once
// it printed that it holds the attempt, or -1.
pid_t SpawnWorker(const std::string& addr, const std::string& agent,
                  const std::string& job_id) {
  std::vector<std::string> args = {
      "/proc/self/exe", "--worker_child", absl::StrCat("--addr=", addr),
      absl::StrCat("--agent=", agent), absl::StrCat("--job=", job_id)};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  const pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  const absl::Time give_up = absl::Now() + absl::Seconds(30);
  while (out.find('\n') == std::string::npos && absl::Now() < give_up) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char chunk[256];
    const ssize_t n = read(fds[0], chunk, sizeof(chunk));
    if (n <= 0) break;
    out.append(chunk, static_cast<size_t>(n));
  }
  close(fds[0]);
  if (out.rfind("claimed ", 0) != 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

// ---- rows ----

std::string Head(const std::string& workload, const std::string& layout) {
  return absl::StrCat("{\"target\":\"hub\",\"store\":\"",
                      absl::GetFlag(FLAGS_store), "\",\"workload\":\"",
                      workload, "\",\"layout\":\"", layout, "\"");
}

int RunThroughput(const std::string& addr, int workers) {
  const std::string head = Head("throughput", absl::StrCat("c", workers));
  auto channels =
      hubbench::ConnectChannels(addr, workers, absl::Now() + absl::Seconds(30));
  if (!channels.ok()) return Fail(channels.status().ToString());
  std::vector<std::unique_ptr<HubClient>> clients;
  std::vector<std::unique_ptr<PresenceSession>> sessions;
  const std::string run = absl::StrCat(getpid());
  for (int i = 0; i < workers; ++i) {
    clients.push_back(
        std::make_unique<HubClient>((*channels)[i], HubClientOptions{}));
    std::string error;
    sessions.push_back(
        Attach(clients.back().get(), absl::StrCat("jw-", run, "-", i), &error));
    if (sessions.back() == nullptr) return Fail(error);
  }
  const hubbench::Window window = hubbench::Window::FromNow(
      absl::GetFlag(FLAGS_warmup), absl::GetFlag(FLAGS_duration));
  hubbench::ServerSampler sampler(absl::GetFlag(FLAGS_server_pid), window);
  std::vector<hubbench::LatencySamples> latency(workers);
  // Each call of the cycle on its own: create, claim, complete.
  std::vector<std::array<hubbench::LatencySamples, 3>> calls(workers);
  std::vector<int64_t> done(workers, 0), empty(workers, 0);
  std::vector<std::string> errors(workers);
  std::vector<std::thread> threads;
  for (int i = 0; i < workers; ++i) {
    threads.emplace_back([&, i] {
      const HubClient& client = *clients[i];
      const std::string agent = absl::StrCat("jw-", run, "-", i);
      const hub::v1::CreateJobRequest create = JobRequest(agent);
      while (absl::Now() < window.end) {
        const absl::Time start = absl::Now();
        auto created = client.CreateJob(create);
        const absl::Time t_created = absl::Now();
        if (!created.ok()) {
          errors[i] = "CreateJob: " + created.status().ToString();
          return;
        }
        auto job = Claim(client, agent);
        const absl::Time t_claimed = absl::Now();
        if (!job.ok()) {
          errors[i] = "ClaimJob: " + job.status().ToString();
          return;
        }
        if (job->job_id().empty()) {  // the others took every queued job
          if (window.Contains(absl::Now())) ++empty[i];
          continue;
        }
        absl::Status s = Complete(client, *job);
        if (!s.ok()) {
          errors[i] = "CompleteJob: " + s.ToString();
          return;
        }
        const absl::Time end = absl::Now();
        if (window.Contains(end)) {
          ++done[i];
          latency[i].Add(end - start);
          calls[i][0].Add(t_created - start);
          calls[i][1].Add(t_claimed - t_created);
          calls[i][2].Add(end - t_claimed);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  hubbench::Result result;
  result.ops = 0;
  for (int i = 0; i < workers; ++i) {
    result.ops += done[i];
    if (i > 0) {
      latency[0].Merge(latency[i]);
      for (int c = 0; c < 3; ++c) calls[0][c].Merge(calls[i][c]);
    }
    if (!errors[i].empty()) return Fail(errors[i]);
  }
  sampler.Fill(&result);
  int64_t empties = 0;
  for (int64_t e : empty) empties += e;
  for (auto& s : sessions) s->Stop();
  // hubd's busiest threads over the window, CPU µs per cycle.
  std::string busiest;
  for (size_t t = 0; t < result.server_threads.size() && t < 6; ++t) {
    absl::StrAppend(
        &busiest, t ? "," : "", "\"", result.server_threads[t].name,
        "\":", static_cast<int>(result.server_threads[t].us_per_op));
  }
  std::printf(
      "%s,\"status\":\"ok\",\"ops\":%lld,\"ops_per_s\":%.1f,"
      "\"p50_us\":%.0f,\"p99_us\":%.0f,\"create_p50_us\":%.0f,"
      "\"claim_p50_us\":%.0f,\"complete_p50_us\":%.0f,"
      "\"empty_claims\":%lld,\"server_us_per_op\":%.1f,"
      "\"server_threads\":{%s}}\n",
      head.c_str(), static_cast<long long>(result.ops),
      result.ops / window.Seconds(), latency[0].Quantile(0.5),
      latency[0].Quantile(0.99), calls[0][0].Quantile(0.5),
      calls[0][1].Quantile(0.5), calls[0][2].Quantile(0.5),
      static_cast<long long>(empties), result.server_us_per_op,
      busiest.c_str());
  return 0;
}

int RunPublish(const std::string& addr, int workers) {
  hubbench::PublishConfig config;
  config.addr = addr;
  config.run_id = absl::StrCat("jp", getpid());
  config.to = "agent";
  config.clients = workers;
  config.warmup = absl::GetFlag(FLAGS_warmup);
  config.duration = absl::GetFlag(FLAGS_duration);
  config.server_pid = absl::GetFlag(FLAGS_server_pid);
  hubbench::Result result;
  result.target = "hub";
  result.workload = "publish";
  result.layout = absl::StrCat("agent/c", workers);
  hubbench::RunHubPublish(config, &result);
  if (result.status != "ok") return Fail(result.ToJson());
  std::printf(
      "%s,\"status\":\"ok\",\"ops\":%lld,\"ops_per_s\":%.1f,"
      "\"p50_us\":%.0f,\"p99_us\":%.0f,\"server_us_per_op\":%.1f}\n",
      Head("publish", result.layout).c_str(),
      static_cast<long long>(result.ops), result.ops_per_s, result.p50_us,
      result.p99_us, result.server_us_per_op);
  return 0;
}

// The latency rows: `round` sets up a job held by a worker, ends the
// attempt its way and returns the time the clock starts; the taker then
// claims the job (or, for deadline, the round returns its own sample).
int RunLatency(const std::string& addr, const std::string& workload) {
  auto client = Connect(addr);
  const std::string run = absl::StrCat(getpid());
  const std::string taker = absl::StrCat("jt-", run);
  std::string error;
  auto taker_session = Attach(client.get(), taker, &error);
  if (taker_session == nullptr) return Fail(error);
  const int rounds = absl::GetFlag(FLAGS_rounds);
  Samples samples;
  std::string layout = absl::StrCat("r", rounds);
  for (int round = 0; round < rounds; ++round) {
    const std::string worker = absl::StrCat("jx-", run, "-", round);
    hub::v1::CreateJobRequest create = JobRequest(taker);
    create.set_max_attempts(3);
    create.mutable_retry_policy()->mutable_initial_backoff();  // 0 s
    std::string job_id;
    absl::Time start;
    if (workload == "dead_worker") {
      auto created = client->CreateJob(create);
      if (!created.ok()) return Fail(created.status().ToString());
      job_id = created->job().job_id();
      const pid_t pid = SpawnWorker(addr, worker, job_id);
      if (pid < 0) return Fail("the worker child did not claim its job");
      absl::SleepFor(absl::Milliseconds(100));
      start = absl::Now();
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    } else if (workload == "fail" || workload == "deregister") {
      auto session = Attach(client.get(), worker, &error);
      if (session == nullptr) return Fail(error);
      auto created = client->CreateJob(create);
      if (!created.ok()) return Fail(created.status().ToString());
      job_id = created->job().job_id();
      auto held = Claim(*client, worker, job_id);
      if (!held.ok()) return Fail(held.status().ToString());
      start = absl::Now();
      if (workload == "fail") {
        hub::v1::FailJobRequest r;
        *r.mutable_attempt() = held->attempt();
        r.mutable_error()->set_reason("bench_retry");
        r.mutable_error()->set_retryable(true);
        auto failed = client->FailJob(r);
        if (!failed.ok()) return Fail(failed.status().ToString());
      } else {
        hub::v1::DeregisterRequest r;
        r.set_agent_id(worker);
        r.set_presence_generation(session->generation());
        auto gone = client->Deregister(r);
        if (!gone.ok()) return Fail(gone.status().ToString());
      }
      session->Stop();
    } else if (workload == "child") {
      auto session = Attach(client.get(), worker, &error);
      if (session == nullptr) return Fail(error);
      auto parent = client->CreateJob(create);
      if (!parent.ok()) return Fail(parent.status().ToString());
      hub::v1::CreateJobRequest child = create;
      child.add_depends_on(parent->job().job_id());
      auto created = client->CreateJob(child);
      if (!created.ok()) return Fail(created.status().ToString());
      job_id = created->job().job_id();
      auto held = Claim(*client, worker, parent->job().job_id());
      if (!held.ok()) return Fail(held.status().ToString());
      start = absl::Now();
      absl::Status s = Complete(*client, *held);
      if (!s.ok()) return Fail(s.ToString());
      session->Stop();
    } else if (workload == "deadline") {
      layout = absl::StrCat("timeout1s/r", rounds);
      auto session = Attach(client.get(), worker, &error);
      if (session == nullptr) return Fail(error);
      create.set_max_attempts(1);
      create.mutable_timeout()->set_seconds(1);
      auto created = client->CreateJob(create);
      if (!created.ok()) return Fail(created.status().ToString());
      job_id = created->job().job_id();
      auto held = Claim(*client, worker, job_id);
      if (!held.ok()) return Fail(held.status().ToString());
      const absl::Time deadline = FromProto(held->deadline());
      const absl::Duration pause = absl::GetFlag(FLAGS_poll);
      const absl::Time give_up = deadline + absl::Seconds(30);
      absl::Time seen = absl::InfiniteFuture();
      absl::SleepFor(deadline - absl::Now() - absl::Milliseconds(20));
      while (absl::Now() < give_up) {
        hub::v1::GetJobRequest g;
        g.set_job_id(job_id);
        auto got = client->GetJob(g);
        if (!got.ok()) return Fail(got.status().ToString());
        if (got->job().state() == hub::v1::JOB_STATE_TIMED_OUT) {
          seen = absl::Now();
          break;
        }
        absl::SleepFor(pause);
      }
      if (seen == absl::InfiniteFuture()) return Fail("no timed_out");
      samples.ms.push_back(absl::ToDoubleMilliseconds(seen - deadline));
      session->Stop();
      continue;
    } else {
      return Fail("unknown --workload " + workload);
    }
    hub::v1::Job claimed;
    auto at =
        ClaimWhenClaimable(*client, taker, job_id, absl::Seconds(60), &claimed);
    if (!at.ok()) return Fail(at.status().ToString());
    samples.ms.push_back(absl::ToDoubleMilliseconds(*at - start));
    absl::Status s = Complete(*client, claimed);
    if (!s.ok()) return Fail(s.ToString());
    std::fprintf(stderr, "jobs: %s round %d: %.1f ms (attempt %lld)\n",
                 workload.c_str(), round, samples.ms.back(),
                 static_cast<long long>(claimed.attempt().attempt()));
  }
  taker_session->Stop();
  std::printf("%s\n", samples.Json(Head(workload, layout)).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string addr = absl::GetFlag(FLAGS_addr);
  if (addr.empty()) return Fail("--addr is required"), 2;
  if (absl::GetFlag(FLAGS_worker_child)) return RunWorkerChild(addr);
  const std::string workload = absl::GetFlag(FLAGS_workload);
  const int workers = absl::GetFlag(FLAGS_workers);
  if (workload == "throughput") return RunThroughput(addr, workers);
  if (workload == "publish") return RunPublish(addr, workers);
  return RunLatency(addr, workload);
}
