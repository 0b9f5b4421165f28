// The work of looking inside a model, bounded before it starts. Each size of `qkv patch` and
// `qkv heads` (an input's tokens, the heads, the batches, the probes) has its own bound, but the
// time is their product: two 1000-token inputs make patching run 2000 passes of 2000 tokens.
// So the work is counted as forward passes times the tokens each puts through the model (token
// passes; a backward pass counts as two forward ones), and a command or a request past its
// bound is refused with one line naming it, before any pass runs.
//
// The default bounds, measured on a 2-core machine shared with other work (load about 5):
// patching a copy model's 300-token inputs (384k token passes) takes 6 s, and the head table of
// shakespeare-char-medium on 4 batches (434k) 105 s; the table of a Multi30k model fits one
// batch (590k).
#pragma once
#include <cstdint>
#include <string>

#include "inspect/head_table.hpp"

namespace qkv::run {
class Inference;
}

namespace qkv::inspect {

inline constexpr int64_t kMaxPatchWork = 400'000;    // qkv patch --max-work
inline constexpr int64_t kMaxHeadsWork = 1'000'000;  // qkv heads --max-work, serve's heads

struct Work {
  double token_passes = 0;
  std::string what;  // how it adds up: "2028 passes of 2011 tokens"
};

// qkv::Error "OP: WHAT: N token passes, more than the bound of M (HOW)" when w is past bound.
// how: what raises the bound or lowers the work ("--max-work", "the server's limit").
void check_work(const Work& w, int64_t bound, const std::string& op, const std::string& how);

// patch_activations on inputs of n tokens: the two runs and their inspections, one pass per
// head and one per layer and position of the input side, each of the input and its output.
Work patch_work(const run::Inference& inf, int64_t n);

// head_table with o: the split's batches once for the loss, three times for the importance
// (forward and backward), once for the means and twice per head, and the probe's sequences.
Work head_table_work(const run::Inference& inf, const HeadTableOptions& o);

// The batches of the split head_table takes with o: `asked` (>= 0; 0: all) when it fits the
// bound; -1: as many as fit up to kDefaultHeadBatches, at least one. Refused (check_work) when
// what is asked, or one batch, does not fit.
inline constexpr int64_t kDefaultHeadBatches = 4;
int64_t head_table_batches(const run::Inference& inf, HeadTableOptions o, int64_t asked,
                           int64_t bound, const std::string& op, const std::string& how);

}  // namespace qkv::inspect
