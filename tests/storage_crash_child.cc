// Child process for storage_crash_test: performs acknowledged writes until it
// is killed. After each write call returns OK it prints one line to stdout:
//   "m <message id>"   a message insert was acknowledged
//   "r <epoch>"        a role reservation was acknowledged at that epoch
// A line is written with one write(2) of less than PIPE_BUF bytes, so the
// parent never sees a torn line.
//
// Usage: storage_crash_child <db path> <run number> <writer threads>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/sqlite/sqlite_store.h"

namespace {

void Emit(const std::string& line) {
  std::string out = line + "\n";
  if (write(STDOUT_FILENO, out.data(), out.size()) !=
      static_cast<ssize_t>(out.size())) {
    _exit(3);
  }
}

void WriteMessages(hub::storage::SqliteStore* store, const std::string& run,
                   int thread) {
  for (int64_t i = 0;; ++i) {
    hub::MessageRecord m;
    m.id = absl::StrCat(run, "-", thread, "-", i);
    m.type = "event";
    m.from_agent = "crash-child";
    m.to_agent = "agent";
    m.topic = "crash";
    m.ttl_ms = 600'000;
    m.created_at_ms = 1;
    m.expires_at_ms = 600'001;
    m.correlation_id = m.id;
    m.trace_id = m.id;
    m.payload_json = absl::StrCat("{\"i\":", i, "}");
    if (store->messages().InsertMessage(m, {"agent"}).ok()) Emit("m " + m.id);
  }
}

void ReserveRoles(hub::storage::SqliteStore* store) {
  while (true) {
    hub::storage::RoleReservation r;
    r.role_key_wire = "rk2.crash";
    r.project_id = "prj_crash";
    r.role_kind = "cto";
    absl::StatusOr<hub::storage::RoleWrite> w = store->roles().ReserveRole(r);
    if (w.ok() && w->outcome == hub::storage::RoleOutcome::kApplied) {
      Emit(absl::StrCat("r ", w->role->epoch));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <db> <run> <threads>\n", argv[0]);
    return 2;
  }
  hub::storage::SqliteStoreOptions options;
  options.path = argv[1];
  auto store = hub::storage::SqliteStore::Open(options);
  if (!store.ok()) {
    std::fprintf(stderr, "open: %s\n", store.status().ToString().c_str());
    return 1;
  }
  Emit("ready");
  std::vector<std::thread> threads;
  int n = std::atoi(argv[3]);
  for (int t = 0; t < n; ++t) {
    threads.emplace_back(WriteMessages, store->get(), argv[2], t);
  }
  threads.emplace_back(ReserveRoles, store->get());
  for (std::thread& t : threads) t.join();  // never: killed by the parent
  return 0;
}
