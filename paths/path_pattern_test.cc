#include "paths/path_pattern.h"

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "status/status.h"

namespace hub::paths {
namespace {

PathPattern P(absl::string_view text) {
  absl::StatusOr<PathPattern> p = PathPattern::Parse(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  return p.ok() ? *p : *PathPattern::Parse("unused");
}

PathPattern L(absl::string_view text) {
  absl::StatusOr<PathPattern> p = PathPattern::ParseLiteral(text);
  EXPECT_TRUE(p.ok()) << text << ": " << p.status();
  return p.ok() ? *p : *PathPattern::Parse("unused");
}

std::string ReasonFor(absl::string_view text) {
  absl::StatusOr<PathPattern> p = PathPattern::Parse(text);
  if (p.ok()) return "OK";
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  return ReasonOf(p.status());
}

TEST(PathPatternTest, NormalizationDropsWhatChangesNothing) {
  EXPECT_EQ(P("src/").text(), "src");
  EXPECT_EQ(P("./src/./a.cc").text(), "src/a.cc");
  EXPECT_EQ(P("src/**").text(), "src");
  EXPECT_EQ(P("src/**/**/*.cc").text(), "src/**/*.cc");
  EXPECT_EQ(P("**").text(), "**");
  EXPECT_EQ(P("**/**").text(), "**");
  EXPECT_EQ(P("src/**/").text(), "src");
}

TEST(PathPatternTest, EachBadPatternHasItsOwnReason) {
  EXPECT_EQ(ReasonFor(""), "RESERVATION_PATH_EMPTY");
  EXPECT_EQ(ReasonFor("a//b"), "RESERVATION_PATH_EMPTY");
  EXPECT_EQ(ReasonFor("."), "RESERVATION_PATH_EMPTY");
  EXPECT_EQ(ReasonFor("./"), "RESERVATION_PATH_EMPTY");
  EXPECT_EQ(ReasonFor("/etc/passwd"), "RESERVATION_PATH_ABSOLUTE");
  EXPECT_EQ(ReasonFor("/"), "RESERVATION_PATH_ABSOLUTE");
  EXPECT_EQ(ReasonFor("C:/x"), "OK");  // a component named C:, not a drive
  EXPECT_EQ(ReasonFor("a/../b"), "RESERVATION_PATH_PARENT");
  EXPECT_EQ(ReasonFor(".."), "RESERVATION_PATH_PARENT");
  EXPECT_EQ(ReasonFor("a\\b"), "RESERVATION_PATH_INVALID");
  EXPECT_EQ(ReasonFor(std::string("a\0b", 3)), "RESERVATION_PATH_INVALID");
  EXPECT_EQ(ReasonFor("a\nb"), "RESERVATION_PATH_INVALID");
  EXPECT_EQ(ReasonFor("a**b"), "RESERVATION_PATH_INVALID");
  EXPECT_EQ(ReasonFor(std::string(kMaxPatternBytes + 1, 'a')),
            "RESERVATION_PATH_INVALID");
  std::string deep = "a";
  for (size_t i = 0; i < kMaxPatternComponents; ++i)
    absl::StrAppend(&deep, "/a");
  EXPECT_EQ(ReasonFor(deep), "RESERVATION_PATH_INVALID");
  EXPECT_EQ(ReasonFor("src/*.cc"), "OK");
  EXPECT_EQ(ReasonFor(std::string(kMaxPatternBytes, 'a')), "OK");
}

TEST(PathPatternTest, TheLiteralPrefixEndsAtTheFirstGlob) {
  EXPECT_EQ(P("src/a/b.cc").literal_prefix(), "src/a/b.cc");
  EXPECT_EQ(P("src/a/*.cc").literal_prefix(), "src/a");
  EXPECT_EQ(P("src/**/x").literal_prefix(), "src");
  EXPECT_EQ(P("s?c/a").literal_prefix(), "");
  EXPECT_EQ(P("**").literal_prefix(), "");
  EXPECT_EQ(L("a*b/c").literal_prefix(), "a*b/c");
}

TEST(PathPatternTest, ADirectoryCoversEverythingBelowIt) {
  EXPECT_TRUE(P("src").Matches(L("src")));
  EXPECT_TRUE(P("src/").Matches(L("src/a/b.cc")));
  EXPECT_FALSE(P("src").Matches(L("srcx/a")));
  EXPECT_FALSE(P("src/a").Matches(L("src")));
}

TEST(PathPatternTest, GlobsStayInsideOneComponentAndStarStarCrossesThem) {
  EXPECT_TRUE(P("src/*.cc").Matches(L("src/a.cc")));
  EXPECT_TRUE(P("src/*.cc").Matches(L("src/.cc")));
  EXPECT_FALSE(P("src/*.cc").Matches(L("src/a/b.cc")));
  EXPECT_TRUE(P("src/*.cc").Matches(L("src/a.cc/b")));
  EXPECT_FALSE(P("*.cc").Matches(L("src/a.cc")));
  EXPECT_TRUE(P("**/*.cc").Matches(L("a.cc")));
  EXPECT_TRUE(P("**/*.cc").Matches(L("x/y/a.cc")));
  EXPECT_TRUE(P("a/**/b").Matches(L("a/b")));
  EXPECT_TRUE(P("a/**/b").Matches(L("a/x/y/b/c")));
  EXPECT_FALSE(P("a/**/b").Matches(L("a/x/y/c")));
  EXPECT_TRUE(P("a?c").Matches(L("abc")));
  EXPECT_FALSE(P("a?c").Matches(L("ac")));
}

TEST(PathPatternTest, ALiteralPathTakesGlobCharactersLiterally) {
  EXPECT_TRUE(P("a*").Matches(L("a*")));
  EXPECT_TRUE(P("a*").Matches(L("ab")));
  EXPECT_TRUE(L("a*").Matches(L("a*")));
  EXPECT_FALSE(L("a*").Matches(L("ab")));
  EXPECT_FALSE(L("a*").Overlaps(L("ab")));
}

TEST(PathPatternTest, OverlapIsDecidedExactlyOnExamples) {
  EXPECT_TRUE(P("src").Overlaps(P("src/a.cc")));
  EXPECT_TRUE(P("src/a.cc").Overlaps(P("src")));
  EXPECT_FALSE(P("src/a.cc").Overlaps(P("src/b.cc")));
  EXPECT_TRUE(P("src/*.cc").Overlaps(P("src/a.*")));
  EXPECT_FALSE(P("src/*.cc").Overlaps(P("src/*.h")));
  EXPECT_TRUE(P("**/*.cc").Overlaps(P("docs/**/x.cc")));
  EXPECT_FALSE(P("*.cc").Overlaps(P("docs/*.md")));
  EXPECT_TRUE(P("a*").Overlaps(P("*b")));
  EXPECT_TRUE(P("**").Overlaps(P("x")));
  // The only component both match would be "." or "..", which no path has.
  EXPECT_FALSE(P("?").Overlaps(P(".*")));
  EXPECT_FALSE(P("??").Overlaps(P("..*")));
  EXPECT_TRUE(P("???").Overlaps(P("..*")));
  EXPECT_TRUE(P("??").Overlaps(P(".*")));
  EXPECT_TRUE(P("*").Overlaps(P("*")));
}

// ---- property test: the algorithm against brute force --------------------

// An independent matcher: a regular expression over "/" + path.
std::regex Oracle(absl::string_view pattern) {
  std::string re;
  for (absl::string_view c : absl::StrSplit(pattern, '/')) {
    if (c == "**") {
      re += "(?:/[^/]+)*";
      continue;
    }
    re += "/";
    for (char ch : c) {
      if (ch == '*') {
        re += "[^/]*";
      } else if (ch == '?') {
        re += "[^/]";
      } else {
        re += absl::StrCat(
            "\\x", absl::Hex(static_cast<unsigned char>(ch), absl::kZeroPad2));
      }
    }
  }
  re += "(?:/[^/]+)*";  // what lies below
  return std::regex(re);
}

// Components over {a, .} of 1..3 characters, without "." and "..".
std::vector<std::string> TreeComponents() {
  std::vector<std::string> out;
  for (int len = 1; len <= 3; ++len) {
    for (int bits = 0; bits < (1 << len); ++bits) {
      std::string c;
      for (int k = 0; k < len; ++k) c.push_back((bits >> k) & 1 ? '.' : 'a');
      if (c != "." && c != "..") out.push_back(c);
    }
  }
  return out;
}

std::vector<std::string> Tree() {
  std::vector<std::string> comps = TreeComponents(), out, level = {""};
  for (int depth = 1; depth <= 3; ++depth) {
    std::vector<std::string> next;
    for (const std::string& prefix : level) {
      for (const std::string& c : comps) {
        next.push_back(prefix.empty() ? c : absl::StrCat(prefix, "/", c));
      }
    }
    out.insert(out.end(), next.begin(), next.end());
    level = std::move(next);
  }
  return out;
}

std::string RandomPattern(std::mt19937& rng) {
  static const char kTokens[] = {'a', '.', '?', '*'};
  std::uniform_int_distribution<int> ncomp(1, 3), ntok(1, 3), tok(0, 3),
      coin(0, 4);
  std::vector<std::string> comps;
  const int n = ncomp(rng);
  for (int i = 0; i < n; ++i) {
    if (coin(rng) == 0) {
      comps.push_back("**");
      continue;
    }
    std::string c;
    const int t = ntok(rng);
    for (int k = 0; k < t; ++k) c.push_back(kTokens[tok(rng)]);
    while (c.find("**") != std::string::npos) c.erase(c.find("**"), 1);
    if (c == "." || c == "..") c += "a";
    comps.push_back(c);
  }
  std::string out;
  for (const std::string& c : comps) {
    out = out.empty() ? c : absl::StrCat(out, "/", c);
  }
  return out;
}

bool ValidPath(absl::string_view path) {
  for (absl::string_view c : absl::StrSplit(path, '/')) {
    if (c.empty() || c == "." || c == "..") return false;
  }
  return !path.empty();
}

TEST(PathPatternPropertyTest, OverlapAgreesWithBruteForceOverAGeneratedTree) {
  const std::vector<std::string> tree = Tree();
  std::vector<PathPattern> paths;
  for (const std::string& t : tree) paths.push_back(L(t));
  std::mt19937 rng(19);  // fixed: a failure replays
  std::vector<PathPattern> patterns;
  std::vector<std::vector<bool>> matched;  // by the oracle, per tree path
  for (int k = 0; k < 160; ++k) {
    const PathPattern p = P(RandomPattern(rng));
    const std::regex re = Oracle(p.text());
    std::vector<bool> m(tree.size());
    for (size_t t = 0; t < tree.size(); ++t) {
      m[t] = std::regex_match("/" + tree[t], re);
      ASSERT_EQ(p.Matches(paths[t]), m[t]) << p.text() << " vs " << tree[t];
      if (m[t]) {
        ASSERT_EQ(tree[t].rfind(p.literal_prefix(), 0), 0u);
      }
    }
    patterns.push_back(p);
    matched.push_back(std::move(m));
  }
  int overlapping = 0, disjoint = 0, beyond_tree = 0;
  for (size_t i = 0; i < patterns.size(); ++i) {
    for (size_t j = i; j < patterns.size(); ++j) {
      const PathPattern& a = patterns[i];
      const PathPattern& b = patterns[j];
      bool in_tree = false;
      for (size_t t = 0; t < tree.size() && !in_tree; ++t) {
        in_tree = matched[i][t] && matched[j][t];
      }
      const bool overlaps = a.Overlaps(b);
      ASSERT_EQ(overlaps, b.Overlaps(a)) << a.text() << " / " << b.text();
      // A path of the tree covered by both: the algorithm must say so.
      if (in_tree) {
        ASSERT_TRUE(overlaps) << a.text() << " / " << b.text();
      }
      if (!overlaps) {
        ++disjoint;
        EXPECT_EQ(a.Witness(b), "");
        continue;
      }
      ++overlapping;
      if (!in_tree) ++beyond_tree;
      // Overlap claimed: the algorithm's own witness must be a real path
      // that the oracle matches with both.
      const std::string w = a.Witness(b);
      ASSERT_TRUE(ValidPath(w)) << a.text() << " / " << b.text() << ": " << w;
      ASSERT_TRUE(std::regex_match("/" + w, Oracle(a.text())))
          << a.text() << " / " << b.text() << ": " << w;
      ASSERT_TRUE(std::regex_match("/" + w, Oracle(b.text())))
          << a.text() << " / " << b.text() << ": " << w;
      // Overlap implies one literal prefix is a component prefix of the
      // other (what the store's index relies on).
      const std::string& pa = a.literal_prefix();
      const std::string& pb = b.literal_prefix();
      const std::string& shorter = pa.size() <= pb.size() ? pa : pb;
      const std::string& longer = pa.size() <= pb.size() ? pb : pa;
      ASSERT_TRUE(shorter.empty() || longer == shorter ||
                  longer.rfind(shorter + "/", 0) == 0)
          << pa << " / " << pb;
    }
  }
  // Not vacuous: both answers occur often.
  EXPECT_GT(overlapping, 1000);
  EXPECT_GT(disjoint, 1000);
  RecordProperty("beyond_tree", beyond_tree);
}

TEST(PathPatternTest, PrefixHelpersNameTheCandidateRows) {
  EXPECT_EQ(PrefixAndAncestors(""), std::vector<std::string>({""}));
  EXPECT_EQ(PrefixAndAncestors("a/b/c"),
            std::vector<std::string>({"", "a", "a/b", "a/b/c"}));
  EXPECT_EQ(BelowPrefix("a/b").low, "a/b/");
  EXPECT_EQ(BelowPrefix("a/b").high, "a/b0");
}

}  // namespace
}  // namespace hub::paths
