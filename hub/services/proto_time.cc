#include "hub/services/proto_time.h"

#include <cstdint>

#include "absl/strings/str_cat.h"
#include "status/status.h"

namespace hub {

google::protobuf::Timestamp ToProtoTimestamp(absl::Time t) {
  // hub.v1 returns whole milliseconds; ToUnixMillis rounds toward the past.
  const int64_t millis = absl::ToUnixMillis(t);
  google::protobuf::Timestamp out;
  int64_t seconds = millis / 1000;
  int64_t rem = millis % 1000;
  if (rem < 0) {  // Timestamp wants non-negative nanos.
    rem += 1000;
    --seconds;
  }
  out.set_seconds(seconds);
  out.set_nanos(static_cast<int32_t>(rem * 1'000'000));
  return out;
}

google::protobuf::Duration ToProtoDuration(absl::Duration d) {
  // hub.v1 returns whole milliseconds, truncated toward zero.
  d = absl::Trunc(d, absl::Milliseconds(1));
  google::protobuf::Duration out;
  const int64_t seconds = absl::IDivDuration(d, absl::Seconds(1), &d);
  out.set_seconds(seconds);
  // Seconds and nanos share a sign, as the Duration contract requires.
  out.set_nanos(static_cast<int32_t>(absl::ToInt64Nanoseconds(d)));
  return out;
}

absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

absl::Duration FromProtoDuration(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

absl::Status CheckProtoDuration(const google::protobuf::Duration& d,
                                absl::string_view field) {
  constexpr int64_t kMaxSeconds = 315'576'000'000;  // 10000 years
  const bool valid = d.seconds() >= -kMaxSeconds &&
                     d.seconds() <= kMaxSeconds && d.nanos() > -1'000'000'000 &&
                     d.nanos() < 1'000'000'000 &&
                     !(d.seconds() > 0 && d.nanos() < 0) &&
                     !(d.seconds() < 0 && d.nanos() > 0);
  if (valid) return absl::OkStatus();
  return WithMetadata(
      InvalidArgumentError(
          "REQUEST_INVALID",
          absl::StrCat(field,
                       " is not a valid Duration (nanos within "
                       "+-999999999 and of the sign of seconds)")),
      "field", field);
}

}  // namespace hub
