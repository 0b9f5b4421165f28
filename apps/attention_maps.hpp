// Attention maps of a trained run on one input (the model pass: run/inference.hpp,
// Inference::inspect; the drawing:
// figures/attention_maps.hpp): what `qkv attention` writes to a file and `qkv report` puts on
// its page.
#pragma once
#include <string>

#include "figures/attention_maps.hpp"
#include "figures/heatmap.hpp"
#include "run/inference.hpp"

namespace qkv::app {

// The layers (each (h, n, m)) of the attention a --kind names in an inspection: its view of
// that kind (a language model's causal self-attention is its decoder-self). Empty when the
// model has none.
const std::vector<Tensor>& layers_of(const run::Inspection& a, figures::MapKind kind);
// Heads per layer of the inspection's maps (0 when there are none).
int64_t attention_heads(const run::Inspection& a);

// One map as a heatmap: kind is self (encoder), decoder-self or cross; layer is 1-based (0:
// the last); head is "mean" or a 1-based head. Bad values throw qkv::Error naming `op` and the
// valid range. cell: pixels per cell side.
figures::Heatmap attention_heatmap(const run::Inference& inf, const run::Inspection& a,
                                   figures::MapKind kind, int64_t layer, const std::string& head,
                                   int cell = 32, const char* op = "attention");

}  // namespace qkv::app
