#include "hub/store_identity.h"

#include <openssl/evp.h>

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "registry/status.h"

namespace hub {

absl::StatusOr<std::string> AbsoluteDatabasePath(absl::string_view path) {
  std::error_code error;
  std::filesystem::path absolute = std::filesystem::absolute(
      std::filesystem::path(std::string(path)), error);
  if (error) {
    return UnavailableError("STORE_UNAVAILABLE",
                            absl::StrCat("cannot resolve database path ", path,
                                         ": ", error.message()));
  }
  return absolute.lexically_normal().string();
}

std::string SqliteStoreFingerprint(absl::string_view absolute_path) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_Digest(absolute_path.data(), absolute_path.size(), digest, &length,
             EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sqlite:";
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 0xf]);
  }
  return out;
}

}  // namespace hub
