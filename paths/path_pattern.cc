#include "paths/path_pattern.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "status/status.h"

namespace hub::paths {

namespace {

using Component = PathPattern::Component;

absl::Status Invalid(absl::string_view reason, absl::string_view text,
                     absl::string_view why) {
  return WithMetadata(
      InvalidArgumentError(
          reason, absl::StrCat("path pattern \"", ErrorText(text), "\" ", why)),
      "pattern", ErrorText(text));
}

bool HasGlob(const Component& c) {
  if (c.any_components) return true;
  for (int16_t t : c.tokens) {
    if (t < 0) return true;
  }
  return false;
}

// A step of a common match of two sequences (see Intersection::Trace).
enum class Step {
  kSkipA,    // a's star matches nothing here
  kSkipB,    // b's star matches nothing here
  kAbsorbB,  // a's star takes one element matched by b's element alone
  kAbsorbA,  // b's star takes one element matched by a's element alone
  kBoth,     // one element matched by both
};

// Decides whether two sequences of elements, where some elements are stars
// (matching any run of the other level's units, zero included) and the rest
// match one unit each, can match one common sequence of units. Memoized over
// (i, j), the suffixes still to match: O(|a| * |b|) calls of `compatible`.
class Intersection {
 public:
  Intersection(size_t na, size_t nb, std::function<bool(size_t)> a_star,
               std::function<bool(size_t)> b_star,
               std::function<bool(size_t, size_t)> compatible)
      : na_(na),
        nb_(nb),
        a_star_(std::move(a_star)),
        b_star_(std::move(b_star)),
        compatible_(std::move(compatible)),
        memo_((na + 1) * (nb + 1), -1) {}

  bool Run() { return From(0, 0); }

  // REQUIRES: Run() returned true. The steps of one common match.
  std::vector<std::pair<Step, std::pair<size_t, size_t>>> Trace() {
    std::vector<std::pair<Step, std::pair<size_t, size_t>>> steps;
    size_t i = 0, j = 0;
    while (i < na_ || j < nb_) {
      if (i < na_ && a_star_(i)) {
        if (From(i + 1, j)) {
          steps.push_back({Step::kSkipA, {i, j}});
          ++i;
          continue;
        }
        // From(i, j + 1) holds: b[j] is consumed by a's star, or is a star
        // matching nothing.
        steps.push_back({b_star_(j) ? Step::kSkipB : Step::kAbsorbB, {i, j}});
        ++j;
        continue;
      }
      if (j < nb_ && b_star_(j)) {
        if (From(i, j + 1)) {
          steps.push_back({Step::kSkipB, {i, j}});
          ++j;
          continue;
        }
        steps.push_back({Step::kAbsorbA, {i, j}});
        ++i;
        continue;
      }
      steps.push_back({Step::kBoth, {i, j}});
      ++i;
      ++j;
    }
    return steps;
  }

 private:
  bool From(size_t i, size_t j) {
    int8_t& m = memo_[i * (nb_ + 1) + j];
    if (m >= 0) return m == 1;
    m = Decide(i, j) ? 1 : 0;
    return m == 1;
  }

  // Both done: the empty sequence matches both. A star of a matches nothing
  // (i + 1, j) or takes the first unit, which b[j] matches too: if b[j] is
  // one unit that is (i, j + 1); if b[j] is a star as well, either one of
  // the two matches nothing first, and (i, j + 1) is b's star matching
  // nothing. So a common match exists from (i, j) iff one from the cases
  // below exists (docs/design/reservations.md, "Overlap").
  bool Decide(size_t i, size_t j) {
    if (i == na_ && j == nb_) return true;
    if (i < na_ && a_star_(i)) {
      return From(i + 1, j) || (j < nb_ && From(i, j + 1));
    }
    if (j < nb_ && b_star_(j)) {
      return From(i, j + 1) || (i < na_ && From(i + 1, j));
    }
    if (i == na_ || j == nb_) return false;
    return compatible_(i, j) && From(i + 1, j + 1);
  }

  size_t na_, nb_;
  std::function<bool(size_t)> a_star_, b_star_;
  std::function<bool(size_t, size_t)> compatible_;
  std::vector<int8_t> memo_;
};

// Two segments (the tokens of one component each) and a component both
// match. Components are never empty, `.` or `..` (parsing drops or refuses
// them), so the DP also tracks how much of "." / ".." the component read so
// far: q = 0 nothing, 1 ".", 2 "..", 3 anything else (a non-dot, or three
// characters); only q = 3 is a component. Where a star or `?` picks the
// character, a non-dot is always at least as good (q = 3 only ever stays 3
// and is the only accepting state), so the DP picks 'z'.
// Memoized over (i, j, q): O(|a| * |b|).
class SegmentMatch {
 public:
  SegmentMatch(const Component& a, const Component& b)
      : a_(a.tokens),
        b_(b.tokens),
        memo_((a_.size() + 1) * (b_.size() + 1) * 4, -1) {}

  bool Run() { return From(0, 0, 0); }

