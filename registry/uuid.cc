#include "registry/uuid.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace hub {
namespace {

constexpr int64_t kMaxMillis = (int64_t{1} << 48) - 1;
constexpr uint32_t kMaxCounter = 0xFFF;
constexpr char kHexDigits[] = "0123456789abcdef";

bool IsLowerHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

// Fills `out` with OS entropy. Ids must be unique across processes and
// hosts, so without entropy there is nothing safe to return: abort.
void FillFromOs(uint8_t* out, size_t n) {
  while (n > 0) {
    const ssize_t got = getrandom(out, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      std::fprintf(stderr, "hub: getrandom failed: %s\n", std::strerror(errno));
      std::abort();
    }
    out += got;
    n -= static_cast<size_t>(got);
  }
}

}  // namespace

UuidV7Generator::UuidV7Generator(const Clock* clock) : clock_(clock) {}

void UuidV7Generator::RandomBytes(uint8_t* out, size_t n) {
  while (n > 0) {
    if (pool_used_ == kPoolBytes) {
      FillFromOs(pool_, kPoolBytes);
      pool_used_ = 0;
    }
    const size_t take = std::min(n, kPoolBytes - pool_used_);
    std::memcpy(out, pool_ + pool_used_, take);
    pool_used_ += take;
    out += take;
    n -= take;
  }
}

std::string UuidV7Generator::Next() {
  // Read outside the lock: a reading that loses the race to the lock looks
  // like a backwards step, which the ordering below already absorbs.
  const int64_t now =
      std::clamp<int64_t>(UnixMillis(clock_->Now()), 0, kMaxMillis);
  uint8_t bytes[16];
  {
    absl::MutexLock lock(&mu_);
    if (now > last_ms_) {
      last_ms_ = now;
      counter_ = 0;
    } else if (++counter_ > kMaxCounter) {
      // Counter exhausted (or clock behind): borrow the next ms. Past the
      // 48-bit range (year 10889) the timestamp would wrap; not handled.
      ++last_ms_;
      counter_ = 0;
    }
    for (int i = 0; i < 6; ++i) {
      bytes[i] = static_cast<uint8_t>(last_ms_ >> (40 - 8 * i));
    }
    bytes[6] = static_cast<uint8_t>(0x70 | (counter_ >> 8));
    bytes[7] = static_cast<uint8_t>(counter_ & 0xFF);
    RandomBytes(bytes + 8, 8);
  }
  bytes[8] = static_cast<uint8_t>(0x80 | (bytes[8] & 0x3F));

  std::string text;
  text.reserve(36);
  for (int i = 0; i < 16; ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) text.push_back('-');
    text.push_back(kHexDigits[bytes[i] >> 4]);
    text.push_back(kHexDigits[bytes[i] & 0x0F]);
  }
  return text;
}

bool IsUuidV7(absl::string_view text) {
  if (text.size() != 36) return false;
  for (size_t i = 0; i < text.size(); ++i) {
    const bool dash = i == 8 || i == 13 || i == 18 || i == 23;
    if (dash ? text[i] != '-' : !IsLowerHex(text[i])) return false;
  }
  return text[14] == '7' && (text[19] == '8' || text[19] == '9' ||
                             text[19] == 'a' || text[19] == 'b');
}

std::optional<int64_t> UuidV7UnixMillis(absl::string_view text) {
  if (!IsUuidV7(text)) return std::nullopt;
  int64_t ms = 0;
  for (char c : absl::StrCat(text.substr(0, 8), text.substr(9, 4))) {
    ms = (ms << 4) | (c <= '9' ? c - '0' : c - 'a' + 10);
  }
  return ms;
}

}  // namespace hub
