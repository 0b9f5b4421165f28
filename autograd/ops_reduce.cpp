// Reductions and their derivatives: the gradient of a reduction is broadcast back over the
// reduced dims (unsqueezed when keepdim was false).
#include "autograd/ops.hpp"

namespace qkv::ag {
namespace {

// g has the reduction's output shape; returns it reshaped with the reduced dims as size 1,
// ready to broadcast against the input of shape s.
Tensor unsqueeze_reduced(const Tensor& g, const Shape& s, const Shape& dims, bool keepdim) {
  if (keepdim) return g;
  Shape kept = s;
  if (dims.empty()) {
    std::fill(kept.begin(), kept.end(), 1);
  } else {
    for (int64_t d : dims) kept[wrap_dim(d, static_cast<int64_t>(s.size()), "reduce")] = 1;
  }
  return g.reshape(kept);
}

}  // namespace

Var sum(const Var& x, const Shape& dims, bool keepdim) {
  return record("sum", qkv::sum(x.data(), dims, keepdim), {x},
                [s = x.shape(), dims, keepdim](const Tensor& g) -> std::vector<Tensor> {
                  return {unsqueeze_reduced(g, s, dims, keepdim).expand(s).contiguous()};
                });
}

Var mean(const Var& x, const Shape& dims, bool keepdim) {
  const Tensor out = qkv::mean(x.data(), dims, keepdim);
  const double n =
      static_cast<double>(x.numel()) / static_cast<double>(std::max<int64_t>(out.numel(), 1));
  return record("mean", out, {x},
                [s = x.shape(), dims, keepdim, n](const Tensor& g) -> std::vector<Tensor> {
                  return {qkv::mul(unsqueeze_reduced(g, s, dims, keepdim).expand(s), 1.0 / n)};
                });
}

Var max(const Var& x, const Shape& dims, bool keepdim) {
  // Lay the reduced dims out last and flattened: (kept..., R). argmax there picks the first
  // maximal element of each block, which alone receives the gradient.
  const Tensor& xd = x.data();
  std::vector<bool> reduced(xd.dim(), dims.empty());
  for (int64_t d : dims) reduced[wrap_dim(d, xd.dim(), "max")] = true;
  Shape perm, kept;
  int64_t r = 1;
  for (int64_t d = 0; d < xd.dim(); ++d)
    if (!reduced[d]) perm.push_back(d), kept.push_back(xd.size(d));
  for (int64_t d = 0; d < xd.dim(); ++d)
    if (reduced[d]) perm.push_back(d), r *= xd.size(d);
  Shape lanes_shape = kept;
  lanes_shape.push_back(r);
  const Tensor lanes = xd.permute(perm).reshape(lanes_shape);
  const Tensor idx = argmax(lanes, -1, true);  // (kept..., 1)
  return record("max", qkv::max(xd, dims, keepdim), {x},
                [idx, lanes_shape, perm, s = xd.shape()](const Tensor& g) -> std::vector<Tensor> {
                  const Tensor gl = g.reshape(idx.shape());
                  const Tensor hit = scatter_add(zeros(lanes_shape, g.dtype()), -1, idx, gl);
                  // back from (kept..., R) to x's layout: unflatten, then invert perm
                  Shape permuted;
                  for (int64_t p : perm) permuted.push_back(s[p]);
                  Shape inv(perm.size());
                  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int64_t>(i);
                  return {hit.reshape(permuted).permute(inv).contiguous()};
                });
}

Var var(const Var& x, const Shape& dims, int64_t correction, bool keepdim) {
  // Composed from primitives: sum((x - mean)^2) / (n - correction).
  const Var mu = mean(x, dims, true);
  const Var dev = sub(x, mu);
  const int64_t n = x.numel() / std::max<int64_t>(mu.numel(), 1);
  return mul(sum(mul(dev, dev), dims, keepdim),
             1.0 / static_cast<double>(std::max<int64_t>(n - correction, 0)));
}

}  // namespace qkv::ag
