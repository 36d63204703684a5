// Fuzz target: path patterns of reservations (paths/path_pattern.h).
//
// The input is two patterns separated by the first newline. Each either
// parses or fails with INVALID_ARGUMENT and a RESERVATION_PATH_* reason; a
// parsed pattern's text parses again to itself; overlap is symmetric and
// reflexive, and when two patterns overlap, their witness is a path both
// match.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "paths/path_pattern.h"
#include "status/status.h"

namespace {

using hub::ReasonOf;
using hub::paths::PathPattern;

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "path_pattern_fuzz: %s\n", what);
    std::abort();
  }
}

absl::StatusOr<PathPattern> ParseChecked(absl::string_view text) {
  absl::StatusOr<PathPattern> p = PathPattern::Parse(text);
  if (!p.ok()) {
    static const std::set<std::string> kReasons = {
        "RESERVATION_PATH_EMPTY", "RESERVATION_PATH_ABSOLUTE",
        "RESERVATION_PATH_PARENT", "RESERVATION_PATH_INVALID"};
    Check(p.status().code() == absl::StatusCode::kInvalidArgument,
          "a refused pattern is not INVALID_ARGUMENT");
    Check(kReasons.count(hub::ReasonOf(p.status())) == 1,
          "a refused pattern has no pattern reason");
    return p;
  }
  absl::StatusOr<PathPattern> again = PathPattern::Parse(p->text());
  Check(again.ok() && again->text() == p->text(),
        "a normalized pattern does not parse to itself");
  Check(p->Overlaps(*p), "a pattern does not overlap itself");
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nl = input.find('\n');
  absl::StatusOr<PathPattern> a = ParseChecked(input.substr(0, nl));
  if (nl == absl::string_view::npos) return 0;
  absl::StatusOr<PathPattern> b = ParseChecked(input.substr(nl + 1));
  if (!a.ok() || !b.ok()) return 0;
  const bool overlaps = a->Overlaps(*b);
  Check(overlaps == b->Overlaps(*a), "overlap is not symmetric");
  if (!overlaps) return 0;
  const std::string witness = a->Witness(*b);
  const std::vector<absl::string_view> parts = absl::StrSplit(witness, '/');
  for (absl::string_view c : parts) {
    Check(!c.empty() && c != "." && c != "..",
          "the witness has a component no path has");
  }
  // A witness may be longer than one pattern may be (it can take the
  // components of both); only one within the limits parses as a path.
  absl::StatusOr<PathPattern> w = PathPattern::ParseLiteral(witness);
  if (!w.ok()) {
    Check(ReasonOf(w.status()) == "RESERVATION_PATH_INVALID" &&
              (witness.size() > hub::paths::kMaxPatternBytes ||
               parts.size() > hub::paths::kMaxPatternComponents),
          "the witness is not a path");
    return 0;
  }
  Check(a->Matches(*w) && b->Matches(*w), "the witness is not matched by both");
  return 0;
}
