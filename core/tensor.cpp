// Tensor handles, views, copies and factories.
#include "tensor.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "strided.hpp"

namespace qkv {

std::string shape_str(const Shape& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + ")";
}

size_t dtype_size(DType dt) {
  switch (dt) {
    case DType::f32:
      return 4;
    case DType::f64:
      return 8;
    case DType::i64:
      return 8;
    default:
      return 1;
  }
}

const char* dtype_name(DType dt) {
  switch (dt) {
    case DType::f32:
      return "float32";
    case DType::f64:
      return "float64";
    case DType::i64:
      return "int64";
    default:
      return "bool";
  }
}

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
    st[d] = acc;
    acc *= s[d];
  }
  return st;
}

int64_t wrap_dim(int64_t d, int64_t ndim, const char* op) {
  // A 0-d tensor behaves as 1-d here (as torch): dims 0 and -1 both name it.
  const int64_t w = d < 0 ? d + std::max<int64_t>(ndim, 1) : d;
  QKV_CHECK(w >= 0 && w < std::max<int64_t>(ndim, 1), op, "dim ", d, " out of range for a ", ndim,
            "-d tensor");
  return w;
}

int64_t wrap_dim(int64_t d, const Shape& s, const char* op) {
  const int64_t ndim = static_cast<int64_t>(s.size());
  const int64_t w = d < 0 ? d + std::max<int64_t>(ndim, 1) : d;
  QKV_CHECK(w >= 0 && w < std::max<int64_t>(ndim, 1), op, "dim ", d, " out of range for shape ", s);
  return w;
}

namespace {
// Views that index shape[d] need a real dim: a 0-d tensor has none.
void check_has_dims(const Tensor& t, const char* op) {
  QKV_CHECK(t.dim() > 0, op, "needs at least one dim, got shape ", t.shape());
}
// Value conversion for copies and fills: to bool means "nonzero", as in torch.
template <class D, class S>
D convert(S v) {
  if constexpr (std::is_same_v<D, uint8_t>)
    return static_cast<D>(v != S(0));
  else
    return static_cast<D>(v);
}
}  // namespace

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    QKV_CHECK(da == db || da == 1 || db == 1, op, "shapes ", a, " and ", b, " do not broadcast");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

Tensor::Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset,
               DType dt)
    : storage_(std::move(storage)),
      shape_(std::move(shape)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dt) {}

int64_t Tensor::size(int64_t d) const {
  check_has_dims(*this, "size");
  return shape_[wrap_dim(d, shape_, "size")];
}
int64_t Tensor::stride(int64_t d) const {
  check_has_dims(*this, "stride");
  return strides_[wrap_dim(d, shape_, "stride")];
}
int64_t Tensor::numel() const { return numel_of(shape_); }

bool Tensor::is_contiguous() const {
  int64_t acc = 1;
  for (int64_t d = dim() - 1; d >= 0; --d) {
    if (shape_[d] != 1 && strides_[d] != acc) return false;
    acc *= shape_[d];
  }
  return true;
}

void* Tensor::raw_data() const {
  QKV_CHECK(defined(), "raw_data", "undefined tensor");
  return static_cast<char*>(storage_->data()) + offset_ * dtype_size(dtype_);
}

double Tensor::at(const Shape& index) const {
  QKV_CHECK(static_cast<int64_t>(index.size()) == dim(), "at", "index ", index,
            " for a tensor of shape ", shape_);
  int64_t off = 0;
  for (int64_t d = 0; d < dim(); ++d) {
    QKV_CHECK(index[d] >= 0 && index[d] < shape_[d], "at", "index ", index,
              " out of range for shape ", shape_);
    off += index[d] * strides_[d];
  }
  return visit_all(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    return static_cast<double>(static_cast<const T*>(storage_->data())[offset_ + off]);
  });
}

double Tensor::item() const {
  QKV_CHECK(numel() == 1, "item", "tensor of shape ", shape_, " has ", numel(), " elements, not 1");
  return at(Shape(dim(), 0));
}

// ---------------------------------------------------------------- views

