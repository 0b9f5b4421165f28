// Joining, splitting and indexing: concat, stack, split, index_select / index_add,
// gather / scatter_add, one_hot. Index tensors are int64; out-of-range indices are errors.
#include <cstring>

#include "strided.hpp"
#include "tensor.hpp"

namespace qkv {
namespace {

// idx: int64 indices into a dim of size limit of a tensor of shape x (named in errors).
void check_index(const Tensor& idx, int64_t limit, const Shape& x, const char* op) {
  QKV_CHECK(idx.defined() && idx.dtype() == DType::i64, op, "indices must be int64, got ",
            idx.defined() ? dtype_name(idx.dtype()) : "undefined", " ", idx.shape());
  const Tensor c = idx.contiguous();
  const int64_t* p = c.data<int64_t>();
  for (int64_t i = 0, n = c.numel(); i < n; ++i)
    QKV_CHECK(p[i] >= 0 && p[i] < limit, op, "index ", p[i], " out of range [0, ", limit,
              ") in indices of shape ", idx.shape(), " into ", x);
}

void check_defined(const Tensor& t, const char* op) {
  QKV_CHECK(t.defined(), op, "undefined tensor");
}

}  // namespace

Tensor concat(const std::vector<Tensor>& ts, int64_t d) {
  QKV_CHECK(!ts.empty(), "concat", "no tensors");
  const Tensor& first = ts[0];
  for (const Tensor& t : ts) check_defined(t, "concat");
  QKV_CHECK(first.dim() > 0, "concat", "cannot concatenate 0-d tensors of shape ", first.shape(),
            "; use stack");
  d = wrap_dim(d, first.shape(), "concat");
  Shape shape = first.shape();
  shape[d] = 0;
  for (const Tensor& t : ts) {
    QKV_CHECK(t.dim() == first.dim() && t.dtype() == first.dtype(), "concat", "tensors ",
              first.shape(), " ", dtype_name(first.dtype()), " and ", t.shape(), " ",
              dtype_name(t.dtype()), " differ in rank or dtype");
    for (int64_t i = 0; i < t.dim(); ++i)
      QKV_CHECK(i == d || t.size(i) == first.size(i), "concat", "shapes ", first.shape(), " and ",
                t.shape(), " differ outside dim ", d);
    shape[d] += t.size(d);
  }
  Tensor out = empty(shape, first.dtype());
  int64_t at = 0;
  for (const Tensor& t : ts) {
    out.narrow(d, at, t.size(d)).copy_(t);
    at += t.size(d);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& ts, int64_t d) {
  QKV_CHECK(!ts.empty(), "stack", "no tensors");
  check_defined(ts[0], "stack");
  QKV_CHECK(d >= -(ts[0].dim() + 1) && d <= ts[0].dim(), "stack", "dim ", d,
            " out of range for stacking tensors of shape ", ts[0].shape());
  d = wrap_dim(d, ts[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  for (const Tensor& t : ts) {
    QKV_CHECK(t.shape() == ts[0].shape(), "stack", "shapes ", ts[0].shape(), " and ", t.shape(),
              " differ");
    us.push_back(t.unsqueeze(d));
  }
  return concat(us, d);
}

std::vector<Tensor> split(const Tensor& x, const Shape& sizes, int64_t d) {
  check_defined(x, "split");
  QKV_CHECK(x.dim() > 0, "split", "cannot split a 0-d tensor");
  d = wrap_dim(d, x.shape(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) {
    QKV_CHECK(s >= 0, "split", "negative size in ", sizes);
    total += s;
  }
  QKV_CHECK(total == x.size(d), "split", "sizes ", sizes, " do not add up to dim ", d, " of ",
            x.shape());
  std::vector<Tensor> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(d, at, s));
    at += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t n, int64_t d) {
  check_defined(x, "chunk");
  QKV_CHECK(x.dim() > 0, "chunk", "cannot chunk a 0-d tensor");
  d = wrap_dim(d, x.shape(), "chunk");
  QKV_CHECK(n > 0 && x.size(d) % n == 0, "chunk", "dim ", d, " of ", x.shape(),
            " does not split into ", n, " equal parts");
  return split(x, Shape(n, x.size(d) / n), d);
}

Tensor index_select(const Tensor& x, int64_t d, const Tensor& idx) {
  check_defined(x, "index_select");
  check_defined(idx, "index_select");
  QKV_CHECK(x.dim() > 0, "index_select", "cannot index a 0-d tensor");
  d = wrap_dim(d, x.shape(), "index_select");
  QKV_CHECK(idx.dim() == 1, "index_select", "indices must be 1-d, got ", idx.shape(), " for ",
            x.shape());
  check_index(idx, x.size(d), x.shape(), "index_select");
  Shape shape = x.shape();
  shape[d] = idx.numel();
  Tensor out = empty(shape, x.dtype());
  const std::vector<int64_t> ids = to_vector<int64_t>(idx);
  if (d == 0 && x.is_contiguous()) {
    // Embedding lookups: each selected row is one contiguous block.
    const int64_t row = x.numel() / std::max<int64_t>(x.size(0), 1);
    const size_t bytes = row * dtype_size(x.dtype());
    const char* src = static_cast<const char*>(x.raw_data());
    char* dst = static_cast<char*>(out.raw_data());
    parallel_for(static_cast<int64_t>(ids.size()), row, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) std::memcpy(dst + i * bytes, src + ids[i] * bytes, bytes);
    });
    return out;
  }
  parallel_for(static_cast<int64_t>(ids.size()), x.numel() / std::max<int64_t>(x.size(d), 1),
               [&](int64_t lo, int64_t hi) {
                 for (int64_t i = lo; i < hi; ++i) out.select(d, i).copy_(x.select(d, ids[i]));
               });
  return out;
}

Tensor index_add(const Tensor& base, int64_t d, const Tensor& idx, const Tensor& src) {
  check_defined(base, "index_add");
  check_defined(idx, "index_add");
  check_defined(src, "index_add");
  QKV_CHECK(base.dim() > 0, "index_add", "cannot index a 0-d tensor");
  d = wrap_dim(d, base.shape(), "index_add");
  bool fits = idx.dim() == 1 && src.dim() == base.dim() && src.size(d) == idx.numel();
  for (int64_t i = 0; fits && i < base.dim(); ++i) fits = i == d || src.size(i) == base.size(i);
  QKV_CHECK(fits, "index_add", "base ", base.shape(), ", indices ", idx.shape(), ", source ",
            src.shape(), " do not fit");
  QKV_CHECK(src.dtype() == base.dtype(), "index_add", "dtype mismatch: base ", base.shape(), " ",
            dtype_name(base.dtype()), ", source ", src.shape(), " ", dtype_name(src.dtype()));
  check_index(idx, base.size(d), base.shape(), "index_add");
  Tensor out = base.clone();
  const std::vector<int64_t> ids = to_vector<int64_t>(idx);
  if (d == 0 && is_floating(base.dtype())) {
    // Embedding gradients: add whole rows, in index order (repeated indices accumulate
    // deterministically), parallel over blocks of columns.
    const Tensor s = src.contiguous();
    const int64_t row = out.numel() / std::max<int64_t>(out.size(0), 1);
    visit_float(base.dtype(), "index_add", [&](auto tag) {
      using T = typename decltype(tag)::type;
      T* po = out.data<T>();
      const T* ps = s.data<T>();
      const int64_t n = static_cast<int64_t>(ids.size());
      parallel_for(row, n, [&](int64_t lo, int64_t hi) {
        for (int64_t i = 0; i < n; ++i) {
          T* o = po + ids[i] * row;
          const T* r = ps + i * row;
          for (int64_t j = lo; j < hi; ++j) o[j] += r[j];
        }
      });
    });
    return out;
  }
  // In index order, so repeated indices accumulate deterministically.
  for (size_t i = 0; i < ids.size(); ++i) {
    Tensor row = out.select(d, ids[i]);
    row.copy_(add(row, src.select(d, static_cast<int64_t>(i))));
  }
  return out;
}

Tensor gather(const Tensor& x, int64_t d, const Tensor& idx) {
  check_defined(x, "gather");
  check_defined(idx, "gather");
  QKV_CHECK(x.dim() > 0, "gather", "cannot gather from a 0-d tensor");
  d = wrap_dim(d, x.shape(), "gather");
  QKV_CHECK(idx.dim() == x.dim(), "gather", "indices ", idx.shape(), " and input ", x.shape(),
            " differ in rank");
  for (int64_t i = 0; i < x.dim(); ++i)
    QKV_CHECK(i == d || idx.size(i) <= x.size(i), "gather", "indices ", idx.shape(),
              " larger than input ", x.shape(), " outside dim ", d);
  check_index(idx, x.size(d), x.shape(), "gather");
  Tensor out = empty(idx.shape(), x.dtype());
  visit_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data<T>();
    const int64_t* pi = idx.data<int64_t>();
    T* po = out.data<T>();
    // Walk idx; the x offset uses x's strides for every dim but d, where the index decides.
    Shape xs = x.strides();
    const int64_t xd = xs[d];
    xs[d] = 0;
    detail::for_each_lane<3>(idx.shape(), d, {&out.strides(), &idx.strides(), &xs},
                             [&](auto b, int64_t n, auto st) {
                               for (int64_t j = 0; j < n; ++j)
                                 po[b[0] + j * st[0]] = px[b[2] + pi[b[1] + j * st[1]] * xd];
                             });
  });
  return out;
}

