// Attention maps of a trained run on one input (drawn by figures/attention_maps.hpp): what
// `qkv attention` writes to a file and `qkv report` puts on its page.
#pragma once
#include <string>

#include "figures/heatmap.hpp"
#include "run/run.hpp"

namespace qkv::app {

// The model's greedy output for one source, and the attention weights of one teacher-forced
// pass over that output (decoder input <bos> + out, labels out + <eos>), every layer and kind.
struct AttendedInput {
  data::Ids src, out;         // source ids; greedy output ids (no <bos> or <eos>)
  data::Ids tgt_in, tgt_out;  // the decoder's input and labels for the pass
  nn::AttentionMaps maps;     // each layer's weights (1, h, n, m)
};
AttendedInput attend(const LoadedRun& r, const data::Ids& src);

// One map as a heatmap: kind is self (encoder), decoder-self or cross; layer is 1-based (0:
// the last); head is "mean" or a 1-based head. Bad values throw qkv::Error naming `op` and the
// valid range. cell: pixels per cell side.
figures::Heatmap attention_heatmap(const LoadedRun& r, const AttendedInput& a,
                                   const std::string& kind, int64_t layer, const std::string& head,
                                   int cell = 32, const char* op = "attention");

// Heads per layer of the model that produced a (0 when it has no attention layers).
int64_t attention_heads(const AttendedInput& a);

// Target-side ids as text: the generated tasks' symbols separated by spaces, text tasks
// detokenized (stops at <eos>, drops <pad> and <bos>).
std::string target_text(const LoadedRun& r, const data::Ids& ids);

}  // namespace qkv::app
