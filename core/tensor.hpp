// Tensor: a cheap handle on shared, 64-byte aligned storage plus shape, strides and offset.
//
// Copying a Tensor copies the handle, never the data: views (transpose, slice, expand, ...)
// share storage with their base, and writing through one is seen through the other.
// Strides and offsets count elements, not bytes. A stride of 0 is a broadcast (expand).
// Ops never write into their inputs; the few in-place calls end in an underscore.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <iosfwd>
#include <memory>
#include <vector>

#include "dtype.hpp"
#include "error.hpp"
#include "storage.hpp"

namespace qkv {

class Tensor {
 public:
  Tensor() = default;  // undefined: no storage; defined() is false
  Tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dt);

  bool defined() const { return storage_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }
  int64_t dim() const { return static_cast<int64_t>(shape_.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  bool is_contiguous() const;  // row-major with no gaps
  const std::shared_ptr<Storage>& storage() const { return storage_; }

  // Pointer to element 0 of this view. T must match dtype().
  template <class T>
  T* data() const {
    QKV_CHECK(defined(), "data", "undefined tensor");
    QKV_CHECK(dtype_of<T>() == dtype_, "data", "tensor ", shape_, " is ", dtype_name(dtype_),
              ", asked for ", dtype_name(dtype_of<T>()));
    return static_cast<T*>(storage_->data()) + offset_;
  }
  void* raw_data() const;

  // The single element of a one-element tensor, as double.
  double item() const;
  // One element by index, as double (for tests and printing; slow).
  double at(const Shape& index) const;

  // --- views: share storage, never copy ---
  Tensor view(const Shape& shape) const;     // error if strides cannot express it
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a contiguous copy
  Tensor flatten() const { return reshape({numel()}); }
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor t() const { return transpose(-2, -1); }
  Tensor permute(const Shape& dims) const;
  Tensor slice(int64_t d, int64_t start, int64_t end, int64_t step = 1) const;  // end exclusive
  Tensor narrow(int64_t d, int64_t start, int64_t length) const;
  Tensor select(int64_t d, int64_t index) const;  // removes dimension d
  Tensor expand(const Shape& shape) const;        // broadcast size-1 dims with stride 0
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze(int64_t d) const;  // d must have size 1
  Tensor squeeze() const;           // all size-1 dims

  // --- copies ---
  Tensor contiguous() const;  // this when already contiguous, else a packed copy
  Tensor clone() const;       // always a fresh packed copy
  Tensor to(DType dt) const;  // this when dt == dtype(), else a converted copy

  // --- in place ---
  Tensor& copy_(const Tensor& src);  // src broadcast to this shape, dtype converted
  Tensor& fill_(double value);
  Tensor& zero_() { return fill_(0.0); }

 private:
  std::shared_ptr<Storage> storage_;
  Shape shape_, strides_;
  int64_t offset_ = 0;
  DType dtype_ = DType::f32;
};

std::ostream& operator<<(std::ostream& os, const Tensor& t);  // shape, dtype, values (abbreviated)

// --- shape helpers ---
int64_t numel_of(const Shape& s);
Shape contiguous_strides(const Shape& s);
int64_t wrap_dim(int64_t d, int64_t ndim, const char* op);  // -1 -> ndim - 1, checks range
// As above for a tensor of shape s; the error message names s. A 0-d tensor accepts 0 and -1.
int64_t wrap_dim(int64_t d, const Shape& s, const char* op);
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

// --- factories (dtype defaults to float32) ---
Tensor empty(const Shape& s, DType dt = DType::f32);  // uninitialised
Tensor zeros(const Shape& s, DType dt = DType::f32);
Tensor ones(const Shape& s, DType dt = DType::f32);
Tensor full(const Shape& s, double value, DType dt = DType::f32);
Tensor scalar(double value, DType dt = DType::f32);  // shape ()
Tensor arange(int64_t n, DType dt = DType::i64);     // 0, 1, ..., n - 1
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
// from_vector({1, 2, 3, 4}, {2, 2}): copies the values into a new tensor of that shape.
template <class T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape);
// Convenience for tests: float or double values from a list.
Tensor tensor(std::initializer_list<double> values, const Shape& shape, DType dt = DType::f32);
template <class T>
std::vector<T> to_vector(const Tensor& t);  // row-major copy of the elements; T must match dtype

// --- elementwise, NumPy broadcasting, both operands of one dtype ---
Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, double s);
Tensor sub(const Tensor& a, double s);   // a - s
Tensor rsub(double s, const Tensor& a);  // s - a
Tensor mul(const Tensor& a, double s);
Tensor div(const Tensor& a, double s);   // a / s
Tensor rdiv(double s, const Tensor& a);  // s / a
Tensor pow(const Tensor& a, double e);
Tensor maximum(const Tensor& a, double s);
Tensor minimum(const Tensor& a, double s);
// comparisons give bool (b8) masks
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, double s);
Tensor ne(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor le(const Tensor& a, double s);
Tensor gt(const Tensor& a, double s);
Tensor ge(const Tensor& a, double s);
Tensor logical_and(const Tensor& a, const Tensor& b);  // bool masks
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
// where(cond, a, b): a where cond is true, else b; cond is a bool mask; all three broadcast.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
// masked_fill(x, mask, v): v where mask is true, else x; mask broadcasts to x's shape.
Tensor masked_fill(const Tensor& x, const Tensor& mask, double value);

// --- elementwise unary (float dtypes; neg and abs also int64) ---
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x);  // exact: x * Phi(x), as torch's default
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);
Tensor isfinite(const Tensor& x);  // bool mask
bool all_finite(const Tensor& x);  // false if any NaN or Inf
// d gelu(x) / dx, the derivative gelu's backward needs.
Tensor gelu_grad(const Tensor& x);

