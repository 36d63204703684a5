#include "status/status.h"

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace hub {
namespace {

// Payload type URLs. They never leave the process: the gRPC edge turns them
// into google.rpc.ErrorInfo.
constexpr absl::string_view kReasonUrl = "hub.v1/reason";
constexpr absl::string_view kMetadataUrlPrefix = "hub.v1/metadata/";

constexpr absl::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr absl::string_view kEllipsis = "\xE2\x80\xA6";     // U+2026

bool IsContinuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// The length of the well-formed UTF-8 sequence at the start of `s`
// (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), or
// 0 when it does not start with one.
size_t SequenceLength(absl::string_view s) {
  const auto byte = [&s](size_t i) {
    return i < s.size() ? static_cast<unsigned char>(s[i]) : 0;
  };
  const unsigned char c = byte(0);
  if (c < 0x80) return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF;  // the second byte's range
  if (c >= 0xC2 && c <= 0xDF) {
    length = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    length = 3;
    if (c == 0xE0) low = 0xA0;   // overlong
    if (c == 0xED) high = 0x9F;  // surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    length = 4;
    if (c == 0xF0) low = 0x90;   // overlong
    if (c == 0xF4) high = 0x8F;  // above U+10FFFF
  } else {
    return 0;
  }
  if (byte(1) < low || byte(1) > high) return 0;
  for (size_t i = 2; i < length; ++i) {
    if (!IsContinuation(byte(i))) return 0;
  }
  return length;
}

}  // namespace

absl::Status ReasonError(absl::StatusCode code, absl::string_view reason,
                         absl::string_view message) {
  absl::Status status(code, message);
  status.SetPayload(kReasonUrl, absl::Cord(reason));
  return status;
}

absl::Status InvalidArgumentError(absl::string_view reason,
                                  absl::string_view message) {
  return ReasonError(absl::StatusCode::kInvalidArgument, reason, message);
}

absl::Status FailedPreconditionError(absl::string_view reason,
                                     absl::string_view message) {
  return ReasonError(absl::StatusCode::kFailedPrecondition, reason, message);
}

absl::Status AbortedError(absl::string_view reason, absl::string_view message) {
  return ReasonError(absl::StatusCode::kAborted, reason, message);
}

absl::Status NotFoundError(absl::string_view reason,
                           absl::string_view message) {
  return ReasonError(absl::StatusCode::kNotFound, reason, message);
}

absl::Status UnavailableError(absl::string_view reason,
                              absl::string_view message) {
  return ReasonError(absl::StatusCode::kUnavailable, reason, message);
}

absl::Status ResourceExhaustedError(absl::string_view reason,
                                    absl::string_view message) {
  return ReasonError(absl::StatusCode::kResourceExhausted, reason, message);
}

absl::Status LimitExceededError(absl::string_view limit, int64_t value,
                                absl::string_view message) {
  absl::Status s = ResourceExhaustedError("LIMIT_EXCEEDED", message);
  s = WithMetadata(std::move(s), "limit", limit);
  return WithMetadata(std::move(s), "limit_value", absl::StrCat(value));
}

std::string ReasonOf(const absl::Status& status) {
  absl::optional<absl::Cord> reason = status.GetPayload(kReasonUrl);
  return reason.has_value() ? std::string(*reason) : std::string();
}

absl::Status WithMetadata(absl::Status status, absl::string_view key,
                          absl::string_view value) {
  if (status.ok()) return status;
  status.SetPayload(absl::StrCat(kMetadataUrlPrefix, key), absl::Cord(value));
  return status;
}

std::map<std::string, std::string> MetadataOf(const absl::Status& status) {
  std::map<std::string, std::string> metadata;
  status.ForEachPayload(
      [&metadata](absl::string_view url, const absl::Cord& payload) {
        if (absl::StartsWith(url, kMetadataUrlPrefix)) {
          metadata[std::string(url.substr(kMetadataUrlPrefix.size()))] =
              std::string(payload);
        }
      });
  return metadata;
}

std::string ErrorText(absl::string_view text, size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes + kReplacement.size()));
  size_t i = 0;
  // One character past the bound is enough to know the text must be cut.
  while (i < text.size() && out.size() <= max_bytes) {
    const size_t length = SequenceLength(text.substr(i));
    if (length == 0) {
      out.append(kReplacement.data(), kReplacement.size());
      ++i;
    } else {
      out.append(text.data() + i, length);
      i += length;
    }
  }
  if (out.size() <= max_bytes && i == text.size()) return out;
  // Cut on a character boundary so that the ellipsis still fits.
  size_t cut = max_bytes - kEllipsis.size();
  while (cut > 0 && IsContinuation(static_cast<unsigned char>(out[cut]))) {
    --cut;
  }
  out.resize(cut);
  out.append(kEllipsis.data(), kEllipsis.size());
  return out;
}

}  // namespace hub
