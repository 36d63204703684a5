#include "hub/services/struct_json.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "nlohmann/json.hpp"

namespace hub {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;
using google::protobuf::util::MessageDifferencer;

Struct Parsed(const std::string& json) {
  absl::StatusOr<Struct> s = JsonToStruct(json);
  EXPECT_TRUE(s.ok()) << json << ": " << s.status();
  return s.ok() ? *s : Struct();
}

std::string Written(const Struct& s) {
  absl::StatusOr<std::string> json = StructToJson(s);
  EXPECT_TRUE(json.ok()) << json.status();
  return json.ok() ? *json : "";
}

// A random Value of every kind, nested up to `depth`.
Value RandomValue(std::mt19937_64& rng, int depth) {
  Value v;
  std::uniform_int_distribution<int> kind(0, depth > 0 ? 5 : 3);
  switch (kind(rng)) {
    case 0:
      v.set_null_value(google::protobuf::NULL_VALUE);
      break;
    case 1: {
      std::uniform_int_distribution<int> form(0, 3);
      std::uniform_real_distribution<double> real(-1e6, 1e6);
      switch (form(rng)) {
        case 0:
          v.set_number_value(std::round(real(rng)));
          break;
        case 1:
          v.set_number_value(real(rng));
          break;
        case 2:
          v.set_number_value(real(rng) * 1e300);
          break;
        default:
          v.set_number_value(real(rng) * 1e-300);
      }
      break;
    }
    case 2: {
      std::string s;
      std::uniform_int_distribution<int> len(0, 12);
      std::uniform_int_distribution<int> byte(1, 127);
      for (int i = len(rng); i > 0; --i) s.push_back(char(byte(rng)));
      if (len(rng) % 3 == 0) s += "\xc3\xa9\xe2\x82\xac";  // é€
      v.set_string_value(s);
      break;
    }
    case 3:
      v.set_bool_value(rng() % 2 == 0);
      break;
    case 4: {
      auto* fields = v.mutable_struct_value()->mutable_fields();
      for (int i = rng() % 4; i > 0; --i) {
        (*fields)["k" + std::to_string(rng() % 100)] =
            RandomValue(rng, depth - 1);
      }
      break;
    }
    default: {
      auto* list = v.mutable_list_value();
      for (int i = rng() % 4; i > 0; --i) {
        *list->add_values() = RandomValue(rng, depth - 1);
      }
    }
  }
  return v;
}

TEST(StructJsonTest, WritesWhatProtobufWritesForRandomStructs) {
  std::mt19937_64 rng(20261130);
  for (int i = 0; i < 2000; ++i) {
    Struct s;
    for (int f = rng() % 6; f > 0; --f) {
      (*s.mutable_fields())["f" + std::to_string(f)] = RandomValue(rng, 4);
    }
    std::string theirs;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(s, &theirs).ok());
    const std::string ours = Written(s);
    // protobuf orders keys as its map happens to iterate; compare documents,
    // and numbers as the text each wrote.
    EXPECT_EQ(nlohmann::json::parse(ours), nlohmann::json::parse(theirs))
        << "ours:   " << ours << "\ntheirs: " << theirs;
    Struct back;
    ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(ours, &back).ok());
    EXPECT_TRUE(MessageDifferencer::Equals(back, s)) << ours;
    EXPECT_TRUE(MessageDifferencer::Equals(Parsed(ours), s)) << ours;
    Struct theirs_back;
    ASSERT_TRUE(
        google::protobuf::util::JsonStringToMessage(theirs, &theirs_back).ok());
    EXPECT_TRUE(MessageDifferencer::Equals(Parsed(theirs), theirs_back));
  }
}

TEST(StructJsonTest, WritesNumbersAsProtobufAndJavaScriptDo) {
  const std::pair<double, const char*> cases[] = {
      {0, "0"},
      {1, "1"},
      {-42, "-42"},
      {1.5, "1.5"},
      {0.1, "0.1"},
      {0.1 + 0.2, "0.30000000000000004"},
      {1e21, "1e+21"},
      {123456789012, "123456789012"},
      {9007199254740991.0, "9007199254740991"},
      {1e-7, "1e-07"},
  };
  for (const auto& [number, text] : cases) {
    Struct s;
    (*s.mutable_fields())["n"].set_number_value(number);
    std::string theirs;
    ASSERT_TRUE(google::protobuf::util::MessageToJsonString(s, &theirs).ok());
    EXPECT_EQ(Written(s), std::string("{\"n\":") + text + "}") << number;
    EXPECT_EQ(nlohmann::json::parse(Written(s)), nlohmann::json::parse(theirs));
  }
}

