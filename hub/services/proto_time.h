// Conversions between absl time types and the protobuf well-known types.
#ifndef HUB_HUB_SERVICES_PROTO_TIME_H_
#define HUB_HUB_SERVICES_PROTO_TIME_H_

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace hub {

// Both return whole milliseconds, as every hub.v1 value is: a timestamp
// rounded toward the past, a duration truncated toward zero.
google::protobuf::Timestamp ToProtoTimestamp(absl::Time t);
google::protobuf::Duration ToProtoDuration(absl::Duration d);
absl::Time FromProtoTimestamp(const google::protobuf::Timestamp& t);
absl::Duration FromProtoDuration(const google::protobuf::Duration& d);

// OK when `d` is a valid Duration (|seconds| <= 10000 years, |nanos| <
// 10^9, both of one sign); else INVALID_ARGUMENT / REQUEST_INVALID naming
// `field`.
absl::Status CheckProtoDuration(const google::protobuf::Duration& d,
                                absl::string_view field);

}  // namespace hub

#endif  // HUB_HUB_SERVICES_PROTO_TIME_H_
