#include "core/nearest.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace qkv {

size_t edit_distance(std::string_view a, std::string_view b) {
  const auto lower = [](char c) { return std::tolower(static_cast<unsigned char>(c)); };
  // rows i-2, i-1 and i of the distance table between a[:i] and b[:j]
  std::vector<size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1]))
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);  // two neighbours swapped
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::optional<std::string_view> nearest_name(std::string_view given,
                                             std::span<const std::string_view> names) {
  std::optional<std::string_view> best;
  size_t best_d = 0;
  bool tie = false;
  for (std::string_view n : names) {
    const size_t d = edit_distance(given, n);
    const size_t allowed = std::max<size_t>(1, std::max(given.size(), n.size()) / 3);
    if (d > allowed) continue;
    if (!best || d < best_d) {
      best = n, best_d = d, tie = false;
    } else if (d == best_d && n != *best) {
      tie = true;
    }
  }
  if (tie) return std::nullopt;
  return best;
}

std::string did_you_mean(std::string_view given, std::span<const std::string_view> names,
                         std::string_view before, std::string_view after) {
  const std::optional<std::string_view> n = nearest_name(given, names);
  if (!n || *n == given) return "";
  std::string out = "; did you mean ";
  out.append(before).append(*n).append(after).append("?");
  return out;
}

}  // namespace qkv
