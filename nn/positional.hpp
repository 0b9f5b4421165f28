// Positional encodings, added to the (B, n, d) token embeddings.
//
// Sinusoidal (the lesson's): PE(p, 2i) = sin(p / 10000^(2i/d)), PE(p, 2i+1) = cos(p /
// 10000^(2i/d)); computed for any length (the table grows on demand, no fixed limit).
// Learned: a (n_max, d) table trained with the model; a sequence longer than n_max is an error.
// Relative and rope act inside self-attention (nn/relative_bias.hpp, nn/rotary.hpp): for them,
// as for none, nothing is added to the embeddings.
#pragma once
#include <mutex>

#include "nn/kinds.hpp"
#include "nn/layers.hpp"

namespace qkv::nn {

// The sinusoidal table for positions [offset, offset + n): (n, d), float64 values cast to dt.
Tensor sinusoidal_table(int64_t n, int64_t d, DType dt = DType::f32, int64_t offset = 0);

// "sinusoidal" | "learned" | "relative" | "rope" | "none" (nn/kinds.hpp)
PositionKind parse_position(const std::string& name);

class PositionalEncoding : public Module {
 public:
  PositionalEncoding(PositionKind kind, int64_t d, int64_t n_max, Generator& gen, double dropout,
                     std::shared_ptr<Generator> dropout_gen);
  // x: (B, n, d) -> x + PE[offset : offset + n], then dropout.
  Var forward(const Var& x, int64_t offset = 0) const;

  PositionKind kind;
  int64_t d, n_max;
  Var table;  // learned only: (n_max, d)
  std::shared_ptr<Dropout> dropout;

 private:
  // Sinusoidal rows computed so far (float32 or float64, as last asked), grown on demand.
  mutable std::mutex mu_;
  mutable Tensor cache_;
};

}  // namespace qkv::nn
