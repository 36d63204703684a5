// Durable write throughput of SqliteStore: group commit against one
// transaction per write, at several numbers of concurrent callers, and the
// disk's raw fsync rate (the physical limit for one-sync-per-write).
//
//   bazel run -c opt //storage:store_bench -- --dir=/var/tmp --seconds=2
//       --runs=5 --callers=1,16,64 --workloads=message,lease,checkpoint
//
// Each configuration runs --runs times for --seconds on a fresh database in
// --dir with synchronous=FULL; the median rate is printed. A write is
// InsertMessage with one recipient (a messages row and a message_inbox row),
// or a generation-fenced lease refresh; acknowledged only after its group
// committed. A message's id, correlation id and trace id are new UUIDv7s, as
// hubd's Publish writes them when the client gives none: each one sorts after
// the last, so every index on them grows at its right edge.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "storage/sqlite/sqlite_store.h"

ABSL_FLAG(std::string, dir, "/var/tmp", "directory for the database files");
ABSL_FLAG(double, seconds, 2.0, "duration of each run");
ABSL_FLAG(int, runs, 5, "runs per configuration (the median is reported)");
ABSL_FLAG(std::string, callers, "1,16,64", "concurrent callers to measure");
ABSL_FLAG(std::string, workloads, "message,lease,checkpoint",
          "message: InsertMessage with one recipient (2 rows and 5 index "
          "entries); lease: RefreshLeaseForGeneration (1 fenced UPDATE); "
          "checkpoint: CheckpointLeases of 64 agents (64 fenced UPDATEs, "
          "counted as 64 writes)");

