#include "tools/hubbench/bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace hubbench {
namespace {

// JSON string literal: quotes, backslashes and control characters escaped.
std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      absl::StrAppend(&out, "\\", std::string(1, c));
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&out, " ");
    } else {
      out.push_back(c);
    }
  }
  return out + "\"";
}

std::string Number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string Number2(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f", v);
  return buf;
}

}  // namespace

Window Window::FromNow(absl::Duration warmup, absl::Duration duration) {
  const absl::Time start = absl::Now() + warmup;
  return Window{start, start + duration};
}

std::string Result::ToJson() const {
  std::vector<std::string> f;
  f.push_back(absl::StrCat("\"target\":", Quote(target)));
  f.push_back(absl::StrCat("\"workload\":", Quote(workload)));
  f.push_back(absl::StrCat("\"layout\":", Quote(layout)));
  f.push_back(absl::StrCat("\"status\":", Quote(status)));
  if (!error.empty()) f.push_back(absl::StrCat("\"error\":", Quote(error)));
  auto add_int = [&f](const char* name, int64_t v, int64_t absent) {
    if (v != absent) f.push_back(absl::StrCat("\"", name, "\":", v));
  };
  auto add_double = [&f](const char* name, double v) {
    if (v >= 0) f.push_back(absl::StrCat("\"", name, "\":", Number(v)));
  };
  add_int("clients", clients, 0);
  add_int("streams", streams, 0);
  add_int("connections", connections, 0);
  add_double("duration_s", duration_s);
  if (ops_per_s >= 0) add_int("ops", ops, -1);
  add_double("ops_per_s", ops_per_s);
  add_int("attempts", attempts, 0);
  if (attempts > 0) add_int("lost", lost, -1);
  add_int("dup_versions", dup_versions, -1);
  add_int("errors", errors, -1);
  add_double("p50_us", p50_us);
  add_double("p99_us", p99_us);
  add_int("rss_before_kib", rss_before_kib, -1);
  add_int("rss_kib", rss_kib, -1);
  add_double("per_stream_kib", per_stream_kib);
  add_double("cpu_pct", cpu_pct);
  add_int("deliveries", deliveries, -1);
  add_int("unacked", unacked, -1);
  add_double("delivery_p50_us", delivery_p50_us);
  add_double("delivery_p99_us", delivery_p99_us);
  add_int("late", late, -1);
  add_double("server_us_per_op", server_us_per_op);
  add_int("server_rss_kib", server_rss_kib, -1);
  add_int("server_hwm_kib", server_hwm_kib, -1);
  add_double("server_switches_per_op", server_switches_per_op);
  if (!server_threads.empty()) {
    std::vector<std::string> threads;
    for (const ServerThread& t : server_threads) {
      threads.push_back(absl::StrCat(
          "{\"name\":", Quote(t.name), ",\"us_per_op\":", Number(t.us_per_op),
          ",\"switches_per_op\":", Number2(t.switches_per_op), "}"));
    }
    f.push_back(
        absl::StrCat("\"server_threads\":[", absl::StrJoin(threads, ","), "]"));
  }
  std::string out = "{";
  for (size_t i = 0; i < f.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", f[i]);
  }
  return out + "}";
}

void LatencySamples::Merge(const LatencySamples& other) {
  samples_.insert(samples_.end(), other.samples_.begin(), other.samples_.end());
}

double LatencySamples::Quantile(double q) {
  if (samples_.empty()) return -1;
  size_t rank = static_cast<size_t>(std::ceil(q * samples_.size()));
  rank = std::min(std::max<size_t>(rank, 1), samples_.size()) - 1;
  std::nth_element(samples_.begin(), samples_.begin() + rank, samples_.end());
  return samples_[rank];
}

absl::StatusOr<std::vector<std::shared_ptr<grpc::Channel>>> ConnectChannels(
    const std::string& address, int n, absl::Time deadline) {
  const std::vector<std::string> hubs = absl::StrSplit(address, ',');
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  channels.reserve(n);
  for (int i = 0; i < n; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("hubbench.connection_index", i);
    channels.push_back(grpc::CreateCustomChannel(
        hubs[i % hubs.size()], grpc::InsecureChannelCredentials(), args));
    channels.back()->GetState(/*try_to_connect=*/true);
  }
  for (int i = 0; i < n; ++i) {
    if (!channels[i]->WaitForConnected(absl::ToChronoTime(deadline))) {
      return absl::DeadlineExceededError(absl::StrCat(
          "connection ", i, " of ", n, " to ", address, " not up in time"));
    }
  }
  return channels;
}

namespace {

// A "Name:  N kB" line of /proc/<pid>/status, in KiB.
absl::StatusOr<int64_t> ReadStatusKib(int pid, absl::string_view name) {
  const std::string path = absl::StrCat("/proc/", pid, "/status");
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!absl::StartsWith(line, name)) continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int64_t kib = 0;
    if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &kib)) return kib;
  }
  return absl::NotFoundError(absl::StrCat("no ", name, " in ", path));
}

}  // namespace

absl::StatusOr<int64_t> ReadRssKib(int pid) {
  return ReadStatusKib(pid, "VmRSS:");
}

absl::StatusOr<int64_t> ReadPeakRssKib(int pid) {
  return ReadStatusKib(pid, "VmHWM:");
}

