#include "registry/role_key.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "status/status.h"

namespace hub {
namespace {

using nlohmann::json;

constexpr char kProject[] = "prj_AAAAAAAAAAAAAAAAAAAAAA";
constexpr char kScope[] = "scp_BBBBBBBBBBBBBBBBBBBBBB";

// Vectors checked by hand with
//   printf '%s' "$json" | base64 -w0 | tr '+/' '-_' | tr -d '='
constexpr char kCtoWire[] =
    "rk2.eyJwcm9qZWN0X2lkIjoicHJqX0FBQUFBQUFBQUFBQUFBQUFBQUFBQUEiLCJyb2xlX2tp"
    "bmQiOiJjdG8ifQ";
constexpr char kLeadWire[] =
    "rk2.eyJwcm9qZWN0X2lkIjoicHJqX0FBQUFBQUFBQUFBQUFBQUFBQUFBQUEiLCJyb2xlX2tp"
    "bmQiOiJsZWFkIiwic2NvcGVfaWQiOiJzY3BfQkJCQkJCQkJCQkJCQkJCQkJCQkJCQiJ9";
// {"project_id":"prj_0123456789abcdefXY-_zZ","role_kind":"lead",
//  "scope_id":"scp_Zz9-_aB3cD4eF5gH6iJ7kL"}
constexpr char kMixedLeadWire[] =
    "rk2.eyJwcm9qZWN0X2lkIjoicHJqXzAxMjM0NTY3ODlhYmNkZWZYWS1feloiLCJyb2xlX2tp"
    "bmQiOiJsZWFkIiwic2NvcGVfaWQiOiJzY3BfWno5LV9hQjNjRDRlRjVnSDZpSjdrTCJ9";

RoleKey Cto(std::string project = kProject) {
  return RoleKey{std::move(project), RoleKind::kCto, ""};
}

RoleKey Lead(std::string project = kProject, std::string scope = kScope) {
  return RoleKey{std::move(project), RoleKind::kLead, std::move(scope)};
}

// A wire over arbitrary JSON text, for feeding the decoder non-canonical or
// invalid documents. Base64UrlEncode itself is pinned by the vectors above.
std::string WireOf(const std::string& json_text) {
  return std::string(kRoleKeyWirePrefix) + Base64UrlEncode(json_text);
}

TEST(RoleKeyTest, CtoKeyEncodesToTheDocumentedTrifluxWire) {
  absl::StatusOr<std::string> wire = EncodeRoleKey(Cto());
  ASSERT_TRUE(wire.ok()) << wire.status();
  EXPECT_EQ(*wire, kCtoWire);
  EXPECT_EQ(wire->size(), 86u);
}

TEST(RoleKeyTest, LeadKeyEncodesToTheHandCheckedWireOf140Bytes) {
  absl::StatusOr<std::string> wire = EncodeRoleKey(Lead());
  ASSERT_TRUE(wire.ok()) << wire.status();
  EXPECT_EQ(*wire, kLeadWire);
  EXPECT_EQ(wire->size(), 140u);
}

TEST(RoleKeyTest, IdsUsingEveryCharacterClassEncodeToTheHandCheckedWire) {
  absl::StatusOr<std::string> wire = EncodeRoleKey(
      Lead("prj_0123456789abcdefXY-_zZ", "scp_Zz9-_aB3cD4eF5gH6iJ7kL"));
  ASSERT_TRUE(wire.ok()) << wire.status();
  EXPECT_EQ(*wire, kMixedLeadWire);
}

TEST(RoleKeyTest, EncodedKeysDecodeBackToTheSameKey) {
  for (const RoleKey& key :
       {Cto(), Lead(),
        Lead("prj_0123456789abcdefXY-_zZ", "scp_Zz9-_aB3cD4eF5gH6iJ7kL")}) {
    absl::StatusOr<std::string> wire = EncodeRoleKey(key);
    ASSERT_TRUE(wire.ok()) << wire.status();
    absl::StatusOr<RoleKey> decoded = DecodeRoleKey(*wire);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, key);
  }
}

TEST(RoleKeyTest, LeadKeyWithFieldsInAnyOrderNormalizesToTheCanonicalWire) {
  // triflux 9.1 scenario 1: field order of the input does not matter.
  for (const char* text :
       {R"({"scope_id":"scp_BBBBBBBBBBBBBBBBBBBBBB","role_kind":"lead",)"
        R"("project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA"})",
        R"({"role_kind":"lead","project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA",)"
        R"("scope_id":"scp_BBBBBBBBBBBBBBBBBBBBBB"})"}) {
    absl::StatusOr<RoleKey> key = NormalizeRoleKeyJson(json::parse(text));
    ASSERT_TRUE(key.ok()) << key.status();
    EXPECT_EQ(*key, Lead());
    absl::StatusOr<std::string> wire = EncodeRoleKey(*key);
    ASSERT_TRUE(wire.ok());
    EXPECT_EQ(*wire, kLeadWire);
    EXPECT_EQ(RoleTopic(*wire), std::string("topic:role:") + kLeadWire);
  }
}

TEST(RoleKeyTest, RoleKindNamesAreTheWireSpellings) {
  EXPECT_EQ(RoleKindName(RoleKind::kCto), "cto");
  EXPECT_EQ(RoleKindName(RoleKind::kLead), "lead");
}

TEST(RoleKeyTest, IdPredicatesAcceptExactly22Base64UrlCharactersAfterPrefix) {
  EXPECT_TRUE(IsProjectId(kProject));
  EXPECT_TRUE(IsProjectId("prj_0123456789abcdefXY-_zZ"));
  EXPECT_FALSE(IsProjectId("prj_AAAAAAAAAAAAAAAAAAAAA"));    // 21
  EXPECT_FALSE(IsProjectId("prj_AAAAAAAAAAAAAAAAAAAAAAA"));  // 23
  EXPECT_FALSE(IsProjectId("PRJ_AAAAAAAAAAAAAAAAAAAAAA"));
  EXPECT_FALSE(IsProjectId("prj_AAAAAAAAAAAAAAAAAAAAA="));
  EXPECT_FALSE(IsProjectId("prj_AAAAAAAAAAAAAAAAAAAAA/"));
  EXPECT_FALSE(IsProjectId("scp_AAAAAAAAAAAAAAAAAAAAAA"));
  EXPECT_FALSE(IsProjectId(""));
  EXPECT_TRUE(IsScopeId(kScope));
  EXPECT_FALSE(IsScopeId(kProject));
  EXPECT_FALSE(IsScopeId("scp_BBBBBBBBBBBBBBBBBBBBB "));
}

struct InputCase {
  const char* name;
  RoleKeyInput input;
  const char* reason;
};

TEST(RoleKeyTest, StructuredInputFailsWithTheFirstBrokenRuleInTrifluxOrder) {
  const std::vector<InputCase> cases = {
      {"bad project wins over bad kind",
       {"prj_x", "owner", kScope},
       "PROJECT_ID_INVALID"},
      {"empty project", {"", "cto", std::nullopt}, "PROJECT_ID_INVALID"},
      {"unknown kind",
       {kProject, "owner", std::nullopt},
       "ROLE_KIND_UNSUPPORTED"},
      {"unspecified kind",
       {kProject, "", std::nullopt},
       "ROLE_KIND_UNSUPPORTED"},
      {"kind is case-sensitive",
       {kProject, "CTO", std::nullopt},
       "ROLE_KIND_UNSUPPORTED"},
      {"cto with scope", {kProject, "cto", kScope}, "ROLE_SCOPE_FORBIDDEN"},
      {"cto with empty scope", {kProject, "cto", ""}, "ROLE_SCOPE_FORBIDDEN"},
      {"lead without scope",
       {kProject, "lead", std::nullopt},
       "SCOPE_REQUIRED"},
      {"lead with empty scope", {kProject, "lead", ""}, "SCOPE_ID_INVALID"},
      {"lead with bad scope",
       {kProject, "lead", "scp_bad"},
       "SCOPE_ID_INVALID"},
  };
  for (const InputCase& c : cases) {
    absl::StatusOr<RoleKey> key = NormalizeRoleKey(c.input);
    EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument)
        << c.name;
    EXPECT_EQ(ReasonOf(key.status()), c.reason) << c.name;
    EXPECT_FALSE(key.status().message().empty()) << c.name;
  }
  absl::StatusOr<RoleKey> ok = NormalizeRoleKey({kProject, "lead", kScope});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(*ok, Lead());
}

