// hubbench: closed-loop gRPC load for the hub, the no-op ceiling and etcd.
//
//   hubbench WORKLOAD --target=hub|noop|etcd --addr=host:port [flags]
//
// Workloads (one result line of JSON each on stdout):
//   register   unary registrations/s at --clients (RegisterAgent, noop
//              Unary, etcd LeaseGrant), one call in flight per client.
//   heartbeat  round trips/s and p50/p99 over --streams streams on
//              --connections connections (Attach heartbeat -> lease_ack,
//              noop Stream echo, etcd LeaseKeepAlive), one frame in flight
//              per stream.
//   idle       opens --streams streams on --connections connections, each
//              answered once, holds them, and reads --server_pid's VmRSS
//              before and after and its CPU over --duration.
//   cas        compare-and-set/s at --clients on --keys=distinct|one (hub
//              CompareAndSetRole, etcd Txn on mod_revision, noop Unary).
//   publish    durable publishes/s at --clients to --to=agent|topic|role
//              (topic: --fanout subscribers), and the publish-to-arrival
//              latency on the recipients' presence streams (hub Publish;
//              noop Unary as the ceiling; etcd: not served). With
//              --rate, hub only: that many publishes per second in all,
//              paced (open loop), so the latencies are those of a hub under
//              that load rather than flat out; --recipient_addr puts the
//              recipients' streams on another hub than the publishers'.
//   lock       lock round trips/s at --clients, each client on a lock of
//              its own: take it, release it (hub Reserve +
//              ReleaseReservation of one path, etcd v3lock Lock + Unlock,
//              noop two Unary echoes).
// A target answering UNIMPLEMENTED yields status "not_served" (exit 0);
// other failures status "error" (exit 2).
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "tools/hubbench/bench.h"
#include "tools/hubbench/publish.h"
#include "tools/hubbench/targets.h"

ABSL_FLAG(std::string, target, "noop", "hub, noop or etcd");
ABSL_FLAG(std::string, addr, "", "the target's host:port");
ABSL_FLAG(int, clients, 16, "register, cas: concurrent clients");
ABSL_FLAG(int, streams, 1, "heartbeat, idle: streams");
ABSL_FLAG(int, connections, 0,
          "TCP connections (one channel each); 0: one per client or stream");
ABSL_FLAG(std::string, keys, "distinct",
          "cas: distinct (one key per client) or one (all clients, one key)");
ABSL_FLAG(absl::Duration, duration, absl::Seconds(3),
          "measured window (idle: the CPU window); at most 120s");
ABSL_FLAG(absl::Duration, warmup, absl::Milliseconds(500),
          "closed-loop time before the window opens");
ABSL_FLAG(absl::Duration, settle, absl::Seconds(1),
          "idle: wait between the last stream's answer and reading VmRSS");
ABSL_FLAG(std::string, to, "agent",
          "publish: agent (one recipient), topic (--fanout subscribers) or "
          "role (its active holder)");
ABSL_FLAG(int, fanout, 10, "publish --to=topic: subscribers");
ABSL_FLAG(int, payload_bytes, 0,
          "publish: a string of this many bytes in each payload (and in the "
          "ceiling's echo), besides the send time; at most 65536");
ABSL_FLAG(double, rate, 0,
          "publish (hub): publishes per second in all, paced over the "
          "publishers (open loop); 0: each publisher flat out");
ABSL_FLAG(std::string, recipient_addr, "",
          "publish (hub): the host:port the recipients attach to (default: "
          "--addr's)");
ABSL_FLAG(int, server_pid, 0,
          "the server process to read in /proc: idle rows need it; other rows "
          "then also report its CPU per operation and memory");
ABSL_FLAG(int, setup_threads, 16, "threads for blocking per-client setup");
ABSL_FLAG(std::string, run_id, "",
          "8 characters [A-Za-z0-9] keeping this run's agent ids and role "
          "keys apart; default: from the pid and the clock");