Tensor scatter_add(const Tensor& base, int64_t d, const Tensor& idx, const Tensor& src) {
  check_defined(base, "scatter_add");
  check_defined(idx, "scatter_add");
  check_defined(src, "scatter_add");
  QKV_CHECK(base.dim() > 0, "scatter_add", "cannot scatter into a 0-d tensor");
  d = wrap_dim(d, base.shape(), "scatter_add");
  bool fits = idx.shape() == src.shape() && idx.dim() == base.dim();
  // Outside d every index addresses base directly, so it must lie inside base.
  for (int64_t i = 0; fits && i < base.dim(); ++i) fits = i == d || idx.size(i) <= base.size(i);
  QKV_CHECK(fits, "scatter_add", "base ", base.shape(), ", indices ", idx.shape(), ", source ",
            src.shape(), " do not fit");
  QKV_CHECK(src.dtype() == base.dtype(), "scatter_add", "dtype mismatch: base ", base.shape(), " ",
            dtype_name(base.dtype()), ", source ", src.shape(), " ", dtype_name(src.dtype()));
  check_index(idx, base.size(d), base.shape(), "scatter_add");
  Tensor out = base.clone();
  visit_all(base.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* ps = src.data<T>();
    const int64_t* pi = idx.data<int64_t>();
    T* po = out.data<T>();
    Shape os = out.strides();
    const int64_t od = os[d];
    os[d] = 0;
    // Each lane along d is owned by one thread and walked in order: deterministic.
    detail::for_each_lane<3>(idx.shape(), d, {&os, &idx.strides(), &src.strides()},
                             [&](auto b, int64_t n, auto st) {
                               for (int64_t j = 0; j < n; ++j)
                                 po[b[0] + pi[b[1] + j * st[1]] * od] += ps[b[2] + j * st[2]];
                             });
  });
  return out;
}

Tensor one_hot(const Tensor& idx, int64_t classes, DType dt) {
  check_index(idx, classes, idx.shape(), "one_hot");
  Shape shape = idx.shape();
  shape.push_back(classes);
  Tensor out = zeros(shape, dt);
  const std::vector<int64_t> ids = to_vector<int64_t>(idx);
  visit_all(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = out.data<T>();
    for (size_t i = 0; i < ids.size(); ++i) p[i * classes + ids[i]] = T(1);
  });
  return out;
}

}  // namespace qkv
