// Reductions over any set of dims. Floats accumulate in double, and every output element is
// reduced in a fixed order, so results are bitwise the same for any thread count.
#include <algorithm>
#include <cmath>
#include <limits>

#include "fused.hpp"
#include "strided.hpp"
#include "tensor.hpp"

namespace qkv {
namespace {

// A reduction laid out as lanes: x viewed as (kept..., R) with the reduced dims merged last.
struct Plan {
  Tensor lanes;     // (kept..., R)
  Shape out_shape;  // kept dims, or all dims with 1s when keepdim
};

// Which dims of x a reduction over dims_in (empty = all) reduces; checks range and repeats.
std::vector<bool> reduced_dims(const Tensor& x, const Shape& dims_in, const char* op) {
  QKV_CHECK(x.defined(), op, "undefined tensor");
  const int64_t nd = x.dim();
  std::vector<bool> reduced(nd, dims_in.empty());
  std::vector<bool> seen(std::max<int64_t>(nd, 1), false);
  for (int64_t d : dims_in) {
    // A 0-d tensor accepts dim 0 or -1 (as torch): it has nothing to reduce.
    const int64_t w = wrap_dim(d, x.shape(), op);
    QKV_CHECK(!seen[w], op, "repeated dim ", d, " for shape ", x.shape());
    seen[w] = true;
    if (nd > 0) reduced[w] = true;
  }
  return reduced;
}

Plan plan_reduction(const Tensor& x, const Shape& dims_in, bool keepdim, const char* op) {
  const std::vector<bool> reduced = reduced_dims(x, dims_in, op);
  const int64_t nd = x.dim();
  Shape perm, kept, out_shape;
  int64_t r = 1;
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[d]) {
      perm.push_back(d);
      kept.push_back(x.size(d));
    }
  for (int64_t d = 0; d < nd; ++d)
    if (reduced[d]) {
      perm.push_back(d);
      r *= x.size(d);
    }
  for (int64_t d = 0; d < nd; ++d)
    if (!reduced[d])
      out_shape.push_back(x.size(d));
    else if (keepdim)
      out_shape.push_back(1);
  Shape lane_shape = kept;
  lane_shape.push_back(r);
  return {x.permute(perm).reshape(lane_shape), out_shape};
}

// out[lane] = finish(fold(init, x[lane][0..R)), R) for every lane, in a fixed order.
// One huge lane (a full reduction) is cut into fixed blocks folded in parallel, then
// combined in block order: the blocks do not depend on the thread count.
template <class T, class R, class Acc, class Fold, class Combine, class Finish>
Tensor reduce_lanes(const Plan& p, Acc init, Fold fold, Combine combine, Finish finish) {
  const Tensor& x = p.lanes;
  const int64_t last = x.dim() - 1;
  const int64_t len = x.size(last);
  Tensor out = empty(p.out_shape, dtype_of<R>());
  R* o = out.data<R>();
  const T* px = x.data<T>();
  const int64_t lanes = x.numel() / std::max<int64_t>(len, 1);
  if (lanes == 1 && len >= 2 * kParallelGrain) {
    const int64_t block = 8192, nblocks = (len + block - 1) / block;
    const int64_t st = x.stride(last);
    std::vector<Acc> partial(nblocks, init);
    parallel_for(nblocks, block, [&](int64_t lo, int64_t hi) {
      for (int64_t b = lo; b < hi; ++b) {
        Acc acc = init;
        for (int64_t j = b * block, e = std::min(len, j + block); j < e; ++j)
          acc = fold(acc, px[j * st], j);
        partial[b] = acc;
      }
    });
    Acc acc = partial[0];
    for (int64_t b = 1; b < nblocks; ++b) acc = combine(acc, partial[b]);
    o[0] = finish(acc, len);
    return out;
  }
  // Output lanes are numbered row-major, as out is packed.
  Shape lane_shape(x.shape().begin(), x.shape().end() - 1);
  Shape out_strides = contiguous_strides(lane_shape);
  out_strides.push_back(0);
  detail::for_each_lane<2>(x.shape(), last, {&out_strides, &x.strides()},
                           [&](auto base, int64_t n, auto step) {
                             Acc acc = init;
                             const T* pi = px + base[1];
                             for (int64_t j = 0; j < n; ++j) acc = fold(acc, pi[j * step[1]], j);
                             o[base[0]] = finish(acc, n);
                           });
  return out;
}

template <class T>
using AccT = std::conditional_t<std::is_floating_point_v<T>, double, T>;

Tensor sum_impl(const Tensor& x, const Shape& dims, bool keepdim, bool average, const char* op) {
  const Plan p = plan_reduction(x, dims, keepdim, op);
  QKV_CHECK(x.dtype() != DType::b8 || !average, op, "mean of a bool tensor ", x.shape());
  if (x.dtype() == DType::b8) {  // counting trues
    return reduce_lanes<uint8_t, int64_t>(
        p, int64_t{0}, [](int64_t a, uint8_t v, int64_t) { return a + v; },
        [](int64_t a, int64_t b) { return a + b; }, [](int64_t a, int64_t) { return a; });
  }
  return visit_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = AccT<T>;
    return reduce_lanes<T, T>(
        p, A(0), [](A a, T v, int64_t) { return a + A(v); }, [](A a, A b) { return a + b; },
        [average](A a, int64_t n) { return static_cast<T>(average ? a / A(n) : a); });
  });
}

