// Looking inside a trained run on one input: the model's greedy output, every layer's attention
// weights and the logits of one teacher-forced pass over that output. What `qkv attention`
// draws, `qkv report` puts on its page and `qkv serve` sends to the browser.
#pragma once
#include <string>
#include <vector>

#include "run/run.hpp"

namespace qkv::serve {

// The model's greedy output for one source, and the attention weights of one teacher-forced
// pass over that output (decoder input <bos> + out, labels out + <eos>), every layer and kind.
// A language model reads the text itself: src = tgt_in = tgt_out = the text, out = its guess
// of the next token at each position.
struct AttendedInput {
  data::Ids src, out;         // source ids; greedy output ids (no <bos> or <eos>)
  data::Ids tgt_in, tgt_out;  // the decoder's input and labels for the pass
  nn::AttentionMaps maps;     // each layer's weights (1, h, n, m)
  Tensor logits;              // (T, V): the pass's logits, one row per decoder position
};
// Runs the model in eval mode without recording; the model's training flag is restored.
// Not safe to call for one model from two threads at once (the flag is shared).
AttendedInput attend(const run::LoadedRun& r, const data::Ids& src);

// Heads per layer of the model that produced a (0 when it has no attention layers).
int64_t attention_heads(const AttendedInput& a);

// Ids as labels for an axis: SentencePiece's word-start mark U+2581 as "_", a character
// model's space as "_" and line break as "\n".
std::vector<std::string> token_labels(const data::Ids& ids, const data::Vocab& v);

// Target-side ids as text: the generated tasks' symbols separated by spaces, text tasks
// detokenized (stops at <eos>, drops <pad> and <bos>), a language model's text with a line
// break shown as \n.
std::string target_text(const run::LoadedRun& r, const data::Ids& ids);

}  // namespace qkv::serve
