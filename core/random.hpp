// Random numbers from a counter-based generator: element i of a draw depends only on the
// seed and the generator's position, never on the thread count or on which thread drew it.
#pragma once
#include <cstdint>

#include "tensor.hpp"

namespace qkv {

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  uint64_t seed() const { return seed_; }
  uint64_t position() const { return counter_; }  // saved in checkpoints
  void set_state(uint64_t seed, uint64_t position) {
    seed_ = seed;
    counter_ = position;
  }
  // Reserves n consecutive counters and returns the first; used by the fills below.
  uint64_t advance(uint64_t n) {
    uint64_t c = counter_;
    counter_ += n;
    return c;
  }

  uint64_t next_u64();          // one 64-bit draw
  double next_uniform();        // [0, 1)
  int64_t next_int(int64_t n);  // [0, n)

 private:
  uint64_t seed_;
  uint64_t counter_ = 0;
};

// The 64-bit draw at (seed, counter): a stateless mix (splitmix64 of both).
uint64_t random_bits(uint64_t seed, uint64_t counter);

Tensor rand(const Shape& s, Generator& g, DType dt = DType::f32);  // U[0, 1)
Tensor uniform(const Shape& s, double lo, double hi, Generator& g, DType dt = DType::f32);
Tensor randn(const Shape& s, Generator& g, DType dt = DType::f32);     // N(0, 1)
Tensor randint(const Shape& s, int64_t lo, int64_t hi, Generator& g);  // int64 in [lo, hi)
// Bool mask whose entries are true with probability p_keep (dropout masks).
Tensor bernoulli(const Shape& s, double p_keep, Generator& g);
// Inverted dropout's scaled keep-mask: 1 / (1 - p_drop) where bernoulli(s, 1 - p_drop, g) would
// keep (the same draws, so the same elements), 0 elsewhere; one pass, no bool tensor between.
Tensor dropout_mask(const Shape& s, double p_drop, DType dt, Generator& g);
// Inverted dropout in one pass: y = x * dropout_mask(x.shape(), p_drop, x.dtype(), g), the same
// draws and the same bits, without the float mask; the backward gets the kept elements as
// bytes (a quarter of the float mask's memory, and one pass less forward).
struct DropoutResult {
  Tensor y;     // x's shape and dtype, contiguous
  Tensor keep;  // x's shape, bool: 1 where kept
};
// x: any shape, float32 or float64; p_drop in [0, 1)
DropoutResult dropout_forward(const Tensor& x, double p_drop, Generator& g);
// g: dL/dy, keep: the forward's -> dL/dx = g * (keep ? 1 / (1 - p_drop) : 0)
Tensor dropout_backward(const Tensor& g, const Tensor& keep, double p_drop);
// A random permutation of 0..n-1 (Fisher-Yates from the generator).
std::vector<int64_t> randperm(int64_t n, Generator& g);

}  // namespace qkv