Tensor Tensor::view(const Shape& want) const {
  Shape shape = want;
  int64_t infer = -1, known = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      QKV_CHECK(infer < 0, "view", "more than one -1 in ", want);
      infer = static_cast<int64_t>(i);
    } else {
      QKV_CHECK(shape[i] >= 0, "view", "negative size in ", want);
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    QKV_CHECK(known > 0 && numel() % known == 0, "view", "cannot view shape ", shape_, " as ",
              want);
    shape[infer] = numel() / known;
  }
  QKV_CHECK(numel_of(shape) == numel(), "view", "cannot view shape ", shape_, " (", numel(),
            " elements) as ", want);
  // Zero elements: nothing to address, so any shape's packed strides will do.
  if (is_contiguous() || numel() == 0)
    return Tensor(storage_, shape, contiguous_strides(shape), offset_, dtype_);
  // Non-contiguous: each group of old dims that maps onto a group of new dims must be
  // contiguous within itself. Walk both shapes, matching products.
  Shape strides(shape.size());
  const Shape& os = shape_;
  const Shape& ost = strides_;
  int64_t oi = 0, ni = 0;
  const int64_t on = dim(), nn = static_cast<int64_t>(shape.size());
  while (ni < nn || oi < on) {
    // skip size-1 dims, which take any stride
    if (ni < nn && shape[ni] == 1) {
      strides[ni] = 1;
      ++ni;
      continue;
    }
    if (oi < on && os[oi] == 1) {
      ++oi;
      continue;
    }
    if (ni >= nn || oi >= on) break;
    // collect an old chunk [o0, oi) and new chunk [n0, ni) with equal products
    int64_t o0 = oi, n0 = ni, po = os[oi++], pn = shape[ni++];
    while (po != pn) {
      if (po < pn) {
        QKV_CHECK(oi < on, "view", "cannot view ", shape_, " as ", want);
        po *= os[oi++];
      } else {
        QKV_CHECK(ni < nn, "view", "cannot view ", shape_, " as ", want);
        pn *= shape[ni++];
      }
    }
    // the old chunk must be contiguous in itself (ignoring size-1 dims)
    int64_t last = -1;
    for (int64_t d = oi - 1; d >= o0; --d) {
      if (os[d] == 1) continue;
      QKV_CHECK(last < 0 || ost[d] == ost[last] * os[last], "view",
                "strides of a non-contiguous tensor of shape ", shape_, " cannot express ", want,
                "; use reshape (copies) or contiguous()");
      last = d;
    }
    int64_t st = last >= 0 ? ost[oi - 1] : 1;
    for (int64_t d = oi - 1; d >= o0; --d)
      if (os[d] != 1) {
        st = ost[d];
        break;
      }
    for (int64_t d = ni - 1; d >= n0; --d) {
      strides[d] = st;
      st *= shape[d];
    }
  }
  return Tensor(storage_, shape, strides, offset_, dtype_);
}

Tensor Tensor::reshape(const Shape& shape) const {
  // Validate here so errors say "reshape", and so a failed view below can only mean
  // "strides cannot express it", the one case that copies.
  int64_t known = 1, infer = 0;
  for (int64_t d : shape) {
    QKV_CHECK(d >= -1, "reshape", "negative size in ", shape);
    if (d == -1)
      ++infer;
    else
      known *= d;
  }
  QKV_CHECK(infer <= 1, "reshape", "more than one -1 in ", shape);
  QKV_CHECK(infer ? known > 0 && numel() % known == 0 : known == numel(), "reshape",
            "cannot reshape ", shape_, " (", numel(), " elements) to ", shape);
  try {
    return view(shape);
  } catch (const Error&) {
    return contiguous().view(shape);
  }
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  d0 = wrap_dim(d0, shape_, "transpose");
  d1 = wrap_dim(d1, shape_, "transpose");
  if (dim() == 0) return *this;
  Shape s = shape_, st = strides_;
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  return Tensor(storage_, s, st, offset_, dtype_);
}

