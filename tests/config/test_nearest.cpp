// "Did you mean" (core/nearest.hpp): the nearest known name to a typo, or none.
#include <catch2/catch.hpp>
#include <string_view>

#include "core/nearest.hpp"

using namespace qkv;

TEST_CASE("nearest: edit distance counts a swap of neighbours as one") {
  CHECK(edit_distance("", "") == 0);
  CHECK(edit_distance("abc", "") == 3);
  CHECK(edit_distance("d_modle", "d_model") == 1);
  CHECK(edit_distance("kitten", "sitting") == 3);
  CHECK(edit_distance("Adam", "adam") == 0);  // case is not a typo worth counting
  CHECK(edit_distance("sinusoid", "sinusoidal") == 2);
}

TEST_CASE("nearest: a name near enough to be a typo, never a far or tied one") {
  constexpr std::string_view positions[] = {"sinusoidal", "learned", "relative", "rope", "none"};
  CHECK(nearest_name("sinusoid", positions) == std::optional<std::string_view>("sinusoidal"));
  CHECK(nearest_name("leanred", positions) == std::optional<std::string_view>("learned"));
  CHECK(nearest_name("rotary", positions) == std::nullopt);
  CHECK(nearest_name("", positions) == std::nullopt);
  constexpr std::string_view tied[] = {"ab", "ba"};
  CHECK(nearest_name("aa", tied) == std::nullopt);
  CHECK(did_you_mean("sinusoid", positions, "\"", "\"") == "; did you mean \"sinusoidal\"?");
  CHECK(did_you_mean("rope", positions).empty());  // the name itself: nothing to suggest
  CHECK(did_you_mean("zzz", positions).empty());
}
