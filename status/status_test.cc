#include "status/status.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace hub {
namespace {

TEST(ReasonErrorTest, CarriesCodeMessageAndReason) {
  absl::Status s = InvalidArgumentError("ROLE_KEY_INVALID", "not an object");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "not an object");
  EXPECT_EQ(ReasonOf(s), "ROLE_KEY_INVALID");
}

TEST(ReasonErrorTest, PlainStatusHasNoReason) {
  EXPECT_EQ(ReasonOf(absl::OkStatus()), "");
  EXPECT_EQ(ReasonOf(absl::InternalError("x")), "");
}

TEST(ReasonErrorTest, MetadataIsKeptByKeyAndLastValueWins) {
  absl::Status s = FailedPreconditionError("STALE_EPOCH", "old epoch");
  s = WithMetadata(s, "epoch", "3");
  s = WithMetadata(s, "expected_epoch", "2");
  s = WithMetadata(s, "epoch", "4");
  auto md = MetadataOf(s);
  ASSERT_EQ(md.size(), 2u);
  EXPECT_EQ(md["epoch"], "4");
  EXPECT_EQ(md["expected_epoch"], "2");
  EXPECT_EQ(ReasonOf(s), "STALE_EPOCH");
}

TEST(ReasonErrorTest, MetadataOnOkStatusIsIgnored) {
  EXPECT_TRUE(WithMetadata(absl::OkStatus(), "k", "v").ok());
}

std::string Repeat(absl::string_view piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out.append(piece.data(), piece.size());
  return out;
}

constexpr char kE[] = "\xC3\xA9";                // U+00E9, 2 bytes
constexpr char kEllipsis[] = "\xE2\x80\xA6";     // U+2026
constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD

TEST(ErrorTextTest, ShortValidTextIsKeptAsIs) {
  EXPECT_EQ(ErrorText(""), "");
  EXPECT_EQ(ErrorText("agent-a"), "agent-a");
  const std::string mixed = absl::StrCat("a", kE, "\xF0\x9F\x98\x80z");
  EXPECT_EQ(ErrorText(mixed), mixed);
  const std::string exact(kMaxErrorValueBytes, 'x');
  EXPECT_EQ(ErrorText(exact), exact);
}

TEST(ErrorTextTest, LongTextIsCutOnACharacterBoundaryWithAnEllipsis) {
  // "a" + 100 x "é": a cut at byte 80 would split an "é" in two.
  const std::string id = absl::StrCat("a", Repeat(kE, 100));
  EXPECT_EQ(ErrorText(id, 80), absl::StrCat("a", Repeat(kE, 38), kEllipsis));
  EXPECT_EQ(ErrorText(std::string(6000, 'h')),
            absl::StrCat(std::string(kMaxErrorValueBytes - 3, 'h'), kEllipsis));
  EXPECT_EQ(ErrorText(std::string(kMaxErrorValueBytes + 1, 'x')).size(),
            kMaxErrorValueBytes);
}

TEST(ErrorTextTest, InvalidBytesBecomeReplacementCharacters) {
  EXPECT_EQ(ErrorText("a\xFF"
                      "b"),
            absl::StrCat("a", kReplacement, "b"));
  // A lone continuation byte, a truncated sequence at the end.
  EXPECT_EQ(ErrorText("\x80"), kReplacement);
  EXPECT_EQ(ErrorText("x\xC3"), absl::StrCat("x", kReplacement));
  // Overlong "/", a UTF-16 surrogate, a code point above U+10FFFF.
  EXPECT_EQ(ErrorText("\xC0\xAF"), Repeat(kReplacement, 2));
  EXPECT_EQ(ErrorText("\xED\xA0\x80"), Repeat(kReplacement, 3));
  EXPECT_EQ(ErrorText("\xF4\x90\x80\x80"), Repeat(kReplacement, 4));
  EXPECT_EQ(ErrorText(std::string("\0", 1)), std::string("\0", 1));
}

TEST(ErrorTextTest, ReplacedBytesCountTowardsTheBound) {
  const std::string out = ErrorText(std::string(1000, '\xFF'), 10);
  EXPECT_EQ(out, absl::StrCat(Repeat(kReplacement, 2), kEllipsis));
}

}  // namespace
}  // namespace hub
