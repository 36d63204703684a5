#include "tests/random_request.h"

#include <cmath>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"

namespace hub::testing {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Reflection;

constexpr int kMaxDepth = 4;
constexpr size_t kBigString = 100 * 1024;
constexpr size_t kBigBudget = 1024 * 1024;

// Values that pass some validation, so that requests get past the first
// check and reach deeper code: ids of the right shapes, names the hub
// knows, a canonical role key wire, JSON text.
const char* const kPlausible[] = {
    "agent-a",
    "agent-b",
    "session:abc",
    "prj_AAAAAAAAAAAAAAAAAAAAAA",
    "scp_Zz9-_aB3cD4eF5gH6iJ7kL",
    "hst_abc",
    "topic:news",
    "topic:role:cto",
    "news",
    "cto",
    "lead",
    "codex",
    "claude",
    "tfx.transport-locator.v1",
    "trn_1",
    // One wire key, split over two lines (the parentheses say so).
    ("rk2.eyJwcm9qZWN0X2lkIjoicHJqX0FBQUFBQUFBQUFBQUFBQUFBQUFBQUEiLCJyb2xlX2tp"
     "bmQiOiJjdG8ifQ"),
    "rk2.",
    "{}",
    "[]",
    "{\"a\":1}",
    "[{\"schema_version\":\"tfx.transport-locator.v1\"}]",
    "state",
    "holder_agent_id",
    "patch.state",
    "018f0000-0000-7000-8000-000000000000",
};

std::string Repeat(const std::string& piece, size_t bytes) {
  std::string out;
  out.reserve(bytes + piece.size());
  while (out.size() < bytes) out += piece;
  return out;
}

}  // namespace

std::unique_ptr<google::protobuf::Message> RandomRequests::Message(
    const Descriptor* type) {
  const google::protobuf::Message* prototype =
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(type);
  std::unique_ptr<google::protobuf::Message> message(prototype->New());
  big_budget_ = kBigBudget;
  Fill(message.get(), 0);
  return message;
}

void RandomRequests::Fill(google::protobuf::Message* message, int depth) {
  const Descriptor* type = message->GetDescriptor();
  // Deeper levels set fewer fields, so recursive types (Struct) end.
  const uint64_t odds = depth == 0 ? 2 : depth + 2;
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    if (!OneIn(odds)) continue;
    if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE &&
        depth >= kMaxDepth) {
      continue;
    }
    if (field->is_repeated()) {
      const uint64_t count = OneIn(10) ? Below(40) : Below(4);
      for (uint64_t n = 0; n < count; ++n) SetField(message, field, depth);
    } else {
      SetField(message, field, depth);
    }
  }
}

