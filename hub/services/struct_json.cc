#include "hub/services/struct_json.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace hub {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

absl::Status TooDeep() {
  return absl::InvalidArgumentError(
      absl::StrCat("JSON nests deeper than ", kMaxJsonDepth, " levels"));
}

// ---- writing ----

void AppendString(absl::string_view s, std::string* out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  for (const char ch : s) {
    const unsigned char c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\b':
        out->append("\\b");
        break;
      case '\f':
        out->append("\\f");
        break;
      case '\n':
        out->append("\\n");
        break;
      case '\r':
        out->append("\\r");
        break;
      case '\t':
        out->append("\\t");
        break;
      default:
        if (c < 0x20) {
          out->append("\\u00");
          out->push_back(kHex[c >> 4]);
          out->push_back(kHex[c & 0xf]);
        } else {
          out->push_back(ch);
        }
    }
  }
  out->push_back('"');
}

absl::Status AppendNumber(double d, std::string* out) {
  if (!std::isfinite(d)) {
    return absl::InvalidArgumentError(
        "a number is NaN or infinite, which JSON cannot carry");
  }
  char buf[32];
  // Integral values within a double's exact range print as integers.
  if (std::trunc(d) == d && std::fabs(d) < 9007199254740992.0) {
    std::snprintf(buf, sizeof(buf), "%lld", static_cast<long long>(d));
  } else {
    std::snprintf(buf, sizeof(buf), "%.15g", d);
    if (std::strtod(buf, nullptr) != d) {
      std::snprintf(buf, sizeof(buf), "%.17g", d);
    }
  }
  out->append(buf);
  return absl::OkStatus();
}

absl::Status AppendValue(const Value& v, int depth, std::string* out);

absl::Status AppendStruct(const Struct& s, int depth, std::string* out) {
  if (depth > kMaxJsonDepth) return TooDeep();
  std::vector<const google::protobuf::Map<std::string, Value>::value_type*>
      fields;
  fields.reserve(s.fields_size());
  for (const auto& field : s.fields()) fields.push_back(&field);
  std::sort(fields.begin(), fields.end(),
            [](const auto* a, const auto* b) { return a->first < b->first; });
  out->push_back('{');
  bool first = true;
  for (const auto* field : fields) {
    if (!first) out->push_back(',');
    first = false;
    AppendString(field->first, out);
    out->push_back(':');
    if (absl::Status s = AppendValue(field->second, depth + 1, out); !s.ok()) {
      return s;
    }
  }
  out->push_back('}');
  return absl::OkStatus();
}

absl::Status AppendList(const ListValue& list, int depth, std::string* out) {
  if (depth > kMaxJsonDepth) return TooDeep();
  out->push_back('[');
  bool first = true;
  for (const Value& v : list.values()) {
    if (!first) out->push_back(',');
    first = false;
    if (absl::Status s = AppendValue(v, depth + 1, out); !s.ok()) return s;
  }
  out->push_back(']');
  return absl::OkStatus();
}

absl::Status AppendValue(const Value& v, int depth, std::string* out) {
  switch (v.kind_case()) {
    case Value::kNullValue:
      out->append("null");
      return absl::OkStatus();
    case Value::kNumberValue:
      return AppendNumber(v.number_value(), out);
    case Value::kStringValue:
      AppendString(v.string_value(), out);
      return absl::OkStatus();
    case Value::kBoolValue:
      out->append(v.bool_value() ? "true" : "false");
      return absl::OkStatus();
    case Value::kStructValue:
      return AppendStruct(v.struct_value(), depth, out);
    case Value::kListValue:
      return AppendList(v.list_value(), depth, out);
    case Value::KIND_NOT_SET:
      break;
  }
  return absl::InvalidArgumentError("a value has no kind set");
}

// ---- reading ----

// nlohmann's SAX events, building the Value as they come: no document in
// between. Containers open on a stack of Values; a scalar or a new container
// goes into the innermost open one (after its key, for an object).
class ValueBuilder {
 public:
  using Json = nlohmann::json;

  explicit ValueBuilder(Value* root) : root_(root) {}

  bool null() {
    return Put(
        [](Value* v) { v->set_null_value(google::protobuf::NULL_VALUE); });
  }
  bool boolean(bool b) {
    return Put([b](Value* v) { v->set_bool_value(b); });
  }
  bool number_integer(Json::number_integer_t n) {
    return Put([n](Value* v) { v->set_number_value(static_cast<double>(n)); });
  }
  bool number_unsigned(Json::number_unsigned_t n) {
    return Put([n](Value* v) { v->set_number_value(static_cast<double>(n)); });
  }
  bool number_float(Json::number_float_t n, const Json::string_t&) {
    return Put([n](Value* v) { v->set_number_value(n); });
  }
  bool string(Json::string_t& s) {
    return Put([&s](Value* v) { v->set_string_value(std::move(s)); });
  }
  bool binary(Json::binary_t&) {  // not produced by the JSON format
    error_ = absl::InvalidArgumentError("binary values are not JSON");
    return false;
  }
  bool start_object(std::size_t) {
    return Open([](Value* v) { v->mutable_struct_value(); });
  }
  bool key(Json::string_t& k) {
    key_ = std::move(k);
    return true;
  }
  bool end_object() {
    open_.pop_back();
    return true;
  }
  bool start_array(std::size_t) {
    return Open([](Value* v) { v->mutable_list_value(); });
  }
  bool end_array() {
    open_.pop_back();
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) {
    error_ = absl::InvalidArgumentError(
        absl::StrCat("not valid JSON (at byte ", position, ")"));
    return false;
  }

  const absl::Status& error() const { return error_; }

 private:
  // The Value the next event fills.
  Value* Slot() {
    if (open_.empty()) return root_;
    Value* top = open_.back();
    if (top->has_list_value()) return top->mutable_list_value()->add_values();
    // A repeated key: the last one wins, as in JSON.parse.
    Value* field = &(*top->mutable_struct_value()->mutable_fields())[key_];
    field->Clear();
    return field;
  }

  template <typename Fill>
  bool Put(Fill fill) {
    fill(Slot());
    return true;
  }

  template <typename Fill>
  bool Open(Fill fill) {
    if (open_.size() >= static_cast<size_t>(kMaxJsonDepth)) {
      error_ = TooDeep();
      return false;
    }
    Value* v = Slot();
    fill(v);
    open_.push_back(v);
    return true;
  }

  Value* const root_;
  std::vector<Value*> open_;
  std::string key_;
  absl::Status error_;
};

}  // namespace

absl::StatusOr<std::string> StructToJson(const Struct& s) {
  std::string out;
  if (absl::Status status = AppendStruct(s, 1, &out); !status.ok()) {
    return status;
  }
  return out;
}

absl::StatusOr<Value> JsonToValue(absl::string_view json) {
  Value value;
  ValueBuilder builder(&value);
  const bool ok = nlohmann::json::sax_parse(json.begin(), json.end(), &builder);
  if (!ok) {
    if (!builder.error().ok()) return builder.error();
    return absl::InvalidArgumentError("not valid JSON");
  }
  return value;
}

absl::StatusOr<Struct> JsonToStruct(absl::string_view json) {
  absl::StatusOr<Value> value = JsonToValue(json);
  if (!value.ok()) return value.status();
  if (!value->has_struct_value()) {
    return absl::InvalidArgumentError("JSON is not an object");
  }
  return std::move(*value->mutable_struct_value());
}

}  // namespace hub
