// Measurement plumbing shared by every hubbench workload: the time window a
// run counts, latency samples and their percentiles, one machine-readable
// result line, per-connection channels, and a server process's memory and
// CPU read from /proc. Knows nothing of any target's protocol.
#ifndef TOOLS_HUBBENCH_BENCH_H_
#define TOOLS_HUBBENCH_BENCH_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace hubbench {

// The part of a closed-loop run that counts: completions in [start, end).
// The warm-up before `start` lets connections and caches settle.
struct Window {
  absl::Time start;
  absl::Time end;

  // A window of `duration` that opens `warmup` from now.
  static Window FromNow(absl::Duration warmup, absl::Duration duration);
  bool Contains(absl::Time t) const { return t >= start && t < end; }
  double Seconds() const { return absl::ToDoubleSeconds(end - start); }
};

// One result line. Fields left at their defaults are not printed.
struct Result {
  std::string target;    // "hub", "noop" or "etcd"
  std::string workload;  // register, heartbeat, idle, cas or publish
  std::string layout;    // e.g. "c64", "s1000/c64", "distinct/c16"
  // "ok"; "not_served" (the target answered UNIMPLEMENTED); "error".
  std::string status = "ok";
  std::string error;  // First error seen, when any.
  int clients = 0;
  int streams = 0;
  int connections = 0;
  double duration_s = -1;
  int64_t ops = 0;            // Successful operations in the window.
  double ops_per_s = -1;      // ops / duration_s.
  int64_t attempts = 0;       // cas: attempts (successes + lost races).
  int64_t lost = 0;           // cas: attempts that lost a race.
  int64_t dup_versions = -1;  // cas: successes that reused a version.
  int64_t errors = 0;         // Failed calls or streams.
  double p50_us = -1;
  double p99_us = -1;
  int64_t rss_before_kib = -1;  // idle: server VmRSS before opening streams.
  int64_t rss_kib = -1;         // idle: server VmRSS holding them.
  double per_stream_kib = -1;   // idle: (rss - rss_before) / streams.
  double cpu_pct = -1;      // idle: server CPU over the window, % of one core.
  int64_t deliveries = -1;  // publish: messages that reached a stream.
  // publish: messages that reached a stream and whose acks were not
  // answered 200 ms after the window (the recipient's acks fell behind).
  int64_t unacked = -1;
  double delivery_p50_us = -1;  // publish: publish-to-arrival latency.
  double delivery_p99_us = -1;
  int64_t late = -1;  // paced publish: slots with every publisher busy.
  // With --server_pid, every row but idle: the server's CPU over the
  // measured window per successful operation (utime + stime of the whole
  // process), and its resident memory at the window's end and at its peak.
  double server_us_per_op = -1;
  int64_t server_rss_kib = -1;
  int64_t server_hwm_kib = -1;
  // The same window per thread name (threads of one name summed, busiest
  // first; idle ones left out): CPU and context switches (voluntary and
  // not) per operation, and the process's switches per operation.
  struct ServerThread {
    std::string name;
    double us_per_op = 0;
    double switches_per_op = 0;
  };
  std::vector<ServerThread> server_threads;
  double server_switches_per_op = -1;

  // One line of JSON, no trailing newline.
  std::string ToJson() const;
};

// Latency samples in microseconds. Not thread-safe: one per client or
// stream, merged after the run.
class LatencySamples {
 public:
  void Add(absl::Duration latency) {
    samples_.push_back(absl::ToDoubleMicroseconds(latency));
  }
  void Merge(const LatencySamples& other);
  size_t size() const { return samples_.size(); }
  // The q-quantile (0 < q < 1) by nearest rank, or -1 with no samples.
  // Sorts the samples.
  double Quantile(double q);

 private:
  std::vector<double> samples_;
};

// `n` channels to `address`, each with its own TCP connection: a local
// subchannel pool and a channel argument unique to the channel keep gRPC from
// sharing one connection between them. `address` may list several hubs
// ("a:1,b:2": hubs sharing one database): channel i goes to the (i mod
// count)-th. Waits until every channel is connected or `deadline` passes
// (an error then).
absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> ConnectChannels(
    const std::string& address, int n, absl::Time deadline);

// Resident memory of process `pid` (VmRSS in /proc/<pid>/status), KiB.
absl::StatusOr<int64_t> ReadRssKib(int pid);

// Peak resident memory of process `pid` (VmHWM), KiB.
absl::StatusOr<int64_t> ReadPeakRssKib(int pid);

// CPU time process `pid` has used (utime + stime in /proc/<pid>/stat).
absl::StatusOr<absl::Duration> ReadCpuTime(int pid);

// Reads a server's CPU time at a window's start and end from a thread of its
// own (the load's threads are busy then) and its memory at the end. Does
// nothing for pid <= 0. Not thread-safe.
class ServerSampler {
 public:
  ServerSampler(int pid, const Window& window);
  ~ServerSampler();
  ServerSampler(const ServerSampler&) = delete;
  ServerSampler& operator=(const ServerSampler&) = delete;

  // Waits for the window's end; sets the server_* fields of `result` from
  // result->ops (left unset when the process could not be read).
  void Fill(Result* result);
  // Waits for the window's end: the CPU time the server used over it and
  // its resident memory (KiB) at the end, or why it could not be read.
  absl::StatusOr<std::pair<absl::Duration, int64_t>> CpuAndRss();

 private:
  const int pid_;
  std::thread thread_;
  // Per thread id: its name, CPU time and context switches so far.
  struct Task {
    std::string name;
    absl::Duration cpu;
    int64_t switches = 0;
  };
  std::map<int, Task> tasks_start_, tasks_end_;
  absl::StatusOr<absl::Duration> cpu_start_ = absl::UnknownError("unread");
  absl::StatusOr<absl::Duration> cpu_end_ = absl::UnknownError("unread");
  absl::StatusOr<int64_t> rss_ = absl::UnknownError("unread");
  absl::StatusOr<int64_t> hwm_ = absl::UnknownError("unread");

  static std::map<int, Task> ReadTasks(int pid);
};

// Runs fn(i) for i in [0, n) on up to `threads` threads; returns the first
// error. For setup that is a blocking RPC per client or stream.
absl::Status ParallelFor(int n, int threads,
                         const std::function<absl::Status(int)>& fn);

}  // namespace hubbench

#endif  // TOOLS_HUBBENCH_BENCH_H_
