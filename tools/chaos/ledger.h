// Ledger: what the chaos driver's clients saw acknowledged, and the checks of
// a stopped hub's database against it.
//
// Responsible for recording each acknowledged write (registration and its
// generation, reservation and its epoch and holder, publish, ack) and for
// the invariants after a crash: nothing acknowledged is missing, no role
// epoch was handed to two holders, epochs never go back. Not responsible
// for running the load or the hub (chaos_main.cc). Thread-safe.
#ifndef TOOLS_CHAOS_LEDGER_H_
#define TOOLS_CHAOS_LEDGER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace hub::chaos {

struct CheckCounts {
  int64_t agents = 0;
  int64_t messages = 0;
  int64_t acks = 0;
  int64_t roles = 0;
};

class Ledger {
 public:
  void Registered(const std::string& agent_id, int64_t generation);
  // A reservation that made `holder` the holder of `wire` at `epoch`. A
  // second, different holder acknowledged at the same epoch is a violation.
  void Reserved(const std::string& wire, int64_t epoch,
                const std::string& holder);
  void Published(const std::string& message_id, const std::string& recipient);
  void Acked(const std::string& message_id, const std::string& agent_id);

  // Checks the database at `db_path` (the hub stopped) against everything
  // acknowledged so far; appends one line per violation to `violations`.
  // Also remembers each role's stored epoch so the next check can tell if
  // one went back.
  CheckCounts Check(const std::string& db_path,
                    std::vector<std::string>* violations);

  std::vector<std::string> TakeViolations();
  int64_t acked_registrations() const;
  int64_t acked_reservations() const;
  int64_t acked_publishes() const;
  int64_t acked_acks() const;

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> generations_ ABSL_GUARDED_BY(mu_);
  // wire -> epoch -> holder, as acknowledged.
  std::map<std::string, std::map<int64_t, std::string>> epochs_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> messages_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<std::string, std::string>> acks_ ABSL_GUARDED_BY(mu_);
  // wire -> the epoch the previous check found stored.
  std::map<std::string, int64_t> stored_epochs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
  int64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reservations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hub::chaos

#endif  // TOOLS_CHAOS_LEDGER_H_
