// Seeded generators: reproducible, independent of the thread count, and roughly distributed
// as promised.
#include <cmath>
#include <cstring>

#include "core/parallel.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

TEST_CASE("same seed gives the same numbers, another seed or position other numbers") {
  for (DType dt : {DType::f32, DType::f64}) {
    Generator g1(123), g2(123), g3(124);
    const Tensor a = randn({1000}, g1, dt), b = randn({1000}, g2, dt), c = randn({1000}, g3, dt);
    CHECK(same_bits(a, b));
    CHECK_FALSE(same_bits(a, c));
    // the generator moved on: the next draw differs from the first
    const Tensor a2 = randn({1000}, g1, dt);
    CHECK_FALSE(same_bits(a, a2));
    CHECK(g1.position() == 2000);
    // set_state rewinds exactly
    g2.set_state(123, 1000);
    CHECK(same_bits(randn({1000}, g2, dt), a2));
    Generator u1(5), u2(5);
    CHECK(same_bits(rand({3, 7}, u1, dt), rand({3, 7}, u2, dt)));
  }
  // a draw of n then m equals the first n + m of one draw (counter-based stream)
  Generator s1(9), s2(9);
  const Tensor ab = rand({10}, s1, DType::f64);
  const Tensor a = rand({4}, s2, DType::f64), b = rand({6}, s2, DType::f64);
  CHECK(same_bits(concat({a, b}, 0), ab));
}

TEST_CASE("random streams are bitwise independent of the thread count") {
  ThreadGuard guard;
  const Shape big = {700, 1000};  // large enough for the fill to run in parallel
  std::vector<Tensor> by_threads[2];
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    REQUIRE(get_num_threads() == threads);
    Generator g(2024);
    auto& out = by_threads[threads - 1];
    out.push_back(randn(big, g));
    out.push_back(rand(big, g, DType::f64));
    out.push_back(uniform(big, -3, 3, g));
    out.push_back(randint(big, 0, 1000, g));
    out.push_back(bernoulli(big, 0.3, g));
    const DropoutResult d = dropout_forward(ones(big), 0.3, g);
    out.push_back(d.y);
    out.push_back(d.keep);
    out.push_back(randn({7}, g, DType::f64));  // small: the serial path
    out.push_back(from_vector(randperm(100, g), {100}));
  }
  for (size_t i = 0; i < by_threads[0].size(); ++i) {
    INFO("draw " << i);
    CHECK(same_bits(by_threads[0][i], by_threads[1][i]));
  }
}

TEST_CASE("randn has mean 0 and variance 1, rand is uniform on 0 <= x < 1") {
  Generator g(77);
  const int64_t n = 200000;
  for (DType dt : {DType::f32, DType::f64}) {
    const Tensor x = randn({n}, g, dt);
    // standard errors: mean 1/sqrt(n) ~ 0.0022, variance sqrt(2/n) ~ 0.0032; allow ~5 sigma
    CHECK(std::abs(mean(x).item()) < 0.012);
    CHECK(std::abs(var(x).item() - 1) < 0.016);
    // tails: P(|x| > 3) = 0.0027
    const double tail = sum(gt(abs(x), 3.0)).item() / n;
    CHECK(tail > 0.0015);
    CHECK(tail < 0.004);
    CHECK(all_finite(x));
    const Tensor u = rand({n}, g, dt);
    CHECK(min(u).item() >= 0);
    CHECK(max(u).item() < 1);
    CHECK(std::abs(mean(u).item() - 0.5) < 0.004);
    CHECK(std::abs(var(u).item() - 1.0 / 12) < 0.002);
    // deciles are filled evenly
    for (int k = 0; k < 10; ++k) {
      const double frac =
          sum(logical_and(ge(u, k / 10.0), lt(u, (k + 1) / 10.0))).item() / static_cast<double>(n);
      CHECK(std::abs(frac - 0.1) < 0.005);
    }
  }
}

