// Random requests for any protobuf message type, built by reflection, and
// random bytes that are not one: the inputs of the black-box error contract
// test (tests/error_contract_test.cc). Deterministic for a given seed, so a
// failure replays exactly.
#ifndef HUB_TESTS_RANDOM_REQUEST_H_
#define HUB_TESTS_RANDOM_REQUEST_H_

#include <google/protobuf/descriptor.h>
#include <google/protobuf/message.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <string>

namespace hub::testing {

class RandomRequests {
 public:
  explicit RandomRequests(uint64_t seed) : rng_(seed) {}

  // A well-formed message of `type` (linked into the generated pool):
  // any subset of its fields set, strings from plausible ids to multi-byte
  // text and 100 KiB runs, extreme numbers, unknown enum values, repeated
  // and map fields of random length, nested messages down to a few levels.
  // Its serialized size stays below 1.5 MiB, under hubd's default
  // max_request_bytes (2 MiB), so hubd itself answers it.
  std::unique_ptr<google::protobuf::Message> Message(
      const google::protobuf::Descriptor* type);

  // Bytes that are probably not a `type`: random bytes, a truncated valid
  // message, a length past the end, an invalid wire type, or a string field
  // holding invalid UTF-8. Some may still parse; callers check.
  std::string Garbage(const google::protobuf::Descriptor* type);

  uint64_t Below(uint64_t n) {
    return std::uniform_int_distribution<uint64_t>(0, n - 1)(rng_);
  }
  bool OneIn(uint64_t n) { return Below(n) == 0; }

 private:
  void Fill(google::protobuf::Message* message, int depth);
  void SetField(google::protobuf::Message* message,
                const google::protobuf::FieldDescriptor* field, int depth);
  std::string String();
  std::string Bytes(size_t max);
  int64_t Int64();
  uint64_t Uint64();
  double Double();
  int EnumNumber(const google::protobuf::EnumDescriptor* type);

  std::mt19937_64 rng_;
  size_t big_budget_ = 0;  // bytes that 100 KiB strings may still use
};

}  // namespace hub::testing

#endif  // HUB_TESTS_RANDOM_REQUEST_H_