namespace hubbench {
namespace {

constexpr absl::Duration kMaxDuration = absl::Seconds(120);
constexpr absl::Duration kSetupTimeout = absl::Seconds(120);

struct Config {
  std::string workload;
  std::string target;
  std::string addr;
  int clients;
  int streams;
  int connections;
  absl::Duration duration;
  absl::Duration warmup;
};

// Marks `result` from a failure: UNIMPLEMENTED means the target does not
// serve this workload's RPC yet.
void SetFailure(const absl::Status& status, Result* result) {
  if (absl::IsUnimplemented(status)) {
    result->status = "not_served";
    result->error = absl::StrCat(result->target, " does not serve the ",
                                 result->workload, " RPCs yet");
  } else {
    result->status = "error";
    result->error = status.ToString();
  }
}

absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> Channels(
    const Config& config, int n) {
  return ConnectChannels(config.addr, n, absl::Now() + kSetupTimeout);
}

// Copies a unary loop's totals into `result`. Sorts the latency samples.
void FillUnary(const Window& window, UnaryTotals* totals, Result* result) {
  result->duration_s = window.Seconds();
  result->ops = totals->done;
  result->ops_per_s = totals->done / window.Seconds();
  result->errors = totals->errors;
  result->p50_us = totals->latency.Quantile(0.50);
  result->p99_us = totals->latency.Quantile(0.99);
  if (!totals->first_error.ok()) {
    SetFailure(ToAbsl(totals->first_error), result);
    if (totals->done > 0 && result->status == "error") {
      result->status = "ok";  // Partial failures are counted in `errors`.
    }
  }
}

// The publish row's layout, the same for every target.
std::string PublishLayout(int clients) {
  const std::string to = absl::GetFlag(FLAGS_to);
  return absl::StrCat(
      to, to == "topic" ? absl::StrCat("x", absl::GetFlag(FLAGS_fanout)) : "",
      "/c", clients,
      absl::GetFlag(FLAGS_payload_bytes) > 0
          ? absl::StrCat("/b", absl::GetFlag(FLAGS_payload_bytes))
          : "");
}

// register and cas (and publish on the ceiling): a unary closed loop.
void RunUnary(const Config& config, Target* target, Result* result) {
  const int n = config.clients;
  const int c = config.connections > 0 ? config.connections : n;
  result->clients = n;
  result->connections = c;
  const bool cas = config.workload == "cas";
  const bool lock = config.workload == "lock";
  const bool one_key = absl::GetFlag(FLAGS_keys) == "one";
  result->layout = cas ? absl::StrCat(one_key ? "one" : "distinct", "/c", n)
                       : absl::StrCat("c", n);
  if (config.workload == "publish") result->layout = PublishLayout(n);
  auto channels = Channels(config, c);
  if (!channels.ok()) return SetFailure(channels.status(), result);
  std::vector<std::unique_ptr<UnaryOp>> ops(n);
  absl::Status setup = ParallelFor(
      n, absl::GetFlag(FLAGS_setup_threads), [&](int i) -> absl::Status {
        auto channel = (*channels)[i % c];
        if (lock) {
          auto op = target->NewLockOp(channel, i);
          if (!op.ok()) return op.status();
          ops[i] = *std::move(op);
          return absl::OkStatus();
        }
        if (!cas) {
          ops[i] = target->NewRegisterOp(channel, i);
          return absl::OkStatus();
        }
        auto op = target->NewCasOp(channel, i, one_key ? 0 : i);
        if (!op.ok()) return op.status();
        ops[i] = *std::move(op);
        return absl::OkStatus();
      });
  if (!setup.ok()) return SetFailure(setup, result);
  const Window window = Window::FromNow(config.warmup, config.duration);
  ServerSampler server(absl::GetFlag(FLAGS_server_pid), window);
  UnaryTotals totals = RunUnaryLoop(ops, window, cas && one_key);
  FillUnary(window, &totals, result);
  server.Fill(result);
  if (cas) {
    result->attempts = result->ops + totals.lost;
    result->lost = totals.lost;
    result->dup_versions = totals.dup_versions;
  }
}

// heartbeat and idle: streams, looping or held.
void RunStreams(const Config& config, Target* target, Result* result) {
  const bool hold = config.workload == "idle";
  const int s = config.streams;
  const int c = config.connections > 0 ? config.connections : s;
  result->streams = s;
  result->connections = c;
  result->layout = absl::StrCat("s", s, "/c", c);
  const int pid = absl::GetFlag(FLAGS_server_pid);
  if (hold && pid <= 0) {
    return SetFailure(absl::InvalidArgumentError("idle needs --server_pid"),
                      result);
  }
  // Setup (agent registrations, lease grants) goes over channels of its own
  // and ends before the server's memory baseline: the streams' connections
  // and the streams are what the idle figure counts.
  const int setup_threads = absl::GetFlag(FLAGS_setup_threads);
  auto setup_channels = Channels(config, std::min(setup_threads, s));
  if (!setup_channels.ok()) {
    return SetFailure(setup_channels.status(), result);
  }
  const absl::Duration max_life = config.warmup + config.duration +
                                  absl::GetFlag(FLAGS_settle) + kSetupTimeout;
  StreamBoard board;
  std::vector<std::unique_ptr<PingStreamBase>> streams(s);
  absl::Status setup =
      ParallelFor(s, setup_threads, [&](int i) -> absl::Status {
        auto stream =
            target->NewStream((*setup_channels)[i % setup_channels->size()], i,
                              &board, hold, max_life);
        if (!stream.ok()) return stream.status();
        streams[i] = *std::move(stream);
        return absl::OkStatus();
      });
  if (!setup.ok()) return SetFailure(setup, result);
  if (hold) {
    auto rss = ReadRssKib(pid);
    if (!rss.ok()) return SetFailure(rss.status(), result);
    result->rss_before_kib = *rss;
  }
  auto stream_channels = Channels(config, c);
  if (!stream_channels.ok()) {
    return SetFailure(stream_channels.status(), result);
  }
  for (int i = 0; i < s; ++i) {
    streams[i]->Go((*stream_channels)[i % c]);
  }
  if (!board.WaitEstablished(s, absl::Now() + kSetupTimeout)) {
    board.Failed(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                              "streams not established in time"),
                 false);
  }
  if (board.failed() > 0) {
    board.StopRunning();
    for (auto& stream : streams) stream->Close();
    board.WaitFinished(s, absl::Now() + max_life);
    result->errors = board.failed();
    return SetFailure(ToAbsl(board.first_error()), result);
  }