void RandomRequests::SetField(google::protobuf::Message* message,
                              const FieldDescriptor* field, int depth) {
  const Reflection* r = message->GetReflection();
  const bool rep = field->is_repeated();
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32: {
      const auto v = static_cast<int32_t>(Int64());
      rep ? r->AddInt32(message, field, v) : r->SetInt32(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_INT64: {
      const int64_t v = Int64();
      rep ? r->AddInt64(message, field, v) : r->SetInt64(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT32: {
      const auto v = static_cast<uint32_t>(Uint64());
      rep ? r->AddUInt32(message, field, v) : r->SetUInt32(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_UINT64: {
      const uint64_t v = Uint64();
      rep ? r->AddUInt64(message, field, v) : r->SetUInt64(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_DOUBLE: {
      const double v = Double();
      rep ? r->AddDouble(message, field, v) : r->SetDouble(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_FLOAT: {
      const auto v = static_cast<float>(Double());
      rep ? r->AddFloat(message, field, v) : r->SetFloat(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_BOOL: {
      const bool v = OneIn(2);
      rep ? r->AddBool(message, field, v) : r->SetBool(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_ENUM: {
      const int v = EnumNumber(field->enum_type());
      rep ? r->AddEnumValue(message, field, v)
          : r->SetEnumValue(message, field, v);
      break;
    }
    case FieldDescriptor::CPPTYPE_STRING: {
      // proto3 strings must be UTF-8 to serialize; bytes fields take any.
      std::string v = field->type() == FieldDescriptor::TYPE_BYTES
                          ? Bytes(OneIn(20) ? 4096 : 64)
                          : String();
      rep ? r->AddString(message, field, std::move(v))
          : r->SetString(message, field, std::move(v));
      break;
    }
    case FieldDescriptor::CPPTYPE_MESSAGE: {
      google::protobuf::Message* child =
          rep ? r->AddMessage(message, field)
              : r->MutableMessage(message, field);
      Fill(child, depth + 1);
      break;
    }
  }
}

std::string RandomRequests::String() {
  switch (Below(10)) {
    case 0:
      return "";
    case 1:
    case 2:
    case 3:
      return kPlausible[Below(std::size(kPlausible))];
    case 4: {  // printable ASCII
      std::string s(1 + Below(40), ' ');
      for (char& c : s) c = static_cast<char>(' ' + Below(95));
      return s;
    }
    case 5: {  // multi-byte: "é", CJK, an emoji, and a combining accent
      static const std::string kPieces[] = {"\xC3\xA9", "\xE6\x97\xA5",
                                            "\xF0\x9F\x98\x80", "e\xCC\x81"};
      std::string s = "a";
      for (uint64_t n = 1 + Below(120); n > 0; --n) s += kPieces[Below(4)];
      return s;
    }
    case 6:  // past every id's bound, and past 8 KiB of trailers
      return std::string(OneIn(2) ? 300 : 6000, 'h');
    case 7:
      if (big_budget_ >= kBigString) {
        big_budget_ -= kBigString;
        return Repeat(OneIn(2) ? "x" : "\xC3\xA9", kBigString);
      }
      return "big";
    case 8:  // a plausible value with a multi-byte tail
      return absl::StrCat(kPlausible[Below(std::size(kPlausible))],
                          Repeat("\xC3\xA9", Below(100)));
    default:
      return absl::StrCat(Below(1000));
  }
}

std::string RandomRequests::Bytes(size_t max) {
  std::string s(Below(max + 1), '\0');
  for (char& c : s) c = static_cast<char>(Below(256));
  return s;
}

int64_t RandomRequests::Int64() {
  static const int64_t kEdges[] = {0,
                                   1,
                                   -1,
                                   2,
                                   7,
                                   1000,
                                   10000,
                                   86'400'000,
                                   4102444800,
                                   (int64_t{1} << 53) + 1,
                                   std::numeric_limits<int32_t>::max(),
                                   std::numeric_limits<int32_t>::min(),
                                   std::numeric_limits<int64_t>::max(),
                                   std::numeric_limits<int64_t>::min()};
  if (OneIn(3)) return static_cast<int64_t>(rng_());
  return kEdges[Below(std::size(kEdges))];
}

uint64_t RandomRequests::Uint64() { return static_cast<uint64_t>(Int64()); }

double RandomRequests::Double() {
  static const double kEdges[] = {0.0,
                                  -1.0,
                                  0.5,
                                  1e308,
                                  -1e308,
                                  std::numeric_limits<double>::infinity(),
                                  -std::numeric_limits<double>::infinity(),
                                  std::numeric_limits<double>::quiet_NaN(),
                                  std::numeric_limits<double>::denorm_min()};
  return kEdges[Below(std::size(kEdges))];
}

int RandomRequests::EnumNumber(const google::protobuf::EnumDescriptor* type) {
  // proto3 enums are open: a number outside the enum travels as is.
  if (OneIn(4)) {
    static const int kUnknown[] = {-1, 99, 12345,
                                   std::numeric_limits<int32_t>::max(),
                                   std::numeric_limits<int32_t>::min()};
    return kUnknown[Below(std::size(kUnknown))];
  }
  return type->value(static_cast<int>(Below(type->value_count())))->number();
}

std::string RandomRequests::Garbage(const Descriptor* type) {
  switch (Below(5)) {
    case 0:
      return Bytes(64);
    case 1: {  // a valid message cut short
      std::string bytes = Message(type)->SerializeAsString();
      if (bytes.empty()) return "\x0a";
      return bytes.substr(0, Below(bytes.size()));
    }
    case 2:  // field 1, length-delimited, 5 bytes promised, 2 given
      return std::string(
          "\x0a\x05"
          "ab",
          4);
    case 3:  // field 1 with wire type 7, which does not exist
      return std::string("\x0f\x01", 2);
    default: {  // a string field holding invalid UTF-8
      for (int i = 0; i < type->field_count(); ++i) {
        const FieldDescriptor* field = type->field(i);
        if (field->type() != FieldDescriptor::TYPE_STRING) continue;
        std::string bytes;
        uint32_t tag = (static_cast<uint32_t>(field->number()) << 3) | 2;
        while (tag >= 0x80) {
          bytes += static_cast<char>((tag & 0x7F) | 0x80);
          tag >>= 7;
        }
        bytes += static_cast<char>(tag);
        return absl::StrCat(bytes, std::string("\x03"
                                               "a\xC3(",
                                               4));
      }
      return std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11);
    }
  }
}

}  // namespace hub::testing