Tensor Tensor::permute(const Shape& dims) const {
  QKV_CHECK(static_cast<int64_t>(dims.size()) == dim(), "permute", "dims ", dims,
            " for a tensor of shape ", shape_);
  Shape s(dims.size()), st(dims.size());
  std::vector<bool> seen(dims.size(), false);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t d = wrap_dim(dims[i], shape_, "permute");
    QKV_CHECK(!seen[d], "permute", "repeated dim in ", dims, " for shape ", shape_);
    seen[d] = true;
    s[i] = shape_[d];
    st[i] = strides_[d];
  }
  return Tensor(storage_, s, st, offset_, dtype_);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  check_has_dims(*this, "slice");
  d = wrap_dim(d, shape_, "slice");
  QKV_CHECK(step > 0, "slice", "step must be positive, got ", step, " for dim ", d, " of ", shape_);
  const int64_t n = shape_[d];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape_, st = strides_;
  s[d] = (end - start + step - 1) / step;
  st[d] = strides_[d] * step;
  return Tensor(storage_, s, st, offset_ + start * strides_[d], dtype_);
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  check_has_dims(*this, "narrow");
  d = wrap_dim(d, shape_, "narrow");
  QKV_CHECK(start >= 0 && length >= 0 && start + length <= shape_[d], "narrow", "start ", start,
            " length ", length, " out of range for dim ", d, " of shape ", shape_);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  check_has_dims(*this, "select");
  d = wrap_dim(d, shape_, "select");
  const int64_t n = shape_[d];
  QKV_CHECK(index >= -n && index < n, "select", "index ", index, " out of range for dim ", d,
            " of shape ", shape_);
  if (index < 0) index += n;
  Shape s = shape_, st = strides_;
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  return Tensor(storage_, s, st, offset_ + index * strides_[d], dtype_);
}

Tensor Tensor::expand(const Shape& shape) const {
  QKV_CHECK(shape.size() >= shape_.size(), "expand", "cannot expand ", shape_, " to ", shape);
  const size_t lead = shape.size() - shape_.size();
  Shape st(shape.size(), 0);
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) continue;
    const int64_t have = shape_[i - lead];
    QKV_CHECK(have == shape[i] || have == 1, "expand", "cannot expand ", shape_, " to ", shape);
    st[i] = have == shape[i] ? strides_[i - lead] : 0;
  }
  return Tensor(storage_, shape, st, offset_, dtype_);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  QKV_CHECK(d >= -(dim() + 1) && d <= dim(), "unsqueeze", "dim ", d, " out of range for shape ",
            shape_);
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = shape_, st = strides_;
  const int64_t stride = d < dim() ? strides_[d] * shape_[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, stride);
  return Tensor(storage_, s, st, offset_, dtype_);
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, shape_, "squeeze");
  if (dim() == 0) return *this;
  QKV_CHECK(shape_[d] == 1, "squeeze", "dim ", d, " of shape ", shape_, " is not 1");
  return select(d, 0);
}

Tensor Tensor::squeeze() const {
  Shape s, st;
  for (int64_t d = 0; d < dim(); ++d)
    if (shape_[d] != 1) {
      s.push_back(shape_[d]);
      st.push_back(strides_[d]);
    }
  return Tensor(storage_, s, st, offset_, dtype_);
}

// ---------------------------------------------------------------- copies

Tensor empty(const Shape& s, DType dt) {
  for (int64_t d : s) QKV_CHECK(d >= 0, "empty", "negative size in ", s);
  const int64_t n = numel_of(s);
  auto storage = std::make_shared<Storage>(std::max<int64_t>(n, 1) * dtype_size(dt));
  return Tensor(std::move(storage), s, contiguous_strides(s), 0, dt);
}

Tensor& Tensor::copy_(const Tensor& src_in) {
  QKV_CHECK(defined() && src_in.defined(), "copy_", "undefined tensor");
  QKV_CHECK(broadcast_shapes(shape_, src_in.shape(), "copy_") == shape_, "copy_", "source ",
            src_in.shape(), " does not broadcast to destination ", shape_);
  const Tensor src = src_in.expand(shape_);
  visit_all(dtype_, [&](auto to) {
    using D = typename decltype(to)::type;
    visit_all(src.dtype(), [&](auto from) {
      using S = typename decltype(from)::type;
      D* dst = data<D>();
      const S* sp = src.data<S>();
      detail::for_each_row<2>(shape_, {&strides_, &src.strides()},
                              [&](auto base, int64_t n, auto step) {
                                D* o = dst + base[0];
                                const S* i = sp + base[1];
                                for (int64_t j = 0; j < n; ++j)
                                  o[j * step[0]] = convert<D>(i[j * step[1]]);
                              });
    });
  });
  storage_->bump_version();
  return *this;
}