struct JsonCase {
  const char* json_text;
  const char* reason;
};

TEST(RoleKeyTest, JsonInputFailsWithTheFirstBrokenRuleInTrifluxOrder) {
  const std::vector<JsonCase> cases = {
      {R"([])", "ROLE_KEY_INVALID"},
      {R"(null)", "ROLE_KEY_INVALID"},
      {R"("rk2.x")", "ROLE_KEY_INVALID"},
      {R"({"project_id":"prj_x","role_kind":"owner","extra":1})",
       "ROLE_KEY_FIELD_UNSUPPORTED"},
      {R"({"project_id":1,"role_kind":"cto"})", "PROJECT_ID_INVALID"},
      {R"({"role_kind":"cto"})", "PROJECT_ID_INVALID"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"owner",)"
       R"("scope_id":5})",
       "ROLE_KIND_UNSUPPORTED"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":1})",
       "ROLE_KIND_UNSUPPORTED"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA"})",
       "ROLE_KIND_UNSUPPORTED"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"cto",)"
       R"("scope_id":null})",
       "ROLE_SCOPE_FORBIDDEN"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"cto",)"
       R"("scope_id":"scp_bad"})",
       "ROLE_SCOPE_FORBIDDEN"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"lead"})",
       "SCOPE_REQUIRED"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"lead",)"
       R"("scope_id":7})",
       "SCOPE_REQUIRED"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"lead",)"
       R"("scope_id":null})",
       "SCOPE_REQUIRED"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"lead",)"
       R"("scope_id":"scp_BBBBBBBBBBBBBBBBBBBBB"})",
       "SCOPE_ID_INVALID"},
  };
  for (const JsonCase& c : cases) {
    absl::StatusOr<RoleKey> key =
        NormalizeRoleKeyJson(json::parse(c.json_text));
    EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument)
        << c.json_text;
    EXPECT_EQ(ReasonOf(key.status()), c.reason) << c.json_text;
  }
}

