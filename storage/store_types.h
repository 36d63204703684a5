// What every store concern shares: the three-way Patch of a column, the
// Callback of an asynchronous write, a store's counters and identity, and
// the helpers every engine uses. The contracts every store method keeps are
// in storage/store.h.
#ifndef HUB_STORAGE_STORE_TYPES_H_
#define HUB_STORAGE_STORE_TYPES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"

namespace hub::storage {

// A field of a patch: keep the stored value (default), set a value, or clear
// it (SQL NULL). Keeps "absent" and "explicit null" apart (triflux bug #22).
template <typename T>
class Patch {
 public:
  Patch() = default;  // keep
  template <typename U,
            typename = std::enable_if_t<std::is_constructible_v<T, U&&>>>
  Patch(U&& value)  // NOLINT(google-explicit-constructor): set
      : kind_(Kind::kSet), value_(std::forward<U>(value)) {}
  static Patch Clear() {
    Patch p;
    p.kind_ = Kind::kClear;
    return p;
  }
  bool keep() const { return kind_ == Kind::kKeep; }
  bool clear() const { return kind_ == Kind::kClear; }
  bool set() const { return kind_ == Kind::kSet; }
  // REQUIRES: set().
  const T& value() const { return *value_; }
  // Applies the patch to a nullable stored value.
  std::optional<T> ApplyTo(const std::optional<T>& current) const {
    if (keep()) return current;
    return value_;
  }

 private:
  enum class Kind { kKeep, kSet, kClear };
  Kind kind_ = Kind::kKeep;
  std::optional<T> value_;
};

// Receives a write's result once it is durable (or failed).
template <typename T>
using Callback = absl::AnyInvocable<void(absl::StatusOr<T>) &&>;

// A store's group-commit counters, for metrics.
struct WriteStats {
  int64_t groups = 0;
  int64_t ops = 0;
  // Groups run a second time, with savepoints, because an operation
  // failed after writing.
  int64_t replays = 0;
  // Operations run again in a later group because the database refused
  // them (or their group's COMMIT) for a lock conflict with another hub.
  int64_t lock_retries = 0;
  // Groups committed by a caller's thread leading the writer (SQLite:
  // CommitOnThisThread), and the times the writer thread took the queue
  // from a leader that had held it without committing for a while.
  int64_t led_groups = 0;
  int64_t leader_stalls = 0;
};

struct StoreInfo {
  std::string store_type;  // "sqlite"
  // SQLite: the file's absolute path; PostgreSQL: postgresql://USER@HOST:
  // PORT/DATABASE, without a password.
  std::string db_path;
  // "sqlite:" + sha256(db_path) hex; "postgres:" + sha256(the cluster's
  // system identifier and the database name) hex.
  std::string fingerprint;
  std::string schema_version;      // triflux-compatible, "8"
  std::string hub_schema_version;  // hub's own, "4"
};

// The wall clock in milliseconds since the epoch.
int64_t SystemNowMs();

// A new UUIDv7 (RFC 9562), lower-case text; monotonic within the process.
std::string NewUuidV7();

}  // namespace hub::storage

#endif  // HUB_STORAGE_STORE_TYPES_H_
