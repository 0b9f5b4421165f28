#include "nn/relative_bias.hpp"

#include <algorithm>

namespace qkv::nn {

Tensor relative_offsets(int64_t n, int64_t m, int64_t q_offset, int64_t clip) {
  QKV_CHECK(n >= 0 && m >= 0 && q_offset >= 0 && clip >= 0, "relative_offsets", "n = ", n,
            ", m = ", m, ", q_offset = ", q_offset, ", clip = ", clip, " must be >= 0");
  Tensor idx = empty({n * m}, DType::i64);
  int64_t* p = idx.data<int64_t>();
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j)
      p[i * m + j] = std::clamp(j - (i + q_offset), -clip, clip) + clip;
  return idx;
}

ag::Var relative_position_bias(const ag::Var& table, int64_t n, int64_t m, int64_t q_offset) {
  QKV_CHECK(table.dim() == 2 && table.size(1) % 2 == 1, "relative_position_bias", "table ",
            table.shape(), " is not (h, 2K + 1)");
  const int64_t h = table.size(0), clip = (table.size(1) - 1) / 2;
  const Tensor idx = relative_offsets(n, m, q_offset, clip);
  // (h, n * m) -> (1, h, n, m)
  return ag::reshape(ag::index_select(table, 1, idx), {1, h, n, m});
}

}  // namespace qkv::nn
