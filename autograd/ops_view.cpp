// Views and shape ops. A view's backward puts the gradient back where the view's elements
// came from: transposes transpose back, slices scatter into zeros, expands sum.
#include "autograd/ops.hpp"

namespace qkv::ag {

Var reshape(const Var& x, const Shape& s) {
  return record(
      "reshape", x.data().reshape(s), {x},
      [in = x.shape()](const Tensor& g) -> std::vector<Tensor> { return {g.reshape(in)}; });
}

Var transpose(const Var& x, int64_t d0, int64_t d1) {
  return record("transpose", x.data().transpose(d0, d1), {x},
                [d0, d1](const Tensor& g) -> std::vector<Tensor> { return {g.transpose(d0, d1)}; });
}

Var permute(const Var& x, const Shape& dims) {
  Shape inv(dims.size());
  for (size_t i = 0; i < dims.size(); ++i)
    inv[wrap_dim(dims[i], x.dim(), "permute")] = static_cast<int64_t>(i);
  return record("permute", x.data().permute(dims), {x},
                [inv](const Tensor& g) -> std::vector<Tensor> { return {g.permute(inv)}; });
}

Var slice(const Var& x, int64_t d, int64_t start, int64_t end, int64_t step) {
  return record(
      "slice", x.data().slice(d, start, end, step), {x},
      [s = x.shape(), dt = x.dtype(), d, start, end, step](const Tensor& g) -> std::vector<Tensor> {
        Tensor gx = zeros(s, dt);
        gx.slice(d, start, end, step).copy_(g);
        return {gx};
      });
}

Var narrow(const Var& x, int64_t d, int64_t start, int64_t length) {
  QKV_CHECK(start >= 0 && length >= 0 && start + length <= x.size(d), "narrow", "start ", start,
            " length ", length, " out of range for dim ", d, " of shape ", x.shape());
  return slice(x, d, start, start + length, 1);
}

Var select(const Var& x, int64_t d, int64_t index) {
  return record("select", x.data().select(d, index), {x},
                [s = x.shape(), dt = x.dtype(), d, index](const Tensor& g) -> std::vector<Tensor> {
                  Tensor gx = zeros(s, dt);
                  gx.select(d, index).copy_(g);
                  return {gx};
                });
}

Var expand(const Var& x, const Shape& s) {
  return record(
      "expand", x.data().expand(s), {x},
      [in = x.shape()](const Tensor& g) -> std::vector<Tensor> { return {sum_to(g, in)}; });
}

Var unsqueeze(const Var& x, int64_t d) {
  return record(
      "unsqueeze", x.data().unsqueeze(d), {x},
      [in = x.shape()](const Tensor& g) -> std::vector<Tensor> { return {g.reshape(in)}; });
}

Var squeeze(const Var& x, int64_t d) {
  return record(
      "squeeze", x.data().squeeze(d), {x},
      [in = x.shape()](const Tensor& g) -> std::vector<Tensor> { return {g.reshape(in)}; });
}

Var contiguous(const Var& x) {
  if (x.data().is_contiguous()) return x;
  return record("contiguous", x.data().contiguous(), {x},
                [](const Tensor& g) -> std::vector<Tensor> { return {g}; });
}

Var concat(const std::vector<Var>& xs, int64_t d) {
  std::vector<Tensor> ts;
  Shape sizes;
  for (const Var& v : xs) ts.push_back(v.data());
  const Tensor out = qkv::concat(ts, d);
  d = wrap_dim(d, out.dim(), "concat");
  for (const Var& v : xs) sizes.push_back(v.size(d));
  return record("concat", out, xs, [sizes, d](const Tensor& g) -> std::vector<Tensor> {
    return qkv::split(g, sizes, d);  // each input's gradient is its slice of g
  });
}

Var stack(const std::vector<Var>& xs, int64_t d) {
  std::vector<Var> us;
  for (const Var& v : xs) us.push_back(unsqueeze(v, d));
  return concat(us, d);
}

std::vector<Var> split(const Var& x, const Shape& sizes, int64_t d) {
  d = wrap_dim(d, x.dim(), "split");
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  QKV_CHECK(total == x.size(d), "split", "sizes ", sizes, " do not add up to dim ", d, " of ",
            x.shape());
  std::vector<Var> out;
  int64_t at = 0;
  for (int64_t s : sizes) {
    out.push_back(narrow(x, d, at, s));
    at += s;
  }
  return out;
}

std::vector<Var> chunk(const Var& x, int64_t n, int64_t d) {
  d = wrap_dim(d, x.dim(), "chunk");
  QKV_CHECK(n > 0 && x.size(d) % n == 0, "chunk", "dim ", d, " of ", x.shape(),
            " does not split into ", n, " equal parts");
  return split(x, Shape(n, x.size(d) / n), d);
}

}  // namespace qkv::ag