namespace {

// utime + stime of a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat file.
absl::StatusOr<absl::Duration> ReadStatCpu(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  // The command name (field 2) may hold spaces: count fields after ')'.
  const std::string stat = text.str();
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path));
  }
  std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(stat).substr(paren + 1), ' ', absl::SkipWhitespace());
  // fields[0] is field 3 (state); utime and stime are fields 14 and 15.
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::NotFoundError(absl::StrCat("malformed ", path));
  }
  const double ticks_per_second = sysconf(_SC_CLK_TCK);
  return absl::Seconds((utime + stime) / ticks_per_second);
}

}  // namespace

absl::StatusOr<absl::Duration> ReadCpuTime(int pid) {
  return ReadStatCpu(absl::StrCat("/proc/", pid, "/stat"));
}

std::map<int, ServerSampler::Task> ServerSampler::ReadTasks(int pid) {
  std::map<int, Task> tasks;
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    int tid = 0;
    if (!absl::SimpleAtoi(entry.path().filename().string(), &tid)) continue;
    const std::string base = entry.path().string();
    absl::StatusOr<absl::Duration> cpu = ReadStatCpu(base + "/stat");
    if (!cpu.ok()) continue;  // the thread ended meanwhile
    Task task;
    task.cpu = *cpu;
    std::ifstream comm(base + "/comm");
    std::getline(comm, task.name);
    std::ifstream status(base + "/status");
    std::string line;
    while (std::getline(status, line)) {
      if (!absl::StrContains(line, "ctxt_switches:")) continue;
      std::vector<absl::string_view> parts =
          absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipWhitespace());
      int64_t n = 0;
      if (parts.size() >= 2 && absl::SimpleAtoi(parts[1], &n)) {
        task.switches += n;
      }
    }
    tasks[tid] = std::move(task);
  }
  return tasks;
}

ServerSampler::ServerSampler(int pid, const Window& window) : pid_(pid) {
  if (pid_ <= 0) return;
  thread_ = std::thread([this, window] {
    absl::SleepFor(window.start - absl::Now());
    cpu_start_ = ReadCpuTime(pid_);
    tasks_start_ = ReadTasks(pid_);
    absl::SleepFor(window.end - absl::Now());
    cpu_end_ = ReadCpuTime(pid_);
    tasks_end_ = ReadTasks(pid_);
    rss_ = ReadRssKib(pid_);
    hwm_ = ReadPeakRssKib(pid_);
  });
}

ServerSampler::~ServerSampler() {
  if (thread_.joinable()) thread_.join();
}

absl::StatusOr<std::pair<absl::Duration, int64_t>> ServerSampler::CpuAndRss() {
  if (thread_.joinable()) thread_.join();
  if (!cpu_start_.ok()) return cpu_start_.status();
  if (!cpu_end_.ok()) return cpu_end_.status();
  if (!rss_.ok()) return rss_.status();
  return std::pair<absl::Duration, int64_t>(*cpu_end_ - *cpu_start_, *rss_);
}

void ServerSampler::Fill(Result* result) {
  if (thread_.joinable()) thread_.join();
  if (rss_.ok()) result->server_rss_kib = *rss_;
  if (hwm_.ok()) result->server_hwm_kib = *hwm_;
  if (cpu_start_.ok() && cpu_end_.ok() && result->ops > 0) {
    result->server_us_per_op =
        absl::ToDoubleMicroseconds(*cpu_end_ - *cpu_start_) / result->ops;
  }
  if (tasks_end_.empty() || result->ops <= 0) return;
  // A thread that ended within the window is missed; one that started in
  // it counts from zero.
  std::map<std::string, std::pair<absl::Duration, int64_t>> by_name;
  int64_t switches = 0;
  for (const auto& [tid, end] : tasks_end_) {
    Task start;
    if (auto it = tasks_start_.find(tid); it != tasks_start_.end()) {
      start = it->second;
    }
    auto& [cpu, n] = by_name[end.name];
    cpu += end.cpu - start.cpu;
    n += end.switches - start.switches;
    switches += end.switches - start.switches;
  }
  const double ops = static_cast<double>(result->ops);
  result->server_switches_per_op = switches / ops;
  for (const auto& [name, used] : by_name) {
    const double us = absl::ToDoubleMicroseconds(used.first) / ops;
    const double n = used.second / ops;
    if (us < 0.05 && n < 0.005) continue;  // prints as nothing
    result->server_threads.push_back({name, us, n});
  }
  std::sort(result->server_threads.begin(), result->server_threads.end(),
            [](const Result::ServerThread& a, const Result::ServerThread& b) {
              return a.us_per_op > b.us_per_op;
            });
}

absl::Status ParallelFor(int n, int threads,
                         const std::function<absl::Status(int)>& fn) {
  std::atomic<int> next{0};
  absl::Mutex mu;
  absl::Status first_error;
  std::vector<std::thread> pool;
  for (int t = 0; t < std::min(n, threads); ++t) {
    pool.emplace_back([&] {
      for (int i = next++; i < n; i = next++) {
        absl::Status status = fn(i);
        if (status.ok()) continue;
        absl::MutexLock lock(&mu);
        if (first_error.ok()) first_error = status;
        next = n;  // Stop handing out work.
      }
    });
  }
  for (std::thread& thread : pool) thread.join();
  return first_error;
}

}  // namespace hubbench