template <bool kMax>
Tensor extreme(const Tensor& x, const Shape& dims, bool keepdim, const char* op) {
  const Plan p = plan_reduction(x, dims, keepdim, op);
  QKV_CHECK(p.lanes.size(-1) > 0, op, "reduction over zero elements of ", x.shape());
  return visit_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T init = kMax ? std::numeric_limits<T>::lowest() : std::numeric_limits<T>::max();
    auto pick = [](T a, T b) {
      if constexpr (std::is_floating_point_v<T>)
        if (std::isnan(b) || std::isnan(a)) return std::numeric_limits<T>::quiet_NaN();
      return kMax ? (b > a ? b : a) : (b < a ? b : a);
    };
    return reduce_lanes<T, T>(
        p, init, [pick](T a, T v, int64_t) { return pick(a, v); }, pick,
        [](T a, int64_t) { return a; });
  });
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  return sum_impl(x, dims, keepdim, false, "sum");
}
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  QKV_CHECK(x.defined(), "mean", "undefined tensor");
  QKV_CHECK(is_floating(x.dtype()), "mean", "expected a float tensor, got ", dtype_name(x.dtype()),
            " ", x.shape());
  return sum_impl(x, dims, keepdim, true, "mean");
}
Tensor max(const Tensor& x, const Shape& dims, bool keepdim) {
  return extreme<true>(x, dims, keepdim, "max");
}
Tensor min(const Tensor& x, const Shape& dims, bool keepdim) {
  return extreme<false>(x, dims, keepdim, "min");
}

Tensor argmax(const Tensor& x, int64_t d, bool keepdim) {
  QKV_CHECK(x.defined(), "argmax", "undefined tensor");
  d = wrap_dim(d, x.shape(), "argmax");
  const Plan p = plan_reduction(x, {d}, keepdim, "argmax");
  QKV_CHECK(p.lanes.size(-1) > 0, "argmax", "empty dim ", d, " of ", x.shape());
  return visit_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    struct Best {
      T v;
      int64_t i;
    };
    return reduce_lanes<T, int64_t>(
        p, Best{T(0), -1},
        [](Best b, T v, int64_t j) {
          return (b.i < 0 || v > b.v) ? Best{v, j} : b;
        },
        [](Best a, Best b) { return (b.i >= 0 && (a.i < 0 || b.v > a.v)) ? b : a; },
        [](Best b, int64_t) { return b.i; });
  });
}