  const Window window = Window::FromNow(config.warmup, config.duration);
  std::optional<ServerSampler> sampler;  // heartbeat rows
  if (hold) {
    // The CPU window opens once the streams settled; memory is read at
    // its end.
    const Window idle =
        Window::FromNow(absl::GetFlag(FLAGS_settle), config.duration);
    absl::StatusOr<std::pair<absl::Duration, int64_t>> read =
        ServerSampler(pid, idle).CpuAndRss();
    if (read.ok()) {
      const auto [cpu, rss] = *read;
      result->rss_kib = rss;
      result->per_stream_kib =
          static_cast<double>(rss - result->rss_before_kib) / s;
      // FDivDuration: Duration / Duration is an integer quotient.
      result->cpu_pct = 100.0 * absl::FDivDuration(cpu, idle.end - idle.start);
      result->duration_s = idle.Seconds();
    } else {
      SetFailure(absl::NotFoundError(absl::StrCat("server process gone: ",
                                                  read.status().message())),
                 result);
    }
    board.StopRunning();
    for (auto& stream : streams) stream->Close();
  } else {
    board.SetWindow(window);
    sampler.emplace(pid, window);
    absl::SleepFor(window.end - absl::Now());
    board.StopRunning();
  }
  if (!board.WaitFinished(s, absl::Now() + absl::Seconds(30))) {
    std::fprintf(stderr, "hubbench: streams still open 30 s after the end\n");
    std::abort();  // Reactors still reference `board`.
  }
  result->errors = board.failed();
  if (board.failed() > 0 && result->status == "ok") {
    SetFailure(ToAbsl(board.first_error()), result);
  }
  if (hold) return;
  LatencySamples latency;
  for (auto& stream : streams) latency.Merge(stream->latency());
  result->duration_s = window.Seconds();
  result->ops = static_cast<int64_t>(latency.size());
  result->ops_per_s = latency.size() / window.Seconds();
  result->p50_us = latency.Quantile(0.50);
  result->p99_us = latency.Quantile(0.99);
  sampler->Fill(result);
}

// Many connections need many descriptors: take the hard limit.
void RaiseFileLimit() {
  rlimit limit;
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int Main(const std::vector<char*>& args) {
  Config config;
  config.workload = args.size() == 2 ? args[1] : "";
  config.target = absl::GetFlag(FLAGS_target);
  config.addr = absl::GetFlag(FLAGS_addr);
  config.clients = absl::GetFlag(FLAGS_clients);
  config.streams = absl::GetFlag(FLAGS_streams);
  config.connections = absl::GetFlag(FLAGS_connections);
  config.duration = absl::GetFlag(FLAGS_duration);
  config.warmup = absl::GetFlag(FLAGS_warmup);
  std::string run_id = absl::GetFlag(FLAGS_run_id);
  if (run_id.empty()) {
    run_id = absl::StrFormat(
        "%08x", static_cast<uint32_t>(getpid() * 2654435761u ^
                                      absl::ToUnixMicros(absl::Now())));
  }
  const std::string keys = absl::GetFlag(FLAGS_keys);
  const bool known = config.workload == "register" ||
                     config.workload == "heartbeat" ||
                     config.workload == "idle" || config.workload == "cas" ||
                     config.workload == "publish" || config.workload == "lock";
  const std::string to = absl::GetFlag(FLAGS_to);
  const bool run_id_ok =
      run_id.size() == 8 &&
      std::all_of(run_id.begin(), run_id.end(),
                  [](unsigned char ch) { return std::isalnum(ch) != 0; });
  if (!known || config.addr.empty() || !run_id_ok ||
      (keys != "distinct" && keys != "one") ||
      (to != "agent" && to != "topic" && to != "role") ||
      absl::GetFlag(FLAGS_fanout) < 1 ||
      absl::GetFlag(FLAGS_payload_bytes) < 0 ||
      absl::GetFlag(FLAGS_payload_bytes) > 65536 || config.clients < 1 ||
      config.streams < 1 || config.connections < 0 ||
      config.duration <= absl::ZeroDuration() ||
      config.duration > kMaxDuration || config.warmup < absl::ZeroDuration() ||
      config.warmup > kMaxDuration || !(absl::GetFlag(FLAGS_rate) >= 0) ||
      absl::GetFlag(FLAGS_rate) > 1e6 ||
      ((absl::GetFlag(FLAGS_rate) > 0 ||
        !absl::GetFlag(FLAGS_recipient_addr).empty()) &&
       (config.workload != "publish" || config.target != "hub"))) {
    std::fprintf(stderr, "%s\n", absl::ProgramUsageMessage().data());
    return 64;
  }
  std::unique_ptr<Target> target;
  if (config.target == "noop") {
    target = NewNoopTarget(
        config.workload == "publish" ? absl::GetFlag(FLAGS_payload_bytes) : 0);
  } else if (config.target == "etcd") {
    target = NewEtcdTarget();
  } else if (config.target == "hub") {
    target = NewHubTarget(run_id);
  } else {
    std::fprintf(stderr, "hubbench: unknown --target=%s\n",
                 config.target.c_str());
    return 64;
  }
  RaiseFileLimit();
  Result result;
  result.target = config.target;
  result.workload = config.workload;
  if (config.workload == "publish" && config.target == "hub") {
    PublishConfig publish;
    publish.addr = config.addr;
    publish.run_id = run_id;
    publish.to = to;
    publish.fanout = absl::GetFlag(FLAGS_fanout);
    publish.payload_bytes = absl::GetFlag(FLAGS_payload_bytes);
    publish.clients = config.clients;
    publish.connections = config.connections;
    publish.rate = absl::GetFlag(FLAGS_rate);
    publish.recipient_addr = absl::GetFlag(FLAGS_recipient_addr);
    publish.warmup = config.warmup;
    publish.duration = config.duration;
    publish.server_pid = absl::GetFlag(FLAGS_server_pid);
    RunHubPublish(publish, &result);
  } else if (config.workload == "publish" && config.target == "etcd") {
    result.layout = PublishLayout(config.clients);
    SetFailure(absl::UnimplementedError("no publish in etcd"), &result);
  } else if (config.workload == "register" || config.workload == "cas" ||
             config.workload == "publish" || config.workload == "lock") {
    RunUnary(config, target.get(), &result);
  } else {
    RunStreams(config, target.get(), &result);
  }
  std::printf("%s\n", result.ToJson().c_str());
  std::fflush(stdout);
  return result.status == "error" ? 2 : 0;
}

}  // namespace
}  // namespace hubbench

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(absl::StrCat(
      "closed-loop gRPC benchmark of hub, the no-op ceiling and etcd.\n\n"
      "Usage: ",
      argv[0],
      " register|heartbeat|idle|cas|publish|lock --target=hub|noop|etcd "
      "--addr=host:port [--clients=N] [--streams=S --connections=C] "
      "[--keys=distinct|one] [--to=agent|topic|role --fanout=N "
      "--payload_bytes=N] "
      "[--duration=3s] [--server_pid=PID]"));
  return hubbench::Main(absl::ParseCommandLine(argc, argv));
}