TEST(StructJsonTest, SortsKeysAndEscapesStringsAsJsonStringifyDoes) {
  Struct s;
  (*s.mutable_fields())["b"].set_string_value("quote \" slash \\ nl \n tab \t");
  (*s.mutable_fields())["a"].set_string_value(
      std::string("nul \0 bell \x07", 12));
  (*s.mutable_fields())["c"].set_string_value("caf\xc3\xa9 </script>");
  EXPECT_EQ(Written(s), R"({"a":"nul \u0000 bell \u0007",)"
                        R"("b":"quote \" slash \\ nl \n tab \t",)"
                        "\"c\":\"caf\xc3\xa9 </script>\"}");
}

TEST(StructJsonTest, RefusesNumbersJsonCannotCarry) {
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity(),
                     -std::numeric_limits<double>::infinity()}) {
    Struct s;
    (*s.mutable_fields())["n"].set_number_value(bad);
    EXPECT_EQ(StructToJson(s).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

TEST(StructJsonTest, RefusesAValueWithNoKind) {
  Struct s;
  (*s.mutable_fields())["empty"];
  EXPECT_EQ(StructToJson(s).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(StructJsonTest, ReadsEveryKindAndKeepsTheLastOfARepeatedKey) {
  Struct s = Parsed(
      R"( {"n": -1.25e2, "i": 7, "u": 18446744073709551615, "t": true,
          "z": null, "s": "\u00e9\n", "l": [1, [2], {}],
          "d": {"x": 1}, "d": {"y": 2}} )");
  const auto& f = s.fields();
  EXPECT_EQ(f.at("n").number_value(), -125);
  EXPECT_EQ(f.at("i").number_value(), 7);
  EXPECT_EQ(f.at("u").number_value(), 18446744073709551615.0);
  EXPECT_TRUE(f.at("t").bool_value());
  EXPECT_TRUE(f.at("z").has_null_value());
  EXPECT_EQ(f.at("s").string_value(), "\xc3\xa9\n");
  EXPECT_EQ(f.at("l").list_value().values_size(), 3);
  EXPECT_EQ(
      f.at("l").list_value().values(1).list_value().values(0).number_value(),
      2);
  EXPECT_EQ(Written(f.at("d").struct_value()), R"({"y":2})");
}

TEST(StructJsonTest, RefusesTextThatIsNotOneJsonObject) {
  for (const char* bad : {"", "{", "{\"a\":}", "{} {}", "{\"a\":1,}", "[1]",
                          "\"s\"", "1", "{\"a\":\"\xff\"}", "{'a':1}", "nul"}) {
    EXPECT_EQ(JsonToStruct(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  absl::StatusOr<Value> list = JsonToValue("[1, \"x\"]");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->list_value().values_size(), 2);
}

TEST(StructJsonTest, NestingIsBoundedBothWays) {
  auto nested = [](int depth) {
    std::string json;
    for (int i = 0; i < depth; ++i) json += "{\"a\":";
    json += "1";
    for (int i = 0; i < depth; ++i) json += "}";
    return json;
  };
  absl::StatusOr<Struct> deepest = JsonToStruct(nested(kMaxJsonDepth));
  ASSERT_TRUE(deepest.ok()) << deepest.status();
  EXPECT_EQ(Written(*deepest), nested(kMaxJsonDepth));
  EXPECT_EQ(JsonToStruct(nested(kMaxJsonDepth + 1)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(JsonToStruct(std::string(100000, '[')).status().code(),
            absl::StatusCode::kInvalidArgument);

  Struct too_deep = *deepest;
  Struct* inner = &too_deep;
  while (inner->fields().at("a").has_struct_value()) {
    inner = (*inner->mutable_fields())["a"].mutable_struct_value();
  }
  (*inner->mutable_fields())["a"].mutable_struct_value();
  EXPECT_EQ(StructToJson(too_deep).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace hub
