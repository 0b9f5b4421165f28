// Relative position bias: Shaw et al. 2018's clipped offsets clip(j - i, -K, K), each with a
// learned scalar per head (Shaw et al. learn vectors; T5 learns scalars too but buckets offsets
// logarithmically, which this does not), added to the attention scores before the softmax. The
// table is (h, 2K + 1); column o + K holds offset o. Offsets beyond +-K share the edge columns, so
// any length works, and scores depend on positions only through j - i. A causal decoder never sees
// offsets > 0 (its mask hides them): those columns stay unused.
#pragma once
#include "autograd/ops.hpp"

namespace qkv::nn {

// (n * m) int64: column of the table for query i (at position q_offset + i) and key j (at j),
// row-major over (i, j).
Tensor relative_offsets(int64_t n, int64_t m, int64_t q_offset, int64_t clip);

// table: (h, 2K + 1) -> (1, h, n, m), ready to add to scores (B, h, n, m). Differentiable in
// table (repeated offsets accumulate their gradients).
ag::Var relative_position_bias(const ag::Var& table, int64_t n, int64_t m, int64_t q_offset = 0);

}  // namespace qkv::nn