Tensor var(const Tensor& x, const Shape& dims, int64_t correction, bool keepdim) {
  QKV_CHECK(x.defined(), "var", "undefined tensor");
  QKV_CHECK(is_floating(x.dtype()), "var", "expected a float tensor, got ", dtype_name(x.dtype()),
            " ", x.shape());
  // Checked here so a bad dim is reported as var's, not mean's.
  (void)reduced_dims(x, dims, "var");
  const Tensor mu = mean(x, dims, true);
  const Tensor dev = sub(x, mu);
  const Tensor ss = sum(mul(dev, dev), dims, keepdim);
  const int64_t n = x.numel() / std::max<int64_t>(mu.numel(), 1);
  return div(ss, static_cast<double>(std::max<int64_t>(n - correction, 0)));
}

Tensor sum_to(const Tensor& g, const Shape& s) {
  if (g.shape() == s) return g;
  QKV_CHECK(g.dim() >= static_cast<int64_t>(s.size()), "sum_to", "cannot sum ", g.shape(), " to ",
            s);
  const int64_t lead = g.dim() - static_cast<int64_t>(s.size());
  Shape dims;
  for (int64_t d = 0; d < g.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
    } else if (s[d - lead] == 1 && g.size(d) != 1) {
      dims.push_back(d);
    } else {
      QKV_CHECK(s[d - lead] == g.size(d), "sum_to", "cannot sum ", g.shape(), " to ", s);
    }
  }
  if (dims.empty()) return g.reshape(s);
  return sum(g, dims, true).reshape(s);
}

// Column sums of (N, C) rows, optionally of a product: parallel over blocks of columns, each
// column summed in double in row order (the same order the generic reduction uses).
namespace {
template <bool kProduct>
Tensor column_sums(const Tensor& x_in, const Tensor& y_in, const char* op) {
  QKV_CHECK(x_in.defined() && x_in.dim() == 2, op, "expected (N, C), got ", x_in.shape());
  QKV_CHECK(is_floating(x_in.dtype()), op, "expected a float tensor, got ",
            dtype_name(x_in.dtype()), " ", x_in.shape());
  if (kProduct)
    QKV_CHECK(y_in.defined() && y_in.shape() == x_in.shape() && y_in.dtype() == x_in.dtype(), op,
              "operands ", x_in.shape(), " and ", y_in.shape(), " differ");
  const Tensor x = x_in.contiguous();
  const Tensor y = kProduct ? y_in.contiguous() : Tensor();
  const int64_t n = x.size(0), c = x.size(1);
  Tensor out = empty({c}, x.dtype());
  visit_float(x.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    const T* py = kProduct ? y.data<T>() : nullptr;
    T* po = out.data<T>();
    constexpr int64_t kBlock = 64;
    const int64_t blocks = (c + kBlock - 1) / kBlock;
    parallel_for(blocks, n * kBlock, [&](int64_t lo, int64_t hi) {
      double acc[kBlock];
      for (int64_t b = lo; b < hi; ++b) {
        const int64_t c0 = b * kBlock, cb = std::min(kBlock, c - c0);
        std::fill(acc, acc + cb, 0.0);
        for (int64_t r = 0; r < n; ++r) {
          const T* row = px + r * c + c0;
          if constexpr (kProduct) {
            const T* row2 = py + r * c + c0;
            for (int64_t j = 0; j < cb; ++j) acc[j] += double(row[j] * row2[j]);
          } else {
            for (int64_t j = 0; j < cb; ++j) acc[j] += double(row[j]);
          }
        }
        for (int64_t j = 0; j < cb; ++j) po[c0 + j] = static_cast<T>(acc[j]);
      }
    });
  });
  return out;
}
}  // namespace

Tensor sum_rows(const Tensor& x) { return column_sums<false>(x, Tensor(), "sum_rows"); }
Tensor sum_rows_product(const Tensor& x, const Tensor& y) {
  return column_sums<true>(x, y, "sum_rows_product");
}

}  // namespace qkv