TEST(RoleKeyTest, EncodingAnInvalidStructRejectsItWithTheNormalizerCodes) {
  EXPECT_EQ(ReasonOf(EncodeRoleKey(Cto("prj_short")).status()),
            "PROJECT_ID_INVALID");
  EXPECT_EQ(
      ReasonOf(
          EncodeRoleKey(RoleKey{kProject, RoleKind::kCto, kScope}).status()),
      "ROLE_SCOPE_FORBIDDEN");
  EXPECT_EQ(ReasonOf(EncodeRoleKey(Lead(kProject, "")).status()),
            "SCOPE_REQUIRED");
  EXPECT_EQ(ReasonOf(EncodeRoleKey(Lead(kProject, "scp_x")).status()),
            "SCOPE_ID_INVALID");
}

TEST(RoleKeyTest, WireLongerThan512BytesIsRefusedWhenEncoding) {
  // 381 bytes of JSON -> 508 base64url characters -> 512-byte wire.
  absl::StatusOr<std::string> at_limit =
      RoleKeyWireFromCanonicalJson(std::string(381, 'x'));
  ASSERT_TRUE(at_limit.ok()) << at_limit.status();
  EXPECT_EQ(at_limit->size(), 512u);
  absl::StatusOr<std::string> over =
      RoleKeyWireFromCanonicalJson(std::string(382, 'x'));
  EXPECT_EQ(over.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ReasonOf(over.status()), "ROLE_KEY_WIRE_TOO_LONG");
}

