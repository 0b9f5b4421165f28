// Indexing ops. Their backward scatter-adds the gradient to the indexed positions, so
// repeated indices accumulate, in index order (deterministic).
#include "autograd/ops.hpp"

namespace qkv::ag {

Var index_select(const Var& x, int64_t d, const Tensor& idx) {
  return record("index_select", qkv::index_select(x.data(), d, idx), {x},
                [s = x.shape(), dt = x.dtype(), d, idx](const Tensor& g) -> std::vector<Tensor> {
                  return {index_add(zeros(s, dt), d, idx, g)};
                });
}

Var gather(const Var& x, int64_t d, const Tensor& idx) {
  return record("gather", qkv::gather(x.data(), d, idx), {x},
                [s = x.shape(), dt = x.dtype(), d, idx](const Tensor& g) -> std::vector<Tensor> {
                  return {scatter_add(zeros(s, dt), d, idx, g)};
                });
}

Var embedding(const Var& weight, const Tensor& ids) {
  QKV_CHECK(weight.dim() == 2, "embedding", "weight must be (vocab, dim), got ", weight.shape());
  QKV_CHECK(ids.dtype() == DType::i64, "embedding", "ids must be int64, got ",
            dtype_name(ids.dtype()), " ", ids.shape());
  Shape out_shape = ids.shape();
  out_shape.push_back(weight.size(1));
  return reshape(index_select(weight, 0, ids.flatten()), out_shape);
}

}  // namespace qkv::ag
