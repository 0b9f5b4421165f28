// The vectorizing row helpers of core/lanes.hpp: fast_exp against std::exp, and the lane sums
// against in-order double sums.
#include <cmath>
#include <limits>
#include <vector>

#include "core/lanes.hpp"
#include "support/tensors.hpp"

using namespace qkv;

namespace {

// Distance in units in the last place between two positive floats.
int64_t ulps(float a, float b) {
  return std::abs(int64_t{std::bit_cast<int32_t>(a)} - int64_t{std::bit_cast<int32_t>(b)});
}

}  // namespace

TEST_CASE("fast_exp is within 2 ulp of std::exp on the softmax range and exactly 0 below it") {
  int64_t worst = 0;
  float at = 0;
  // Every 64th float in [-87, 0] (softmax arguments are s - max <= 0), and a few above 0.
  for (float x = -87.0f; x <= 1.0f; x = std::nextafter(x, 2.0f)) {
    const float want = static_cast<float>(std::exp(static_cast<double>(x)));
    const int64_t u = ulps(kernel::fast_exp(x), want);
    if (u > worst) worst = u, at = x;
    for (int s = 0; s < 63; ++s) x = std::nextafter(x, 2.0f);
  }
  INFO("worst " << worst << " ulp at x = " << at);
  CHECK(worst <= 2);
  CHECK(kernel::fast_exp(0.0f) == 1.0f);
  CHECK(kernel::fast_exp(-std::numeric_limits<float>::infinity()) == 0.0f);  // a masked score
  CHECK(kernel::fast_exp(-87.5f) == 0.0f);
  CHECK(kernel::fast_exp(-1000.0f) == 0.0f);
  CHECK(std::abs(kernel::fast_exp(88.0f) / std::exp(88.0) - 1) < 1e-6);
  CHECK(kernel::fast_exp(-0.5) == std::exp(-0.5));  // double is std::exp itself
}

TEST_CASE("normal_cdf and normal_pdf in float32 keep their relative accuracy from -12 to 12") {
  // Phi(-12) is 1.8e-33: the tail must be accurate relative to its own size, as erfc is. Both
  // end in exp(-x^2 / 2 + ...), whose float argument carries a rounding error of about
  // x^2 / 2 float epsilons, so the bound is 8 epsilons times (1 + x^2 / 2): 4.8e-7 at x = 0,
  // 3.5e-5 at x = 12.
  const double eps = std::ldexp(1.0, -24);
  double worst_cdf = 0, worst_pdf = 0;
  float at_cdf = 0, at_pdf = 0;
  for (int i = -120000; i <= 120000; ++i) {
    const float x = static_cast<float>(i) * 1e-4f;
    const double xd = x, scale = 8 * eps * (1 + xd * xd / 2);
    const double cdf = 0.5 * std::erfc(-xd / std::sqrt(2.0));
    const double pdf = std::exp(-0.5 * xd * xd) / std::sqrt(2 * M_PI);
    const double e_cdf = std::abs(kernel::normal_cdf(x) / cdf - 1) / scale;
    const double e_pdf = std::abs(kernel::normal_pdf(x) / pdf - 1) / scale;
    if (e_cdf > worst_cdf) worst_cdf = e_cdf, at_cdf = x;
    if (e_pdf > worst_pdf) worst_pdf = e_pdf, at_pdf = x;
  }
  INFO("worst error over its bound: Phi " << worst_cdf << " at " << at_cdf << ", phi " << worst_pdf
                                          << " at " << at_pdf);
  CHECK(worst_cdf <= 1);
  CHECK(worst_pdf <= 1);
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(kernel::normal_cdf(0.0f) == Approx(0.5).epsilon(1e-7));
  CHECK(kernel::normal_cdf(inf) == 1.0f);
  CHECK(kernel::normal_cdf(-inf) == 0.0f);
  CHECK(kernel::normal_cdf(-20.0f) == 0.0f);  // 2.8e-89: below float's range
  CHECK(std::isnan(kernel::normal_cdf(std::numeric_limits<float>::quiet_NaN())));
  CHECK(kernel::normal_cdf(-0.7) == 0.5 * std::erfc(0.7 * M_SQRT1_2));  // double: erfc itself
}

TEST_CASE("lane sums equal in-order double sums to rounding, for every length and remainder") {
  Generator g(3);
  for (int64_t n : {0, 1, 7, 8, 9, 16, 31, 128, 1001}) {
    const Tensor x = randn({std::max<int64_t>(n, 1)}, g), y = randn({std::max<int64_t>(n, 1)}, g);
    const float* px = x.data<float>();
    const float* py = y.data<float>();
    double s = 0, d = 0, q = 0, mag = 0;
    for (int64_t j = 0; j < n; ++j) {
      s += px[j];
      d += double(px[j]) * py[j];
      q += (px[j] - 0.25) * (px[j] - 0.25);
      mag += std::abs(px[j]) * (1 + std::abs(py[j]));
    }
    INFO("n = " << n);
    CHECK(std::abs(kernel::sum_lanes(px, n) - s) <= 1e-14 * (1 + mag));
    CHECK(std::abs(kernel::dot_lanes(px, py, n) - d) <= 1e-14 * (1 + mag));
    CHECK(std::abs(kernel::sum_sq_dev_lanes(px, 0.25, n) - q) <= 1e-13 * (1 + q));
  }
  // exactly representable values: the sum is exact whatever the order
  const std::vector<float> ints = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  CHECK(kernel::sum_lanes(ints.data(), 11) == 66.0);
}

TEST_CASE("max_lanes is the row max for every length, skips NaN, and is -inf for masked rows") {
  Generator g(5);
  for (int64_t n : {1, 7, 8, 9, 17, 1001}) {
    const Tensor x = randn({n}, g);
    std::vector<float> v(x.data<float>(), x.data<float>() + n);
    INFO("n = " << n);
    CHECK(kernel::max_lanes(v.data(), n) == *std::max_element(v.begin(), v.end()));
    v[n - 1] = 100.0f;  // the max in the tail
    CHECK(kernel::max_lanes(v.data(), n) == 100.0f);
    v[0] = std::numeric_limits<float>::quiet_NaN();
    CHECK(kernel::max_lanes(v.data(), n) == (n == 1 ? -INFINITY : 100.0f));
    std::fill(v.begin(), v.end(), -INFINITY);
    CHECK(kernel::max_lanes(v.data(), n) == -INFINITY);
  }
}
