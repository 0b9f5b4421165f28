// The tape's own behaviour: accumulation, retain_graph, NoGrad, detach, memory, anomaly mode,
// and a gradcheck that can fail.
#include <catch2/catch.hpp>
#include <fstream>
#include <string>

#include "autograd/gradcheck.hpp"
#include "autograd/ops.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::ag;

namespace {

// A test-only op whose backward is deliberately wrong (forgets the factor 2 of x^2).
Var wrong_square(const Var& x) {
  return record(
      "wrong_square", qkv::mul(x.data(), x.data()), {x},
      [x_ = x.data()](const Tensor& g) -> std::vector<Tensor> { return {qkv::mul(g, x_)}; });
}

[[maybe_unused]] long resident_kb() {  // unused under ASan (the test is skipped there)
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  return -1;
}

}  // namespace

TEST_CASE("gradcheck catches a wrong backward") {
  Generator g(1);
  const Var x(uniform({3, 3}, 0.5, 1.5, g, DType::f64), true);
  const GradcheckReport r =
      gradcheck([](const std::vector<Var>& in) { return wrong_square(in[0]); }, {x});
  CHECK_FALSE(r.passed);
  CHECK(r.summary().find("FAIL") != std::string::npos);
  // and the analytic value it reports is the wrong one (half the true derivative)
  CHECK(std::abs(r.analytic * 2 - r.numerical) < 1e-5 * std::abs(r.numerical) + 1e-8);
}

TEST_CASE("gradcheck refuses float32 unless asked") {
  const Var x(ones({2}), true);
  auto f = [](const std::vector<Var>& in) { return mul(in[0], in[0]); };
  CHECK_THROWS_WITH(gradcheck(f, {x}), Catch::Contains("float64"));
  GradcheckOptions loose;
  loose.allow_float32 = true;
  loose.eps = 1e-2;
  loose.atol = 1e-2;
  loose.rtol = 1e-2;
  CHECK(gradcheck(f, {x}, loose).passed);
}

TEST_CASE("a tensor used twice accumulates both gradients") {
  const Var x(tensor({1, 2, 3}, {3}, DType::f64), true);
  const Var y = add(mul(x, x), mul(x, 3.0));  // dy/dx = 2x + 3
  y.backward(ones({3}, DType::f64));
  CHECK(to_vector<double>(x.grad()) == std::vector<double>{5, 7, 9});
  // a second backward through a fresh graph accumulates into .grad
  sum(x).backward();
  CHECK(to_vector<double>(x.grad()) == std::vector<double>{6, 8, 10});
  Var xm = x;
  xm.zero_grad();
  CHECK_FALSE(x.grad().defined());
}

TEST_CASE("retain_graph allows a second backward, without it a clear error") {
  const Var x(tensor({2}, {1}, DType::f64), true);
  const Var y = sum(mul(exp(x), x));
  y.backward(Tensor(), /*retain_graph=*/true);
  const double g1 = x.grad().item();
  y.backward();
  CHECK(x.grad().item() == Approx(2 * g1));
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("second time"));
}

TEST_CASE("NoGrad records nothing and detach cuts the graph") {
  const Var x(ones({2, 2}), true);
  {
    NoGrad off;
    const Var y = mul(x, x);
    CHECK_FALSE(y.requires_grad());
    CHECK(y.is_leaf());
  }
  CHECK(is_recording());
  const Var d = x.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.data().storage() == x.data().storage());
  const Var z = add(mul(d, 3.0), x);
  sum(z).backward();
  CHECK(to_vector<float>(x.grad()) == std::vector<float>{1, 1, 1, 1});
}

TEST_CASE("gelu under NoGrad gives the recorded forward's values") {
  // Recorded, gelu keeps Phi(x) for its backward; with nothing to record it takes the plain
  // kernel. Both give the same bits, and anomaly mode still checks the plain one.
  Generator g(5);
  const Var x(mul(randn({33, 70}, g), 4.0), true);
  const Var recorded = gelu(x);
  CHECK(recorded.requires_grad());
  NoGrad off;
  const Var plain = gelu(x);
  CHECK_FALSE(plain.requires_grad());
  CHECK(max_abs_diff(plain.data(), recorded.data()) == 0);
  set_anomaly_mode(true);
  CHECK_THROWS_WITH(gelu(Var(full({2}, NAN), false)), Catch::Contains("gelu"));
  set_anomaly_mode(false);
}

TEST_CASE("a non-scalar output needs an explicit gradient") {
  const Var x(ones({2}), true);
  CHECK_THROWS_WITH(mul(x, 2.0).backward(), Catch::Contains("explicit gradient"));
  CHECK_THROWS_WITH(mul(x, 2.0).backward(ones({3})), Catch::Contains("(3)"));
}

TEST_CASE("two graphs built side by side do not interfere") {
  const Var a(ones({2}), true), b(ones({2}), true);
  const Var la = sum(mul(a, 2.0));
  const Var lb = sum(mul(b, 5.0));
  lb.backward();
  CHECK_FALSE(a.grad().defined());
  la.backward();
  CHECK(to_vector<float>(a.grad()) == std::vector<float>{2, 2});
  CHECK(to_vector<float>(b.grad()) == std::vector<float>{5, 5});
}

TEST_CASE("anomaly mode names the op that produced the first NaN") {
  set_anomaly_mode(true);
  const Var x(tensor({-1, 2}, {2}), true);
  CHECK_THROWS_WITH(log(x), Catch::Contains("log") && Catch::Contains("NaN"));
  {
    ModuleScope outer("encoder"), inner("layers.0");
    CHECK_THROWS_WITH(sqrt(x), Catch::Contains("encoder.layers.0"));
  }
  // a NaN that appears only in backward: sqrt at 0 has an infinite derivative
  const Var z(zeros({1}), true);
  const Var y = sum(sqrt(z));
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("gradient") && Catch::Contains("sqrt"));
  set_anomaly_mode(false);
  CHECK_NOTHROW(log(x));
}

TEST_CASE("1000 forward/backward iterations of a small MLP keep resident memory flat") {
#if defined(__SANITIZE_ADDRESS__)
  // ASan's quarantine holds freed blocks back on purpose, so resident memory grows by design.
  QKV_SKIP("under AddressSanitizer: its quarantine makes resident memory grow by design");
#else
  Generator g(3);
  const Var w1(uniform({32, 16}, -0.3, 0.3, g), true), b1(zeros({32}), true);
  const Var w2(uniform({4, 32}, -0.3, 0.3, g), true);
  const Tensor x = randn({64, 16}, g);
  const Tensor t = randint({64}, 0, 4, g);
  auto step = [&] {
    const Var loss = cross_entropy(linear(relu(linear(Var(x), w1, b1)), w2), t);
    loss.backward();
    for (Var p : {w1, b1, w2}) p.zero_grad();
  };
  for (int i = 0; i < 50; ++i) step();  // warm up the allocator cache
  const long before = resident_kb();
  // No /proc (or no VmRSS line) is a failure, not a pass: -1 - -1 would be "flat".
  INFO("VmRSS from /proc/self/status: " << before << " kB (-1: unreadable)");
  REQUIRE(before > 0);
  for (int i = 0; i < 1000; ++i) step();
  const long after = resident_kb();
  INFO("resident " << before << " kB -> " << after << " kB");
  REQUIRE(after > 0);
  CHECK(after - before < 4 * 1024);  // generous: 4 MB
#endif
}
