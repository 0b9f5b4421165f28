// The probe input of the head scores (interp/repeated_tokens.hpp): [bos] r r rows, r uniform
// over the non-special ids, reproducible from the generator.
#include <catch2/catch.hpp>

#include <set>

#include "interp/repeated_tokens.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::interp;
using namespace qkv::testing;

TEST_CASE("repeated_tokens: bos, then r twice, r drawn from the non-special ids") {
  const RepeatedTokens spec{
      .batch = 64, .length = 5, .vocab = 7, .specials = {0, 1, 2, 3}, .bos = 1};
  Generator g(21);
  const Tensor t = repeated_tokens(spec, g);
  REQUIRE(t.shape() == Shape{64, 11});
  REQUIRE(t.dtype() == DType::i64);
  std::set<int64_t> seen;
  for (int64_t b = 0; b < 64; ++b) {
    CHECK(t.at({b, 0}) == 1);
    for (int64_t k = 0; k < 5; ++k) {
      const auto id = static_cast<int64_t>(t.at({b, 1 + k}));
      CHECK(t.at({b, 6 + k}) == id);
      seen.insert(id);
    }
  }
  CHECK(seen == std::set<int64_t>{4, 5, 6});  // 320 draws reach each of the three ids
  // the same generator state gives the same tokens, another seed others
  Generator same(21), other(22);
  CHECK(same_bits(repeated_tokens(spec, same), t));
  CHECK(!same_bits(repeated_tokens(spec, other), t));
  CHECK(g.position() == same.position());  // one counter per drawn token
}

TEST_CASE("repeated_tokens: without bos the rows are r r, and an empty draw is an error") {
  Generator g(3);
  const Tensor t = repeated_tokens({.batch = 2, .length = 3, .vocab = 50}, g);
  REQUIRE(t.shape() == Shape{2, 6});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t k = 0; k < 3; ++k) CHECK(t.at({b, k}) == t.at({b, 3 + k}));
  CHECK_ERROR_MENTIONS(
      repeated_tokens({.batch = 1, .length = 2, .vocab = 2, .specials = {0, 1}}, g),
      "repeated_tokens", "all specials");
  CHECK_ERROR_MENTIONS(repeated_tokens({.batch = 0, .length = 2, .vocab = 9}, g), "repeated_tokens",
                       "batch 0");
}
