// UUIDv7 ids for messages (TRIFLUX-HUB.md §6.5): text that sorts in creation
// order. This generator is stricter than triflux's: ids from one generator
// strictly increase even when the wall clock steps backwards.
#ifndef HUB_REGISTRY_UUID_H_
#define HUB_REGISTRY_UUID_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "registry/clock.h"

namespace hub {

// Layout (RFC 9562): 48-bit Unix ms | version 7 | 12-bit counter | variant 10
// | 62 random bits; lower-case 8-4-4-4-12 text.
//
// The counter restarts at 0 in each new millisecond, so up to 4096 ids fit in
// one ms before the generator borrows the next ms (running ahead of the
// clock, as triflux does). When the clock reads earlier than the last id's
// ms, the generator stays on that ms and keeps counting, so ids never go
// backwards; the timestamp field then reads later than the clock until the
// clock catches up. Thread-safe.
class UuidV7Generator {
 public:
  // `clock` must outlive the generator.
  explicit UuidV7Generator(const Clock* clock);

  UuidV7Generator(const UuidV7Generator&) = delete;
  UuidV7Generator& operator=(const UuidV7Generator&) = delete;

  // A new id, greater (as text and as bytes) than every earlier one.
  std::string Next() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  static constexpr size_t kPoolBytes = 256;

  // Fills `out` from the pool, refilling it from getrandom(2) when empty.
  void RandomBytes(uint8_t* out, size_t n) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  absl::Mutex mu_;
  int64_t last_ms_ ABSL_GUARDED_BY(mu_) = -1;
  uint32_t counter_ ABSL_GUARDED_BY(mu_) = 0;
  uint8_t pool_[kPoolBytes] ABSL_GUARDED_BY(mu_) = {};
  size_t pool_used_ ABSL_GUARDED_BY(mu_) = kPoolBytes;
};

// True iff `text` matches
// ^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$.
bool IsUuidV7(absl::string_view text);

// The Unix ms in a UUIDv7's timestamp field, or nullopt if !IsUuidV7(text).
std::optional<int64_t> UuidV7UnixMillis(absl::string_view text);

}  // namespace hub

#endif  // HUB_REGISTRY_UUID_H_
