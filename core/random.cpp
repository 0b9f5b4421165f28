#include "random.hpp"

#include <cmath>

#include "parallel.hpp"

namespace qkv {

namespace {
// One round of splitmix64's output mix.
inline uint64_t mix(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}
// random_bits with the seed's round done: mix(seed) is the same for every counter of a draw.
inline uint64_t bits_under(uint64_t mixed_seed, uint64_t counter) {
  return mix(mixed_seed ^ (counter * 0xd1b54a32d192ed03ULL));
}
}  // namespace

uint64_t random_bits(uint64_t seed, uint64_t counter) {
  // Two rounds of splitmix64: mix the seed, then the counter under it.
  return bits_under(mix(seed), counter);
}

namespace {
// 53 random bits -> [0, 1)
inline double to_unit(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// The Bernoulli test to_unit(bits) < p_keep, in integers: (bits >> 11) 2^-53 < p_keep exactly
// when (bits >> 11) < ceil(p_keep 2^53) (the scaling by 2^53 is exact). Integer compares
// vectorize where the conversion to double would not. p_keep <= 0 (or NaN) keeps nothing,
// p_keep >= 1 everything, as the floating-point test does.
class KeepTest {
 public:
  explicit KeepTest(double p_keep)
      : threshold_(!(p_keep > 0) ? 0
                   : p_keep >= 1 ? uint64_t{1} << 53
                                 : static_cast<uint64_t>(std::ceil(p_keep * 0x1.0p53))) {}
  bool operator()(uint64_t bits) const { return (bits >> 11) < threshold_; }

 private:
  uint64_t threshold_;
};
}  // namespace

uint64_t Generator::next_u64() { return random_bits(seed_, advance(1)); }
double Generator::next_uniform() { return to_unit(next_u64()); }
int64_t Generator::next_int(int64_t n) {
  QKV_CHECK(n > 0, "Generator::next_int", "n must be positive, got ", n);
  return static_cast<int64_t>(next_uniform() * static_cast<double>(n)) % n;
}

// Fills a packed tensor: element i gets f(seed, first + i).
template <class F>
static Tensor fill_counter(const Shape& s, DType dt, Generator& g, F f) {
  Tensor t = empty(s, dt);
  const int64_t n = t.numel();
  const uint64_t first = g.advance(static_cast<uint64_t>(n));
  const uint64_t seed = g.seed();
  visit_all(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    parallel_for(n, 8, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) p[i] = static_cast<T>(f(seed, first + i));
    });
  });
  return t;
}

Tensor rand(const Shape& s, Generator& g, DType dt) { return uniform(s, 0.0, 1.0, g, dt); }

Tensor uniform(const Shape& s, double lo, double hi, Generator& g, DType dt) {
  QKV_CHECK(is_floating(dt), "uniform", "dtype must be float32 or float64, got ", dtype_name(dt),
            " for shape ", s);
  return fill_counter(s, dt, g, [lo, hi](uint64_t seed, uint64_t c) {
    return lo + (hi - lo) * to_unit(random_bits(seed, c));
  });
}

Tensor randn(const Shape& s, Generator& g, DType dt) {
  QKV_CHECK(is_floating(dt), "randn", "dtype must be float32 or float64, got ", dtype_name(dt),
            " for shape ", s);
  // Box-Muller on two draws derived from the one counter, in a stream of their own (another
  // seed) so they never coincide with uniform draws at counters 2c and 2c + 1.
  return fill_counter(s, dt, g, [](uint64_t seed, uint64_t c) {
    const uint64_t normal_seed = seed ^ 0x5851f42d4c957f2dULL;
    const double u1 = 1.0 - to_unit(random_bits(normal_seed, 2 * c));  // (0, 1]
    const double u2 = to_unit(random_bits(normal_seed, 2 * c + 1));
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  });
}

Tensor randint(const Shape& s, int64_t lo, int64_t hi, Generator& g) {
  QKV_CHECK(hi > lo, "randint", "empty range [", lo, ", ", hi, ")");
  const double span = static_cast<double>(hi - lo);
  return fill_counter(s, DType::i64, g, [lo, hi, span](uint64_t seed, uint64_t c) {
    return std::min<int64_t>(hi - 1,
                             lo + static_cast<int64_t>(to_unit(random_bits(seed, c)) * span));
  });
}

Tensor bernoulli(const Shape& s, double p_keep, Generator& g) {
  return fill_counter(s, DType::b8, g, [keep = KeepTest(p_keep)](uint64_t seed, uint64_t c) {
    return keep(random_bits(seed, c)) ? 1 : 0;
  });
}

