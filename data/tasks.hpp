// Synthetic algorithmic tasks generated from a seed: copy, reverse and sort, plus the
// Annotated Transformer's copy setup reproduced exactly.
//
// copy / reverse / sort: symbols "1".."V" after the standard specials, so symbol k is id k + 3
// (<pad> 0, <bos> 1, <eos> 2, <unk> 3); each example draws a length uniformly in
// [min_len, max_len] and symbols uniformly; the target is the source, reversed, or sorted
// ascending. The batch frames targets as (<bos> y, y <eos>).
//
// annotated_copy (The Annotated Transformer, "A First Example"): V = 11 with id 0 = padding;
// every sequence has length 10, its first symbol is 1 and the other nine are uniform in 1..10
// (torch.randint(1, V)); src = tgt = that sequence. Its vocabulary is "<pad>", "1", ..., "10"
// (id k is the symbol k), without <bos>, <eos> or <unk>: 1 plays <bos>. The example stores
// src = [1, d1..d9] and y = [d1..d9]; with Framing{bos = 1, eos = -1} the batch gives
// tgt_in = [1, d1..d8] = tgt[:, :-1] and tgt_out = [d1..d9] = tgt[:, 1:], 9 target tokens a row,
// exactly as the original's Batch(src, tgt, pad=0).
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "core/names.hpp"
#include "data/dataset.hpp"
#include "data/vocab.hpp"

namespace qkv::data {

enum class SymbolTask { copy, reverse, sort };
inline constexpr EnumName<SymbolTask> kSymbolTaskNames[] = {
    {"copy", SymbolTask::copy}, {"reverse", SymbolTask::reverse}, {"sort", SymbolTask::sort}};
constexpr std::span<const EnumName<SymbolTask>> names_of(SymbolTask) { return kSymbolTaskNames; }
SymbolTask parse_task(const std::string& name);  // "copy", "reverse", "sort"
const char* task_name(SymbolTask k);

struct TaskOptions {
  int64_t vocab_size = 10;  // number of symbols V (the vocabulary adds the 4 specials)
  int64_t min_len = 1;
  int64_t max_len = 10;
};

Vocab task_vocab(int64_t vocab_size);  // specials + "1".."V"
// n examples of the task; the same (options, n, seed) gives the same examples.
Dataset make_task(SymbolTask kind, const TaskOptions& o, int64_t n, uint64_t seed);

inline constexpr int64_t kAnnotatedV = 11;
inline constexpr int64_t kAnnotatedLen = 10;
Vocab annotated_copy_vocab();
inline Framing annotated_copy_framing() { return Framing{1, -1}; }
Dataset make_annotated_copy(int64_t n, uint64_t seed);

// A seed for stream k derived from seed, so train / valid / test draw unrelated sequences.
uint64_t substream_seed(uint64_t seed, uint64_t k);

}  // namespace qkv::data