Tensor& Tensor::fill_(double value) {
  visit_all(dtype_, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = data<T>();
    const T v = convert<T>(value);
    detail::for_each_row<1>(shape_, {&strides_}, [&](auto base, int64_t n, auto step) {
      for (int64_t j = 0; j < n; ++j) p[base[0] + j * step[0]] = v;
    });
  });
  storage_->bump_version();
  return *this;
}

Tensor Tensor::contiguous() const {
  QKV_CHECK(defined(), "contiguous", "undefined tensor");
  return is_contiguous() ? *this : clone();
}

Tensor Tensor::clone() const {
  Tensor out = empty(shape_, dtype_);
  out.copy_(*this);
  return out;
}

Tensor Tensor::to(DType dt) const {
  if (dt == dtype_) return *this;
  Tensor out = empty(shape_, dt);
  out.copy_(*this);
  return out;
}

// ---------------------------------------------------------------- factories

Tensor zeros(const Shape& s, DType dt) {
  Tensor t = empty(s, dt);
  std::memset(t.raw_data(), 0, t.numel() * dtype_size(dt));
  return t;
}
Tensor ones(const Shape& s, DType dt) { return full(s, 1.0, dt); }
Tensor full(const Shape& s, double value, DType dt) { return empty(s, dt).fill_(value); }
Tensor scalar(double value, DType dt) { return full({}, value, dt); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype()); }

Tensor arange(int64_t n, DType dt) {
  Tensor t = empty({n}, dt);
  visit_all(dt, [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* p = t.data<T>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<T>(i);
  });
  return t;
}

template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  QKV_CHECK(static_cast<int64_t>(values.size()) == numel_of(shape), "from_vector", values.size(),
            " values for shape ", shape);
  Tensor t = empty(shape, dtype_of<T>());
  std::copy(values.begin(), values.end(), t.data<T>());
  return t;
}
template Tensor from_vector(const std::vector<float>&, const Shape&);
template Tensor from_vector(const std::vector<double>&, const Shape&);
template Tensor from_vector(const std::vector<int64_t>&, const Shape&);
template Tensor from_vector(const std::vector<uint8_t>&, const Shape&);

Tensor tensor(std::initializer_list<double> values, const Shape& shape, DType dt) {
  return from_vector(std::vector<double>(values), shape).to(dt);
}

template <class T>
std::vector<T> to_vector(const Tensor& t) {
  const Tensor c = t.contiguous();
  const T* p = c.data<T>();
  return std::vector<T>(p, p + c.numel());
}
template std::vector<float> to_vector(const Tensor&);
template std::vector<double> to_vector(const Tensor&);
template std::vector<int64_t> to_vector(const Tensor&);
template std::vector<uint8_t> to_vector(const Tensor&);

double max_abs_diff(const Tensor& a, const Tensor& b) {
  QKV_CHECK(a.shape() == b.shape(), "max_abs_diff", "shapes ", a.shape(), " and ", b.shape(),
            " differ");
  const std::vector<double> x = to_vector<double>(a.to(DType::f64));
  const std::vector<double> y = to_vector<double>(b.to(DType::f64));
  double m = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double d = std::abs(x[i] - y[i]);
    if (std::isnan(d)) return d;
    m = std::max(m, d);
  }
  return m;
}

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol) {
  if (a.shape() != b.shape()) return false;
  const std::vector<double> x = to_vector<double>(a.to(DType::f64));
  const std::vector<double> y = to_vector<double>(b.to(DType::f64));
  for (size_t i = 0; i < x.size(); ++i)
    if (!(std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]))) return false;
  return true;
}

}  // namespace qkv
