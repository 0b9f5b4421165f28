// The in-context-learning score (inspect/icl.hpp) on cases checked by hand: its positions, the
// per-position losses of known logits, the late-minus-early difference, the windows' offsets.
#include <catch2/catch.hpp>
#include <cmath>
#include <numeric>

#include "core/error.hpp"
#include "inspect/icl.hpp"

using namespace qkv;
using namespace qkv::inspect;

TEST_CASE("icl: the early and late positions of a context") {
  const IclPositions p256 = icl_positions(256);  // k = 16, late 240..255, early 25 - 8 = 17
  CHECK(p256.width == 16);
  CHECK(p256.late == 240);
  CHECK(p256.early == 17);
  const IclPositions p16 = icl_positions(16);  // k = 1: the last position, and position 1
  CHECK(p16.width == 1);
  CHECK(p16.late == 15);
  CHECK(p16.early == 1);
  CHECK(icl_positions(2).early == 0);
  CHECK_THROWS_WITH(icl_positions(1), Catch::Contains("a context of 1 tokens"));
}

TEST_CASE("icl: per-position losses are the mean cross-entropy over the windows") {
  // Two windows of two positions over a vocabulary of two.
  //   window 0: [0, 0] label 0 -> ln 2;      [ln 3, 0] label 0 -> ln(4/3)
  //   window 1: [0, 0] label 1 -> ln 2;      [ln 3, 0] label 1 -> ln 4
  const Tensor logits =
      from_vector<float>({0, 0, std::log(3.0f), 0, 0, 0, std::log(3.0f), 0}, {2, 2, 2});
  const Tensor labels = from_vector<int64_t>({0, 0, 1, 1}, {2, 2});
  const std::vector<double> loss = position_losses(logits, labels);
  REQUIRE(loss.size() == 2);
  CHECK(loss[0] == Approx(std::log(2.0)).epsilon(1e-6));
  CHECK(loss[1] == Approx((std::log(4.0 / 3.0) + std::log(4.0)) / 2).epsilon(1e-6));
  CHECK_THROWS_WITH(position_losses(logits, from_vector<int64_t>({0, 0}, {1, 2})),
                    Catch::Contains("labels (W, n)"));
}

TEST_CASE("icl: the score is the late mean minus the early mean") {
  std::vector<double> loss(64);
  std::iota(loss.begin(), loss.end(), 0.0);  // loss t at position t
  // n = 64: k = 4, late = 60..63; early = 64 / 10 - 2 = 4..7
  CHECK(icl_score(loss) == Approx(61.5 - 5.5));
  std::vector<double> falling(32);
  for (size_t t = 0; t < falling.size(); ++t) falling[t] = 4.0 - 0.1 * static_cast<double>(t);
  // n = 32: k = 2, late 30, 31, early 2, 3: a model that uses context scores negative
  CHECK(icl_score(falling) == Approx(-0.1 * (30.5 - 2.5)));
}

TEST_CASE("icl: windows are evenly spaced over the text, the last ending at its end") {
  data::Ids tokens(100);
  std::iota(tokens.begin(), tokens.end(), 0);
  const data::Batch b = icl_windows(tokens, 9, 3, "probe");  // offsets 0, 45, 90
  REQUIRE(b.tgt_in.shape() == std::vector<int64_t>{3, 9});
  const std::vector<int64_t> in = to_vector<int64_t>(b.tgt_in.contiguous());
  const std::vector<int64_t> out = to_vector<int64_t>(b.tgt_out.contiguous());
  CHECK(in[0] == 0);
  CHECK(in[9] == 45);
  CHECK(in[18] == 90);
  CHECK(out[26] == 99);  // the last window's last label is the text's last token
  CHECK(to_vector<int64_t>(icl_windows(tokens, 9, 1, "probe").tgt_in)[0] == 0);
  CHECK_THROWS_WITH(icl_windows(tokens, 100, 2, "probe"),
                    Catch::Contains("probe: the validation text has 100 tokens"));
}