TEST(RoleKeyTest, AnEmptyWireLacksThePrefixAsInTriflux) {
  // triflux checks the length bound, then the prefix; an empty wire fails
  // the prefix (hub.proto, errors.proto and docs/api.md say so).
  EXPECT_EQ(ReasonOf(DecodeRoleKey("").status()), "ROLE_KEY_WIRE_PREFIX");
}

TEST(RoleKeyTest, DecodeRefusesAWireLongerThan512BytesBeforeLookingAtIt) {
  std::string long_wire(513, 'A');  // not even the prefix: length wins
  EXPECT_EQ(ReasonOf(DecodeRoleKey(long_wire).status()),
            "ROLE_KEY_WIRE_INVALID");
  std::string long_rk2 = std::string("rk2.") + std::string(509, 'A');
  EXPECT_EQ(ReasonOf(DecodeRoleKey(long_rk2).status()),
            "ROLE_KEY_WIRE_INVALID");
  // Exactly 512 bytes passes the length gate and fails later.
  std::string at_limit = std::string("rk2.") + std::string(508, 'A');
  EXPECT_EQ(ReasonOf(DecodeRoleKey(at_limit).status()),
            "ROLE_KEY_NON_CANONICAL");
}

TEST(RoleKeyTest, DecodeRequiresTheRk2Prefix) {
  for (const char* wire : {"", "rk1.eyJ9", "RK2.eyJ9", "rk2", " rk2.eyJ9",
                           "eyJwcm9qZWN0X2lkIjoicHJqX0FBQUFBQUFB"}) {
    absl::StatusOr<RoleKey> key = DecodeRoleKey(wire);
    EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument) << wire;
    EXPECT_EQ(ReasonOf(key.status()), "ROLE_KEY_WIRE_PREFIX") << wire;
  }
}

TEST(RoleKeyTest, DecodeRejectsPaddingWhitespaceAndForeignCharacters) {
  const std::string body = std::string(kCtoWire).substr(4);
  const std::vector<std::string> wires = {
      "rk2.",                        // empty payload
      std::string(kCtoWire) + "==",  // padding
      std::string(kCtoWire) + "=",   //
      std::string(kCtoWire) + " ",   // trailing whitespace
      std::string(kCtoWire) + "\n",  //
      "rk2. " + body,                // leading whitespace
      "rk2." + body.substr(0, 10) + "+" + body.substr(11),  // base64, not url
      "rk2." + body.substr(0, 10) + "/" + body.substr(11),
      "rk2." + body.substr(0, 10) + "." + body.substr(11),
  };
  for (const std::string& wire : wires) {
    EXPECT_EQ(ReasonOf(DecodeRoleKey(wire).status()), "ROLE_KEY_NON_CANONICAL")
        << wire;
  }
}

TEST(RoleKeyTest, DecodeRejectsImpossibleOrNonZeroTailBase64) {
  // kCtoWire's payload has length % 4 == 2; one more character makes 3 (a
  // valid length whose extra byte breaks the JSON), two more make 0 mod 4.
  EXPECT_EQ(ReasonOf(DecodeRoleKey(std::string(kCtoWire) + "A").status()),
            "ROLE_KEY_NON_CANONICAL");
  // The payload ends in a 2-character group whose last 4 bits are unused:
  // 'Q' (010000) and 'R' (010001) carry the same byte, and a lenient decoder
  // (Node's) would accept both.
  std::string tail_bits(kCtoWire);
  tail_bits.back() = 'R';
  EXPECT_EQ(ReasonOf(DecodeRoleKey(tail_bits).status()),
            "ROLE_KEY_NON_CANONICAL");
  EXPECT_EQ(ReasonOf(DecodeRoleKey("rk2.A").status()),
            "ROLE_KEY_NON_CANONICAL");
  EXPECT_EQ(ReasonOf(DecodeRoleKey("rk2.AAAAA").status()),
            "ROLE_KEY_NON_CANONICAL");
}

TEST(RoleKeyTest, DecodeRejectsPayloadsThatAreNotJson) {
  for (const char* text :
       {"", "not json", R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA")",
        "{\"project_id\":\"\xff\"}"}) {
    EXPECT_EQ(ReasonOf(DecodeRoleKey(WireOf(text)).status()),
              "ROLE_KEY_NON_CANONICAL")
        << text;
  }
}