Tensor dropout_mask(const Shape& s, double p_drop, DType dt, Generator& g) {
  QKV_CHECK(is_floating(dt), "dropout_mask", "dtype must be float32 or float64, got ",
            dtype_name(dt), " for shape ", s);
  QKV_CHECK(p_drop >= 0 && p_drop < 1, "dropout_mask", "p must be in [0, 1), got ", p_drop,
            " for shape ", s);
  // bernoulli's draws and test, so the same elements are kept
  const double scale = 1.0 / (1.0 - p_drop);
  return fill_counter(s, dt, g, [keep = KeepTest(1.0 - p_drop), scale](uint64_t seed, uint64_t c) {
    return keep(random_bits(seed, c)) ? scale : 0.0;
  });
}

namespace {
// y[i] = x[i] * (kept ? scale : 0) and keep[i] = kept for the counters first + lo .. first + hi:
// branch-free, so the compiler vectorizes the draws (a branch on a 1-in-5 drop mispredicts
// often enough to cost more than the draw itself).
template <class T>
void drop_range(const T* __restrict__ x, T* __restrict__ y, uint8_t* __restrict__ keep, int64_t lo,
                int64_t hi, uint64_t mixed_seed, uint64_t first, KeepTest keeps, T scale) {
  for (int64_t i = lo; i < hi; ++i) {
    const bool kept = keeps(bits_under(mixed_seed, first + static_cast<uint64_t>(i)));
    keep[i] = kept;
    y[i] = x[i] * (kept ? scale : T(0));
  }
}

// dx[i] = g[i] * (keep[i] ? scale : 0): the arguments as restrict locals and no branch, so the
// loop vectorizes (through the lambda's captures the compiler assumed aliasing and branched).
template <class T>
void scale_kept(const T* __restrict__ g, const uint8_t* __restrict__ keep, T* __restrict__ dx,
                int64_t lo, int64_t hi, T scale) {
  for (int64_t i = lo; i < hi; ++i) dx[i] = g[i] * (keep[i] ? scale : T(0));
}
}  // namespace

DropoutResult dropout_forward(const Tensor& x_in, double p_drop, Generator& g) {
  QKV_CHECK(p_drop >= 0 && p_drop < 1, "dropout", "p must be in [0, 1), got ", p_drop,
            " for input ", x_in.shape());
  const Tensor x = x_in.contiguous();
  DropoutResult r{empty(x.shape(), x.dtype()), empty(x.shape(), DType::b8)};
  const int64_t n = x.numel();
  const uint64_t first = g.advance(static_cast<uint64_t>(n));
  const uint64_t mixed_seed = mix(g.seed());
  const KeepTest keeps(1.0 - p_drop);  // dropout_mask's test, so the same elements are kept
  uint8_t* keep = r.keep.data<uint8_t>();
  visit_float(x.dtype(), "dropout", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T scale = static_cast<T>(1.0 / (1.0 - p_drop));  // dropout_mask's value where kept
    const T* px = x.data<T>();
    T* py = r.y.data<T>();
    parallel_for(n, 8, [&](int64_t lo, int64_t hi) {
      drop_range(px, py, keep, lo, hi, mixed_seed, first, keeps, scale);
    });
  });
  return r;
}

Tensor dropout_backward(const Tensor& g_in, const Tensor& keep, double p_drop) {
  QKV_CHECK(keep.dtype() == DType::b8 && keep.shape() == g_in.shape(), "dropout backward",
            "gradient ", g_in.shape(), " and keep-mask ", dtype_name(keep.dtype()), " ",
            keep.shape(), " differ");
  const Tensor g = g_in.contiguous();
  Tensor dx = empty(g.shape(), g.dtype());
  const uint8_t* k = keep.data<uint8_t>();
  visit_float(g.dtype(), "dropout backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T scale = static_cast<T>(1.0 / (1.0 - p_drop));
    const T* pg = g.data<T>();
    T* pd = dx.data<T>();
    parallel_for(g.numel(), 1,
                 [&](int64_t lo, int64_t hi) { scale_kept(pg, k, pd, lo, hi, scale); });
  });
  return dx;
}

std::vector<int64_t> randperm(int64_t n, Generator& g) {
  std::vector<int64_t> p(n);
  for (int64_t i = 0; i < n; ++i) p[i] = i;
  for (int64_t i = n - 1; i > 0; --i) std::swap(p[i], p[g.next_int(i + 1)]);
  return p;
}

}  // namespace qkv
