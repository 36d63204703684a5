// google.protobuf.Struct <-> JSON text, for message payloads and agent
// metadata, which the API carries as Struct and the store keeps as JSON text
// (triflux's columns).
//
// protobuf's own util::MessageToJsonString / JsonStringToMessage go through
// a type resolver and a binary round trip: for a 4 KiB payload they were most
// of what a Publish cost beyond the write. These walk the Struct directly,
// and parse with nlohmann's SAX interface straight into the Struct, with no
// intermediate document.
//
// Output is JSON as JSON.stringify would write it (what triflux stored):
// object keys sorted, no spaces, strings escaped as RFC 8259 requires
// (", \ and control characters; other UTF-8 as is), and numbers in the form
// protobuf prints them: integral values without a fraction ("1", not "1.0"),
// otherwise the shortest of %.15g and %.17g that reads back exactly.
#ifndef HUB_STRUCT_JSON_H_
#define HUB_STRUCT_JSON_H_

#include <google/protobuf/struct.pb.h>

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hub {

// Nesting deeper than this (objects and arrays) is refused both ways; it is
// protobuf's own recursion limit for parsing a Struct from the wire.
inline constexpr int kMaxJsonDepth = 100;

// The JSON text of `s`. INVALID_ARGUMENT (no reason code: the caller names
// the field) for a number that JSON cannot carry (NaN, an infinity), a value
// with no kind set inside a list, or nesting deeper than kMaxJsonDepth.
absl::StatusOr<std::string> StructToJson(const google::protobuf::Struct& s);

// Parses JSON text into a Value of any kind. INVALID_ARGUMENT for text that
// is not exactly one JSON value, or nesting deeper than kMaxJsonDepth.
// Numbers become doubles (as in JSON's own data model).
absl::StatusOr<google::protobuf::Value> JsonToValue(absl::string_view json);

// Parses JSON text that must be an object into a Struct. INVALID_ARGUMENT as
// JsonToValue, and for a value that is not an object.
absl::StatusOr<google::protobuf::Struct> JsonToStruct(absl::string_view json);

}  // namespace hub

#endif  // HUB_STRUCT_JSON_H_
