// Cross-entropy's fused kernels (core/cross_entropy.cpp) against the plain formula on
// log_softmax's output, bit for bit: the kernels keep each row's max and log-sum-exp instead of
// the log-probabilities, and must give the bits of the kernels that kept them.
#include <cmath>
#include <limits>
#include <vector>

#include "core/fused.hpp"
#include "core/lanes.hpp"
#include "core/random.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

// The loss and gradient written out on log_softmax's log-probabilities, in the same
// arithmetic as the kernels: loss = mean over counted rows of -(1 - eps) lp[t] - eps mean(lp);
// grad = g / count * (exp(lp) - q).
template <class T>
std::pair<double, Tensor> reference(const Tensor& logits, const std::vector<int64_t>& t,
                                    int64_t ignore, double eps, double g) {
  const Tensor lp = log_softmax(logits, 1).contiguous();
  const int64_t n = lp.size(0), c = lp.size(1);
  const T* p = lp.data<T>();
  int64_t count = 0;
  double total = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (t[i] == ignore) continue;
    ++count;
    double row = -(1.0 - eps) * p[i * c + t[i]];
    if (eps > 0) row -= eps * kernel::sum_lanes(p + i * c, c) / c;
    total += row;
  }
  Tensor dx = zeros({n, c}, lp.dtype());
  T* o = dx.data<T>();
  const double scale = count ? g / count : 0;
  const T s = static_cast<T>(scale), s_eps = static_cast<T>(scale * eps / c);
  for (int64_t i = 0; i < n && count; ++i) {
    if (t[i] == ignore) continue;
    for (int64_t j = 0; j < c; ++j) o[i * c + j] = s * kernel::fast_exp<T>(p[i * c + j]) - s_eps;
    o[i * c + t[i]] = static_cast<T>(
        scale * (double(kernel::fast_exp<T>(p[i * c + t[i]])) - eps / c - (1.0 - eps)));
  }
  return {count ? total / count : 0.0, dx};
}

Tensor targets_of(const std::vector<int64_t>& t) {
  Tensor r = empty({static_cast<int64_t>(t.size())}, DType::i64);
  for (size_t i = 0; i < t.size(); ++i) r.data<int64_t>()[i] = t[i];
  return r;
}

}  // namespace

TEST_CASE("cross_entropy gives the bits of the formula on log_softmax, float and double") {
  for (const DType dt : {DType::f32, DType::f64}) {
    for (const int64_t c : {int64_t(1), int64_t(7), int64_t(65), int64_t(6001)}) {
      for (const double eps : {0.0, 0.1}) {
        INFO(dtype_name(dt) << " classes " << c << " smoothing " << eps);
        Generator gen(uint64_t(c) * 7 + (eps > 0));
        const int64_t n = 37;
        Tensor logits = mul(randn({n, c}, gen, dt), 3.0);
        std::vector<int64_t> t(n);
        for (int64_t i = 0; i < n; ++i) t[i] = (i * 5 + 3) % c;
        t[4] = -1;  // ignored
        t[9] = -1;
        // a row far from zero, where x - (m + lz) would lose lz: the kernels keep (x - m) - lz
        Tensor row = logits.slice(0, 11, 12);
        row.copy_(add(row, 1e4));
        const Tensor tt = targets_of(t);
        const CrossEntropyResult f = cross_entropy_forward(logits, tt, -1, eps);
        const Tensor dx = cross_entropy_backward(f, 0.75);
        const auto [loss, ref_dx] = dt == DType::f32 ? reference<float>(logits, t, -1, eps, 0.75)
                                                     : reference<double>(logits, t, -1, eps, 0.75);
        CHECK(f.count == n - 2);
        CHECK(f.loss == loss);
        CHECK(same_bits(dx, ref_dx));
      }
    }
  }
}

TEST_CASE("cross_entropy reads strided logits and keeps log_softmax's fill for -inf rows") {
  Generator gen(3);
  const Tensor wide = randn({20, 30}, gen);
  const Tensor logits = wide.t();  // (30, 20), strided
  std::vector<int64_t> t(30);
  for (int64_t i = 0; i < 30; ++i) t[i] = i % 20;
  const CrossEntropyResult f = cross_entropy_forward(logits, targets_of(t), -100, 0.0);
  const auto [loss, ref_dx] = reference<float>(logits.contiguous(), t, -100, 0.0, 1.0);
  CHECK(f.loss == loss);
  CHECK(same_bits(cross_entropy_backward(f, 1.0), ref_dx));
  // A row of -inf logits: log-probabilities -inf, so an infinite loss, as torch gives
  Tensor masked = randn({3, 5}, gen);
  masked.slice(0, 1, 2).fill_(-std::numeric_limits<double>::infinity());
  const CrossEntropyResult m = cross_entropy_forward(masked, targets_of({0, 1, 2}), -100, 0.0);
  CHECK(std::isinf(m.loss));
  CHECK(m.loss > 0);
}
