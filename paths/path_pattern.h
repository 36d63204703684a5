// Path patterns of reservations (docs/design/reservations.md).
//
// A pattern names files and folders of a repository, relative to its root,
// with `/` between components: an exact path (`src/main.cc`), a directory
// (`src` or `src/`, which covers everything below it), or globs: `*` and `?`
// inside one component (any run of characters, any one character, never a
// `/`), and `**` as a whole component (any number of components, zero
// included). Every pattern also covers what lies below whatever it matches,
// as if it ended in `/**`.
//
// Pure functions, no I/O; the store decides conflicts with them inside its
// transactions, so this package depends on nothing of hub but status/.
#ifndef HUB_PATHS_PATH_PATTERN_H_
#define HUB_PATHS_PATH_PATTERN_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace hub::paths {

// What one pattern (or path) may weigh.
inline constexpr size_t kMaxPatternBytes = 1024;
inline constexpr size_t kMaxPatternComponents = 64;

// A validated, normalized pattern. Cheap to copy.
class PathPattern {
 public:
  // Validates and normalizes `text`. A trailing `/` and `.` components are
  // dropped, runs of `**` components collapse to one, a trailing `**` is
  // dropped (it is implied) unless it is the whole pattern. Failures are
  // INVALID_ARGUMENT with these reasons:
  //   RESERVATION_PATH_EMPTY     "", "/"-only parts such as `a//b`, or `.`
  //   RESERVATION_PATH_ABSOLUTE  starts with `/`
  //   RESERVATION_PATH_PARENT    a `..` component
  //   RESERVATION_PATH_INVALID   a NUL, control character or backslash,
  //                              `**` inside a longer component, more than
  //                              kMaxPatternBytes bytes or
  //                              kMaxPatternComponents components
  static absl::StatusOr<PathPattern> Parse(absl::string_view text);

  // As Parse, for a path of the repository: the same rules, but `*` and `?`
  // are ordinary characters (a file may be named `a*b`). The result matches
  // exactly that path and what lies below it.
  static absl::StatusOr<PathPattern> ParseLiteral(absl::string_view text);

  // The normalized text (a literal path is returned as given, normalized).
  const std::string& text() const { return text_; }
  bool literal() const { return literal_; }

  // The components before the first one that holds a glob, joined with `/`;
  // "" when the first component is a glob. Every path the pattern matches
  // starts with these components.
  const std::string& literal_prefix() const { return prefix_; }

  // True when `path` (a path of the repository, its characters taken
  // literally) is matched by this pattern or lies below something it
  // matches.
  bool Matches(const PathPattern& path) const;

  // True when some path is covered by both patterns. Symmetric. Exact: see
  // docs/design/reservations.md, "Overlap".
  bool Overlaps(const PathPattern& other) const;

  // When Overlaps(other), a path covered by both (for tests and messages);
  // "" otherwise.
  std::string Witness(const PathPattern& other) const;

  // One element of a pattern: `**`, or a component as a list of tokens.
  struct Component {
    bool any_components = false;  // `**`
    // Tokens: a byte (0..255), kStar or kOne.
    std::vector<int16_t> tokens;
  };
  static constexpr int16_t kStar = -1;
  static constexpr int16_t kOne = -2;

  const std::vector<Component>& components() const { return components_; }

 private:
  static absl::StatusOr<PathPattern> ParseAs(absl::string_view text,
                                             bool literal);

  std::string text_;
  std::string prefix_;
  bool literal_ = false;
  std::vector<Component> components_;
};

// The literal prefixes a reservation's row can have for it to possibly
// overlap a pattern whose literal prefix is `prefix`, other than those
// strictly below `prefix`: "" and every ancestor of `prefix`, and `prefix`
// itself. ("a/b" -> "", "a", "a/b".)
std::vector<std::string> PrefixAndAncestors(absl::string_view prefix);

// The half-open range [low, high) of literal prefixes strictly below
// `prefix` in byte order ("a/b" -> ["a/b/", "a/b0"): `0` follows `/`).
// REQUIRES: !prefix.empty() (below "" is every prefix of the project).
struct PrefixRange {
  std::string low;
  std::string high;
};
PrefixRange BelowPrefix(absl::string_view prefix);

}  // namespace hub::paths

#endif  // HUB_PATHS_PATH_PATTERN_H_