  // REQUIRES: Run() returned true. A component both segments match.
  std::string Witness() {
    std::string out;
    size_t i = 0, j = 0;
    int q = 0;
    while (i < a_.size() || j < b_.size() || q != 3) {
      const Move m = Choose(i, j, q);
      if (m.ch != 0) out.push_back(m.ch);
      i = m.i;
      j = m.j;
      q = m.q;
    }
    return out;
  }

 private:
  struct Move {
    bool ok = false;
    size_t i = 0, j = 0;
    int q = 0;
    char ch = 0;  // the character this move reads, 0 for none
  };

  static int Next(int q, char ch) {
    if (ch != '.' || q == 3) return 3;
    return q + 1;
  }
  // The character a token reads when it must read one: itself, or 'z'.
  static char Pick(int16_t t) { return t >= 0 ? static_cast<char>(t) : 'z'; }
  bool Star(const std::vector<int16_t>& s, size_t k) const {
    return k < s.size() && s[k] == PathPattern::kStar;
  }

  bool From(size_t i, size_t j, int q) {
    if (i == a_.size() && j == b_.size() && q == 3) return true;
    int8_t& m = memo_[(i * (b_.size() + 1) + j) * 4 + q];
    if (m >= 0) return m == 1;
    m = 0;  // a state on the path to itself is not a way out of it
    m = Choose(i, j, q).ok ? 1 : 0;
    return m == 1;
  }

  // The first move from (i, j, q) that leads to a common component.
  Move Choose(size_t i, size_t j, int q) {
    auto tryMove = [&](size_t ni, size_t nj, int nq, char ch) -> Move {
      if ((ni != i || nj != j || nq != q) && From(ni, nj, nq)) {
        return {true, ni, nj, nq, ch};
      }
      return {};
    };
    const size_t na = a_.size(), nb = b_.size();
    Move m;
    if (Star(a_, i)) {
      if ((m = tryMove(i + 1, j, q, 0)).ok) return m;
      if (Star(b_, j)) {
        if ((m = tryMove(i, j + 1, q, 0)).ok) return m;
        return tryMove(i, j, 3, 'z');  // both stars read one character
      }
      if (j < nb) {
        const char ch = Pick(b_[j]);
        return tryMove(i, j + 1, Next(q, ch), ch);
      }
      return {};
    }
    if (Star(b_, j)) {
      if ((m = tryMove(i, j + 1, q, 0)).ok) return m;
      if (i < na) {
        const char ch = Pick(a_[i]);
        return tryMove(i + 1, j, Next(q, ch), ch);
      }
      return {};
    }
    if (i == na || j == nb) return {};
    const int16_t x = a_[i], y = b_[j];
    if (x >= 0 && y >= 0 && x != y) return {};
    const char ch = Pick(x >= 0 ? x : y);
    return tryMove(i + 1, j + 1, Next(q, ch), ch);
  }

  const std::vector<int16_t>& a_;
  const std::vector<int16_t>& b_;
  std::vector<int8_t> memo_;
};

bool SegmentsOverlap(const Component& a, const Component& b) {
  return SegmentMatch(a, b).Run();
}

std::string SegmentWitness(const Component& a, const Component& b) {
  SegmentMatch m(a, b);
  return m.Run() ? m.Witness() : "";
}

// A component matched by `c` alone.
std::string SegmentAlone(const Component& c) {
  Component star;
  star.tokens.push_back(PathPattern::kStar);
  return SegmentWitness(c, star);
}

// A pattern's components, followed by the implied `**` (a pattern covers
// what lies below what it matches) when `tail` is set and the last
// component is not `**` already; a path's components alone. A view: no
// copy per comparison.
class Elements {
 public:
  Elements(const std::vector<Component>& c, bool tail)
      : c_(c), tail_(tail && (c.empty() || !c.back().any_components)) {}
  size_t size() const { return c_.size() + (tail_ ? 1 : 0); }
  const Component& operator[](size_t i) const {
    return i < c_.size() ? c_[i] : AnyComponents();
  }

