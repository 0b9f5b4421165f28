#include <catch2/catch.hpp>
#include <cmath>

#include "core/tensor.hpp"

using namespace qkv;

TEST_CASE("lesson worked example: scaled dot-product attention with tensor ops") {
  const Tensor Q = tensor({1, 0, 0, 1, 1, 1}, {3, 2});
  const Tensor K = Q;
  const Tensor V = tensor({1, 0, 0, 1, 0.5, 0.5}, {3, 2});
  const Tensor A = softmax(mul(matmul(Q, K.t()), 1.0 / std::sqrt(2.0)), -1);
  const Tensor O = matmul(A, V);
  const Tensor A_want =
      tensor({0.401, 0.198, 0.401, 0.198, 0.401, 0.401, 0.248, 0.248, 0.503}, {3, 3});
  const Tensor O_want = tensor({0.602, 0.398, 0.398, 0.602, 0.500, 0.500}, {3, 2});
  CHECK(max_abs_diff(A, A_want) < 5e-4);
  CHECK(max_abs_diff(O, O_want) < 5e-4);
}
