// Ledger: what the chaos driver's clients saw acknowledged, and the checks of
// a hub's database against it.
//
// Responsible for recording each acknowledged write (registration and its
// generation; role write and its epoch, holder and version; publish; ack)
// and what each recipient was delivered, and for the invariants after a
// fault: nothing acknowledged is missing, no role epoch was handed to two
// holders, no two agents acted as holders of one role at overlapping epochs,
// epochs never go back, every acknowledged publish reached its recipient.
// The database is read through a StoreSnapshot, so the checks are the same
// for SQLite and PostgreSQL. Not responsible for running the load or the
// hubs (load.h, the runs). Thread-safe.
#ifndef TOOLS_CHAOS_LEDGER_H_
#define TOOLS_CHAOS_LEDGER_H_

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "tools/chaos/store_snapshot.h"

namespace hub::chaos {

struct CheckCounts {
  int64_t agents = 0;
  int64_t messages = 0;
  int64_t acks = 0;
  int64_t roles = 0;
  int64_t role_writes = 0;
};

class Ledger {
 public:
  void Registered(const std::string& agent_id, int64_t generation);
  // A reservation that made `holder` the holder of `wire` at `epoch`, the
  // row then at `version`.
  void Reserved(const std::string& wire, int64_t epoch,
                const std::string& holder, int64_t version);
  // A compare-and-set `holder` made as the holder of `wire` at `epoch` (its
  // guards: the epoch and version it was granted or last wrote), the row
  // then at `version`: the holder acting on its authority.
  //
  // Every role write is checked against the others as it is recorded: two
  // writes acknowledged at one version, an epoch below an earlier version's,
  // or two holders at one epoch are violations.
  void Acted(const std::string& wire, int64_t epoch, const std::string& holder,
             int64_t version);
  // An activation `holder` accepted and the hub confirmed (its ACK's answer
  // not idempotent): `holder` became the holder of `wire` at `epoch`, the
  // row then at `version`. Checked with the other role writes.
  void Activated(const std::string& wire, int64_t epoch,
                 const std::string& holder, int64_t version);
  void Published(const std::string& message_id, const std::string& recipient);
  // `agent_id` was handed `message_id` (ListPending or a stream).
  void Delivered(const std::string& message_id, const std::string& agent_id);
  // Counts as delivered too.
  void Acked(const std::string& message_id, const std::string& agent_id);

  // Checks the database `read` returns against everything acknowledged
  // before the call; appends one line per violation to `violations`. The
  // acknowledged writes are taken before `read` runs, so hubs may keep
  // writing meanwhile: a write acknowledged (committed) before the call is in
  // any snapshot read after it. Remembers each role's stored epoch so the
  // next check can tell if one went back.
  CheckCounts Check(absl::FunctionRef<absl::StatusOr<StoreSnapshot>()> read,
                    std::vector<std::string>* violations);
  // Every acknowledged publish was delivered to its recipient at least once.
  void CheckDelivered(std::vector<std::string>* violations) const;
  // Acknowledged publishes to `agent_id` it was not delivered yet.
  int64_t Undelivered(const std::string& agent_id) const;

  int64_t acked_registrations() const;
  int64_t acked_reservations() const;
  int64_t acked_acts() const;
  int64_t acked_activations() const;
  int64_t acked_publishes() const;
  int64_t acked_acks() const;

 private:
  enum class WriteKind { kReservation, kAct, kActivation };
  struct RoleWrite {
    int64_t epoch = 0;
    std::string holder;
    WriteKind kind = WriteKind::kReservation;
  };
  static const char* KindName(WriteKind kind);
  void RoleWritten(const std::string& wire, int64_t version, RoleWrite write)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> generations_ ABSL_GUARDED_BY(mu_);
  // wire -> version -> the acknowledged write that produced it.
  std::map<std::string, std::map<int64_t, RoleWrite>> role_writes_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> messages_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<std::string, std::string>> delivered_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<std::string, std::string>> acks_ ABSL_GUARDED_BY(mu_);
  // wire -> the epoch the previous check found stored.
  std::map<std::string, int64_t> stored_epochs_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> violations_ ABSL_GUARDED_BY(mu_);
  int64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t reservations_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t acts_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t activations_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace hub::chaos

#endif  // TOOLS_CHAOS_LEDGER_H_
