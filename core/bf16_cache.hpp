// Internal to core/: the bfloat16 copies that bf16 products read (core/precision.hpp).
#pragma once
#include <cstdint>

#include "bf16.hpp"
#include "tensor.hpp"

namespace qkv::detail {

// A stored row-major float32 matrix: `rows` rows of `cols` elements, row stride ld, starting at
// t's data. t keeps the storage alive.
struct StoredMatrix {
  Tensor t;
  int64_t rows = 0, cols = 0, ld = 0;
};

// The matrix rounded to bfloat16, packed (ld = cols): converted at its first use since the last
// PrecisionScope boundary (a scope's start or end) and reused until the next one. The buffer is
// kept for the next copy of the same matrix.
const bf16_t* bf16_weight(const StoredMatrix& w);

// The matrix rounded to bfloat16, packed. Inside a PrecisionScope the copy is made at the
// matrix's first use and reused by every later product of the scope that reads the same
// matrix (the same storage, offset, shape and stride) while the storage's version is unchanged
// (Storage::version: an in-place write makes a fresh copy); valid until the scope ends. Past
// kActivationCacheBytes of copies in one scope (a command's scope around all its decoding),
// and outside any scope, the copy goes to this thread's scratch buffer `slot` (0 or 1), valid
// until the next call with the same slot on this thread.
const bf16_t* bf16_activation(const StoredMatrix& x, int slot);

// For an op that writes x itself and can round it in the same pass (an epilogue): a buffer for
// x's bfloat16 copy (packed, rows x cols), registered as bf16_activation's copy of x at x's
// current version, for the caller to fill before any product reads x; nullptr where
// bf16_activation would not keep a copy (outside a PrecisionScope, or past
// kActivationCacheBytes). Not counted as a rounding.
bf16_t* bf16_activation_slot(const StoredMatrix& x);

// How many activation copies this thread has rounded (not reused) so far: for tests.
uint64_t bf16_activation_roundings();

}  // namespace qkv::detail