 private:
  static const Component& AnyComponents() {
    static const Component* any = [] {
      auto* c = new Component;
      c->any_components = true;
      return c;
    }();
    return *any;
  }
  const std::vector<Component>& c_;
  const bool tail_;
};

Intersection ComponentIntersection(const Elements& a, const Elements& b) {
  return Intersection(
      a.size(), b.size(), [&a](size_t i) { return a[i].any_components; },
      [&b](size_t j) { return b[j].any_components; },
      [&a, &b](size_t i, size_t j) { return SegmentsOverlap(a[i], b[j]); });
}

}  // namespace

absl::StatusOr<PathPattern> PathPattern::Parse(absl::string_view text) {
  return ParseAs(text, /*literal=*/false);
}

absl::StatusOr<PathPattern> PathPattern::ParseLiteral(absl::string_view text) {
  return ParseAs(text, /*literal=*/true);
}

absl::StatusOr<PathPattern> PathPattern::ParseAs(absl::string_view text,
                                                 bool literal) {
  if (text.empty()) {
    return Invalid("RESERVATION_PATH_EMPTY", text, "is empty");
  }
  if (text.size() > kMaxPatternBytes) {
    return Invalid("RESERVATION_PATH_INVALID", text,
                   absl::StrCat("is longer than ", kMaxPatternBytes, " bytes"));
  }
  for (char ch : text) {
    const unsigned char u = static_cast<unsigned char>(ch);
    if (u < 0x20 || u == 0x7f) {
      return Invalid("RESERVATION_PATH_INVALID", text,
                     "holds a control character");
    }
    if (ch == '\\') {
      return Invalid("RESERVATION_PATH_INVALID", text,
                     "holds a backslash (separate components with /)");
    }
  }
  if (text.front() == '/') {
    return Invalid("RESERVATION_PATH_ABSOLUTE", text,
                   "is absolute (patterns are relative to the repository)");
  }
  absl::string_view body = text;
  if (body.back() == '/') body.remove_suffix(1);  // `src/` is `src`
  std::vector<absl::string_view> parts = absl::StrSplit(body, '/');
  if (parts.size() > kMaxPatternComponents) {
    return Invalid(
        "RESERVATION_PATH_INVALID", text,
        absl::StrCat("has more than ", kMaxPatternComponents, " components"));
  }
  PathPattern p;
  p.literal_ = literal;
  std::vector<absl::string_view> kept;
  for (absl::string_view part : parts) {
    if (part.empty()) {
      return Invalid("RESERVATION_PATH_EMPTY", text, "has an empty component");
    }
    if (part == ".") continue;
    if (part == "..") {
      return Invalid("RESERVATION_PATH_PARENT", text,
                     "has a .. component (patterns stay inside the "
                     "repository)");
    }
    Component c;
    if (!literal && part == "**") {
      if (!p.components_.empty() && p.components_.back().any_components) {
        continue;  // `**/**` is `**`
      }
      c.any_components = true;
    } else {
      if (!literal && part.find("**") != absl::string_view::npos) {
        return Invalid("RESERVATION_PATH_INVALID", text,
                       "has ** inside a component (** must be a whole "
                       "component)");
      }
      for (char ch : part) {
        int16_t t = static_cast<int16_t>(static_cast<unsigned char>(ch));
        if (!literal && ch == '*') t = kStar;
        if (!literal && ch == '?') t = kOne;
        c.tokens.push_back(t);
      }
    }
    p.components_.push_back(std::move(c));
    kept.push_back(part);
  }
  if (p.components_.empty()) {
    return Invalid("RESERVATION_PATH_EMPTY", text, "names no component");
  }
  // A trailing `**` is implied; keep it only as the whole pattern.
  if (p.components_.size() > 1 && p.components_.back().any_components) {
    p.components_.pop_back();
    kept.pop_back();
  }
  p.text_ = absl::StrJoin(kept, "/");
  std::vector<absl::string_view> prefix;
  for (size_t i = 0; i < p.components_.size(); ++i) {
    if (!literal && HasGlob(p.components_[i])) break;
    prefix.push_back(kept[i]);
  }
  p.prefix_ = absl::StrJoin(prefix, "/");
  return p;
}

bool PathPattern::Matches(const PathPattern& path) const {
  const Elements a(components_, /*tail=*/true);
  const Elements b(path.components_, /*tail=*/false);
  return ComponentIntersection(a, b).Run();
}

bool PathPattern::Overlaps(const PathPattern& other) const {
  const Elements a(components_, /*tail=*/true);
  const Elements b(other.components_, /*tail=*/true);
  return ComponentIntersection(a, b).Run();
}

std::string PathPattern::Witness(const PathPattern& other) const {
  const Elements a(components_, /*tail=*/true);
  const Elements b(other.components_, /*tail=*/true);
  Intersection in = ComponentIntersection(a, b);
  if (!in.Run()) return "";
  std::vector<std::string> parts;
  for (const auto& [step, at] : in.Trace()) {
    switch (step) {
      case Step::kSkipA:
      case Step::kSkipB:
        break;
      case Step::kAbsorbB:
        parts.push_back(SegmentAlone(b[at.second]));
        break;
      case Step::kAbsorbA:
        parts.push_back(SegmentAlone(a[at.first]));
        break;
      case Step::kBoth:
        parts.push_back(SegmentWitness(a[at.first], b[at.second]));
        break;
    }
  }
  if (parts.empty()) parts.push_back("z");  // `**` and `**`
  return absl::StrJoin(parts, "/");
}

std::vector<std::string> PrefixAndAncestors(absl::string_view prefix) {
  std::vector<std::string> out = {""};
  if (prefix.empty()) return out;
  for (size_t i = 0; i < prefix.size(); ++i) {
    if (prefix[i] == '/') out.emplace_back(prefix.substr(0, i));
  }
  out.emplace_back(prefix);
  return out;
}

PrefixRange BelowPrefix(absl::string_view prefix) {
  return {absl::StrCat(prefix, "/"), absl::StrCat(prefix, "0")};
}

}  // namespace hub::paths