TEST(RoleKeyTest, DecodePassesOnTheNormalizerCodeForWellFormedBadKeys) {
  const std::vector<JsonCase> cases = {
      {R"(["prj_AAAAAAAAAAAAAAAAAAAAAA"])", "ROLE_KEY_INVALID"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"cto",)"
       R"("x":1})",
       "ROLE_KEY_FIELD_UNSUPPORTED"},
      {R"({"project_id":"prj_short","role_kind":"cto"})", "PROJECT_ID_INVALID"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"owner"})",
       "ROLE_KIND_UNSUPPORTED"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"cto",)"
       R"("scope_id":"scp_BBBBBBBBBBBBBBBBBBBBBB"})",
       "ROLE_SCOPE_FORBIDDEN"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"lead"})",
       "SCOPE_REQUIRED"},
      {R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"lead",)"
       R"("scope_id":"scp_bad"})",
       "SCOPE_ID_INVALID"},
  };
  for (const JsonCase& c : cases) {
    EXPECT_EQ(ReasonOf(DecodeRoleKey(WireOf(c.json_text)).status()), c.reason)
        << c.json_text;
  }
}

TEST(RoleKeyTest, DecodeRejectsValidKeysThatAreNotInCanonicalForm) {
  const std::vector<std::string> texts = {
      // key order (triflux 9.1 scenario 2)
      R"({"role_kind":"cto","project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA"})",
      // whitespace
      R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA", "role_kind":"cto"})",
      R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"cto"} )",
      // an escape that decodes to the same text
      R"({"project_id":"prj_\u0041AAAAAAAAAAAAAAAAAAAAA","role_kind":"cto"})",
      // duplicate key, last value wins and equals the canonical one
      R"({"project_id":"prj_CCCCCCCCCCCCCCCCCCCCCC",)"
      R"("project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"cto"})",
      R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA",)"
      R"("project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA","role_kind":"cto"})",
      // lead with scope before kind
      R"({"project_id":"prj_AAAAAAAAAAAAAAAAAAAAAA",)"
      R"("scope_id":"scp_BBBBBBBBBBBBBBBBBBBBBB","role_kind":"lead"})",
  };
  for (const std::string& text : texts) {
    absl::StatusOr<RoleKey> key = DecodeRoleKey(WireOf(text));
    EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(ReasonOf(key.status()), "ROLE_KEY_NON_CANONICAL") << text;
  }
}

TEST(RoleKeyTest, CtoWireRoundTripsAndContainsNoFilesystemPath) {
  // triflux 9.4 scenario 4.
  absl::StatusOr<std::string> wire = EncodeRoleKey(Cto());
  ASSERT_TRUE(wire.ok());
  EXPECT_EQ(wire->find('/'), std::string::npos);
  EXPECT_EQ(wire->find('\\'), std::string::npos);
  absl::StatusOr<RoleKey> key = DecodeRoleKey(*wire);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(*key, Cto());
}

TEST(RoleKeyTest, Base64UrlRoundTripsEveryLengthAndByteValue) {
  std::string bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(static_cast<char>(i));
  for (size_t n = 0; n <= bytes.size(); ++n) {
    const std::string prefix = bytes.substr(0, n);
    const std::string text = Base64UrlEncode(prefix);
    EXPECT_EQ(text.find('='), std::string::npos);
    EXPECT_NE(text.size() % 4, 1u);
    std::optional<std::string> back = Base64UrlDecodeStrict(text);
    ASSERT_TRUE(back.has_value()) << n;
    EXPECT_EQ(*back, prefix);
  }
  EXPECT_EQ(Base64UrlEncode("\xfb\xff"), "-_8");
  EXPECT_FALSE(Base64UrlDecodeStrict("-_8=").has_value());
  EXPECT_FALSE(Base64UrlDecodeStrict("+/8").has_value());
  EXPECT_FALSE(Base64UrlDecodeStrict("-_9").has_value());  // tail bits
}

}  // namespace
}  // namespace hub