TEST_CASE("uniform, randint, bernoulli, randperm ranges") {
  Generator g(88);
  const Tensor u = uniform({10000}, -2, 5, g, DType::f64);
  CHECK(min(u).item() >= -2);
  CHECK(max(u).item() < 5);
  const Tensor r = randint({10000}, -3, 4, g);
  CHECK(r.dtype() == DType::i64);
  CHECK(min(r).item() == -3);
  CHECK(max(r).item() == 3);
  const Tensor b = bernoulli({10000}, 0.25, g);
  CHECK(b.dtype() == DType::b8);
  CHECK(max(b).item() == 1);
  CHECK(std::abs(sum(b).item() / 10000.0 - 0.25) < 0.025);
  std::vector<int64_t> p = randperm(50, g);
  std::vector<int64_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 50; ++i) CHECK(sorted[i] == i);
  CHECK(p != sorted);  // a fixed seed: this permutation is not the identity
  for (int i = 0; i < 1000; ++i) {
    const int64_t k = g.next_int(7);
    CHECK((k >= 0 && k < 7));
  }
}

TEST_CASE("dropout_mask keeps exactly bernoulli's elements, scaled") {
  // 0.5 and 0.25 put p_keep 2^53 on an integer (the integer test's edge case); 0.1 and 0.3 do not.
  for (double p : {0.1, 0.25, 0.3, 0.5, 0.9}) {
    for (DType dt : {DType::f32, DType::f64}) {
      Generator a(17), b(17);
      a.advance(5);  // a position other than 0
      b.advance(5);
      const Tensor keep = bernoulli({3, 1031}, 1.0 - p, a);
      const Tensor mask = dropout_mask({3, 1031}, p, dt, b);
      CHECK(a.position() == b.position());
      const Tensor want = where(keep, full({}, 1.0 / (1.0 - p), dt), zeros({}, dt));
      CHECK(mask.dtype() == dt);
      CHECK(same_bits(mask, want));
      // both keep element i exactly when its 53-bit uniform at counter 5 + i is below 1 - p
      const std::vector<int64_t> kept = to_vector<int64_t>(keep.reshape({-1}).to(DType::i64));
      int64_t wrong = 0;
      for (int64_t i = 0; i < 3 * 1031; ++i) {
        const double u = static_cast<double>(random_bits(17, 5 + i) >> 11) * 0x1.0p-53;
        wrong += kept[i] != (u < 1.0 - p ? 1 : 0);
      }
      CHECK(wrong == 0);
    }
  }
  Generator g(1);
  CHECK_THROWS_WITH(dropout_mask({4}, 1.0, DType::f32, g), Catch::Contains("dropout_mask"));
  CHECK_THROWS_WITH(dropout_mask({4}, 0.5, DType::i64, g), Catch::Contains("float32 or float64"));
}

TEST_CASE("dropout_forward and dropout_backward give mul with dropout_mask's bits") {
  // 41 x 1031 crosses the parallel grain; the transposed view gives a strided input, whose
  // elements draw in logical (row-major) order as mul's would
  for (double p : {0.1, 0.25, 0.5}) {
    for (DType dt : {DType::f32, DType::f64}) {
      Generator data(3);
      Tensor x = uniform({1031, 41}, -2, 2, data, dt).t();
      x.select(0, 1).select(0, 7).fill_(INFINITY);  // inf * 0: NaN in both
      x.select(0, 2).select(0, 9).fill_(-0.0);
      const Tensor g = uniform({41, 1031}, -1, 1, data, dt);
      Generator a(17), b(17);
      a.advance(9);
      b.advance(9);
      const DropoutResult d = dropout_forward(x, p, a);
      const Tensor mask = dropout_mask(x.shape(), p, dt, b);
      CHECK(a.position() == b.position());
      CHECK(same_bits(d.y, mul(x, mask)));
      CHECK(same_bits(d.keep, ne(mask, zeros({}, dt))));
      CHECK(same_bits(dropout_backward(g, d.keep, p), mul(g, mask)));
      CHECK(same_bits(dropout_backward(g.t().contiguous().t(), d.keep, p), mul(g, mask)));
    }
  }
  Generator g(1);
  CHECK_THROWS_WITH(dropout_forward(zeros({4}), 1.0, g), Catch::Contains("dropout"));
  CHECK_THROWS_WITH(dropout_forward(zeros({4}, DType::i64), 0.5, g),
                    Catch::Contains("float32 or float64"));
  const DropoutResult d = dropout_forward(zeros({4}), 0.5, g);
  CHECK_THROWS_WITH(dropout_backward(zeros({5}), d.keep, 0.5), Catch::Contains("keep-mask"));
}