namespace hub::storage {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

void RemoveDb(const std::string& path) {
  for (const char* ext : {"", "-wal", "-shm"}) {
    unlink(absl::StrCat(path, ext).c_str());
  }
}

struct RunResult {
  double writes_per_second = 0;
  double ops_per_group = 0;
};

enum class Workload { kMessage, kLease, kCheckpoint };
constexpr int kCheckpointBatch = 64;

// Performs one call; returns how many rows it wrote durably.
int WriteOne(SqliteStore& store, Workload workload, int t, int64_t i) {
  if (workload == Workload::kCheckpoint) {
    std::vector<LeaseCheckpoint> batch(kCheckpointBatch);
    for (int k = 0; k < kCheckpointBatch; ++k) {
      batch[k].agent_id = absl::StrCat("agent-", t, "-", k);
      batch[k].presence_generation = 1;
      batch[k].last_seen_ms = 1000 + i;
      batch[k].lease_expires_ms = 31'000 + i;
    }
    absl::StatusOr<std::vector<bool>> w =
        store.agents().CheckpointLeases(batch);
    if (!w.ok()) return 0;
    return static_cast<int>(std::count(w->begin(), w->end(), true));
  }
  if (workload == Workload::kLease) {
    absl::StatusOr<PresenceWrite> w = store.agents().RefreshLeaseForGeneration(
        absl::StrCat("agent-", t), 1, 1000 + i, 30'000);
    return w.ok() && w->outcome == PresenceOutcome::kApplied ? 1 : 0;
  }
  MessageRecord m;
  m.id = NewUuidV7();
  m.type = "event";
  m.from_agent = "bench";
  m.to_agent = "agent";
  m.topic = "bench";
  m.ttl_ms = 300'000;
  m.expires_at_ms = 300'000;
  m.correlation_id = NewUuidV7();
  m.trace_id = NewUuidV7();
  return store.messages().InsertMessage(m, {"agent"}).ok() ? 1 : 0;
}

// Writes/s for one run.
RunResult RunWrites(const std::string& path, Workload workload, int callers,
                    int max_group_size, double seconds) {
  RemoveDb(path);
  SqliteStoreOptions options;
  options.path = path;
  options.max_group_size = max_group_size;
  auto store = SqliteStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    std::exit(1);
  }
  for (int t = 0; t < callers && workload != Workload::kMessage; ++t) {
    int per_caller = workload == Workload::kCheckpoint ? kCheckpointBatch : 1;
    for (int k = 0; k < per_caller; ++k) {
      AgentRegistration r;
      r.agent_id = workload == Workload::kCheckpoint
                       ? absl::StrCat("agent-", t, "-", k)
                       : absl::StrCat("agent-", t);
      r.cli = "other";
      if (!(*store)->agents().RegisterAgent(r).ok()) std::exit(1);
    }
  }
  GroupCommitWriter::Stats before = (*store)->write_stats();
  std::atomic<bool> stop{false};
  std::atomic<int64_t> done{0}, failed{0};
  std::vector<std::thread> threads;
  Clock::time_point start = Clock::now();
  for (int t = 0; t < callers; ++t) {
    threads.emplace_back([&, t] {
      for (int64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        if (int rows = WriteOne(**store, workload, t, i); rows > 0) {
          done.fetch_add(rows, std::memory_order_relaxed);
        } else {
          failed.fetch_add(1, std::memory_order_relaxed);
        }
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (std::thread& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  if (failed.load() > 0) {
    std::fprintf(stderr, "%lld writes failed\n",
                 static_cast<long long>(failed.load()));
  }
  GroupCommitWriter::Stats after = (*store)->write_stats();
  store->reset();
  RemoveDb(path);
  RunResult result;
  result.writes_per_second = static_cast<double>(done.load()) / elapsed;
  int64_t groups = after.groups - before.groups;
  result.ops_per_group =
      groups > 0 ? static_cast<double>(after.ops - before.ops) / groups : 0;
  return result;
}

// 4 KiB pwrite + fdatasync per iteration, in the same directory.
double RunFsync(const std::string& path, double seconds) {
  int fd = open(path.c_str(), O_CREAT | O_TRUNC | O_WRONLY, 0644);
  if (fd < 0) {
    std::perror("open");
    std::exit(1);
  }
  std::string block(4096, 'x');
  int64_t n = 0;
  Clock::time_point start = Clock::now();
  double elapsed = 0;
  while (elapsed < seconds) {
    if (pwrite(fd, block.data(), block.size(), (n % 16) * 4096) < 0 ||
        fdatasync(fd) != 0) {
      std::perror("write/fdatasync");
      std::exit(1);
    }
    ++n;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  close(fd);
  unlink(path.c_str());
  return static_cast<double>(n) / elapsed;
}

int Main() {
  const std::string dir = absl::GetFlag(FLAGS_dir);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const int runs = std::max(1, absl::GetFlag(FLAGS_runs));
  std::vector<int> callers;
  for (absl::string_view c :
       absl::StrSplit(absl::GetFlag(FLAGS_callers), ',')) {
    int n = 0;
    if (absl::SimpleAtoi(c, &n) && n > 0) callers.push_back(n);
  }
  const std::string db = dir + "/hub_store_bench.db";

  std::vector<double> fsync_rates;
  for (int r = 0; r < runs; ++r) {
    fsync_rates.push_back(RunFsync(dir + "/hub_fsync_bench.bin", seconds));
  }
  std::printf(
      "raw fsync (4 KiB pwrite + fdatasync)  %9.0f /s  (medians of %d runs "
      "of %.1f s)\n",
      Median(fsync_rates), runs, seconds);
  std::fflush(stdout);
  for (absl::string_view workload :
       absl::StrSplit(absl::GetFlag(FLAGS_workloads), ',')) {
    Workload w = workload == "lease"        ? Workload::kLease
                 : workload == "checkpoint" ? Workload::kCheckpoint
                                            : Workload::kMessage;
    std::printf("workload %s\n", std::string(workload).c_str());
    for (int n : callers) {
      std::vector<double> single, group, group_size;
      for (int r = 0; r < runs; ++r) {
        single.push_back(RunWrites(db, w, n, 1, seconds).writes_per_second);
        RunResult g = RunWrites(db, w, n, 512, seconds);
        group.push_back(g.writes_per_second);
        group_size.push_back(g.ops_per_group);
      }
      double s = Median(single), g = Median(group);
      std::printf("  callers %-3d one txn per call  %9.0f writes/s\n", n, s);
      std::printf(
          "  callers %-3d group commit      %9.0f writes/s  (%.1fx, %.1f "
          "calls/group)\n",
          n, g, g / s, Median(group_size));
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace hub::storage

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  // As hubd does: Debian's Abseil checks every Mutex acquisition against a
  // global lock graph by default, which a server does not pay.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  return hub::storage::Main();
}