// --- reductions: over a set of dims (empty = all), keepdim keeps them as size 1 ---
// Deterministic: each output element is reduced in a fixed order whatever the thread count.
Tensor sum(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor mean(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor max(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
Tensor min(const Tensor& x, const Shape& dims = {}, bool keepdim = false);
// Index (int64) of the first largest element along d; ties go to the lowest index.
Tensor argmax(const Tensor& x, int64_t d, bool keepdim = false);
// Variance with Bessel's correction by default (correction = 1), as torch.var.
Tensor var(const Tensor& x, const Shape& dims = {}, int64_t correction = 1, bool keepdim = false);
// Sums g down to shape s, undoing NumPy broadcasting (the gradient of an expand).
Tensor sum_to(const Tensor& g, const Shape& s);

// --- softmax along d, numerically stable ---
// A row whose entries are all -inf gives all zeros (not NaN); logits of 1e4 stay finite.
Tensor softmax(const Tensor& x, int64_t d);
Tensor log_softmax(const Tensor& x, int64_t d);  // an all -inf row gives all -inf
// Gradients: y = softmax(x) (or log_softmax(x)), g = dL/dy; returns dL/dx.
Tensor softmax_backward(const Tensor& y, const Tensor& g, int64_t d);
Tensor log_softmax_backward(const Tensor& y, const Tensor& g, int64_t d);

// --- linear algebra ---
// a: (..., n, k), b: (..., k, m) -> (..., n, m); batch dims broadcast. Both >= 2-D.
// Transposed views go to BLAS as transposes, not copies.
Tensor matmul(const Tensor& a, const Tensor& b);

// --- joining, splitting, indexing ---
Tensor concat(const std::vector<Tensor>& ts, int64_t d);
Tensor stack(const std::vector<Tensor>& ts, int64_t d);
std::vector<Tensor> split(const Tensor& x, const Shape& sizes, int64_t d);  // views
std::vector<Tensor> chunk(const Tensor& x, int64_t n, int64_t d);           // n equal views
// index_select(x, d, idx): idx is 1-D int64; out.shape[d] = idx.numel().
Tensor index_select(const Tensor& x, int64_t d, const Tensor& idx);
// index_add(base, d, idx, src): a copy of base with src's slices added at idx along d;
// repeated indices accumulate, in index order (deterministic).
Tensor index_add(const Tensor& base, int64_t d, const Tensor& idx, const Tensor& src);
// gather(x, d, idx): out[i][j][k] = x[i][idx[i][j][k]][k] for d = 1; idx has x's rank.
Tensor gather(const Tensor& x, int64_t d, const Tensor& idx);
// scatter_add(base, d, idx, src): a copy of base with base[i][idx[i][j][k]][k] += src[i][j][k].
Tensor scatter_add(const Tensor& base, int64_t d, const Tensor& idx, const Tensor& src);
Tensor one_hot(const Tensor& idx, int64_t classes, DType dt = DType::f32);  // (..., classes)

// --- operators (broadcasting, same as the functions above) ---
inline Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
inline Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
inline Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
inline Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
inline Tensor operator-(const Tensor& a) { return neg(a); }
inline Tensor operator+(const Tensor& a, double s) { return add(a, s); }
inline Tensor operator-(const Tensor& a, double s) { return sub(a, s); }
inline Tensor operator*(const Tensor& a, double s) { return mul(a, s); }
inline Tensor operator/(const Tensor& a, double s) { return div(a, s); }
inline Tensor operator+(double s, const Tensor& a) { return add(a, s); }
inline Tensor operator-(double s, const Tensor& a) { return rsub(s, a); }
inline Tensor operator*(double s, const Tensor& a) { return mul(a, s); }
inline Tensor operator/(double s, const Tensor& a) { return rdiv(s, a); }

// True when a and b have one shape and every element differs by at most atol + rtol * |b|.
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8);
// Largest |a - b| over all elements (shapes must match).
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace qkv
