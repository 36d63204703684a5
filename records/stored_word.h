// One table per state enum of records/: each value beside the word SQL
// stores it as (triflux's spelling). The name and parse functions of every
// enum are lookups in its table, so a value and its word are written down
// once.
#ifndef HUB_RECORDS_STORED_WORD_H_
#define HUB_RECORDS_STORED_WORD_H_

#include <cstddef>
#include <optional>

#include "absl/strings/string_view.h"

namespace hub {

template <typename Enum>
struct StoredWord {
  Enum value;
  absl::string_view word;
};

// The word of `value` in `table` ("" for a value the table lacks, which a
// table listing every value never does).
template <typename Enum, size_t N>
constexpr absl::string_view WordIn(const StoredWord<Enum> (&table)[N],
                                   Enum value) {
  for (const StoredWord<Enum>& entry : table) {
    if (entry.value == value) return entry.word;
  }
  return "";
}

// The value whose word is `word` (exact, case-sensitive), or nullopt.
template <typename Enum, size_t N>
constexpr std::optional<Enum> ValueIn(const StoredWord<Enum> (&table)[N],
                                      absl::string_view word) {
  for (const StoredWord<Enum>& entry : table) {
    if (entry.word == word) return entry.value;
  }
  return std::nullopt;
}

}  // namespace hub

#endif  // HUB_RECORDS_STORED_WORD_H_
