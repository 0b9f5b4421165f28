// Classification tasks from the attention literature, generated from a seed, for an
// encoder-only classifier (nn/encoder_classifier.hpp). An example's src is a string of symbols,
// after a leading <cls> id when ClassifyOptions::cls; its tgt is one class id, {0} or {1}.
// The [data] tasks dyck, parity and majority load them (data/tasks/classify.cpp), for
// model.kind = "encoder" (docs/encoder.md).
//
// Vocabulary (classify_vocab): <pad> 0, <bos> 1, <eos> 2, <unk> 3, <cls> 4, then the symbols:
//   dyck "(" 5, ")" 6, "[" 7, "]" 8;  parity and majority "0" 5, "1" 6.
// Class names (class_names), id = class: dyck unbalanced / balanced; parity even / odd;
// majority "0" / "1" (the bit in the majority).
//
// Definitions (true_class), over the symbols without <cls>:
//   dyck      class 1 iff the string is in Dyck-2 with depth bound D = max_depth: every closer
//             closes the most recent unclosed opener, of its type; nothing is left open at the
//             end; and no more than D brackets are ever open at once. Class 0 otherwise.
//   parity    class = (number of 1s) mod 2.
//   majority  class 1 iff the 1s outnumber the 0s (ties are never generated: class 0 means
//             the 0s outnumber the 1s).
//
// Samplers: each example first draws its class, 0 or 1 with probability 1/2 (dyck), or draws a
// uniform string whose class is 0 or 1 with probability 1/2 by symmetry (parity, majority):
//   parity    length L uniform in [min_len, max_len], L uniform bits.
//   majority  length L uniform in [min_len, max_len], L uniform bits, redrawn (same L) while
//             the 0s and 1s tie (even L).
//   dyck      length L uniform over the even numbers in [max(2, min_len), max_len], for either
//             class (so the length says nothing). The height of a bracket string is its number
//             of openers minus closers so far; a path is its heights. Paths are drawn uniformly
//             among the paths of L steps from 0 back to 0 within a band of heights (and, when
//             asked, touching a given height), by counting their completions; each opener's type
//             is a fair coin and each closer closes the open bracket on top (a closer with none
//             open gets a fair coin).
//     class 1: a path within [0, D]; every balanced word of length L has L / 2 openers, so
//              class 1 is uniform over the balanced words of length L.
//     class 0: a near miss, one of these four kinds with equal probability (the first three
//              when L < 2 (D + 1), which leaves no room to nest D + 1 deep):
//       type swap    a balanced word with one closer, uniformly chosen, of the other type:
//                    same heights, counts and depth, one mismatched pair;
//       flip         a balanced word with one bracket, uniformly chosen among those whose flip
//                    keeps every height in [-1, D + 1], turned around (opener <-> closer, same
//                    type): the counts differ by 2;
//       early close  a path within [-1, D] that touches -1: some prefix closes more brackets
//                    than it opened, although the counts are equal;
//       too deep     a path within [0, D + 1] that touches D + 1: well nested, one level too
//                    deep.
//     Every string's heights stay within [-1, D + 1].
#pragma once
#include <cstdint>
#include <span>
#include <string>

#include "core/names.hpp"
#include "core/random.hpp"
#include "data/dataset.hpp"
#include "data/vocab.hpp"

namespace qkv::data {

inline constexpr const char* kCls = "<cls>";
inline constexpr int64_t kClsId = 4;  // in every classify_vocab

enum class ClassifyTask { dyck, parity, majority };
inline constexpr EnumName<ClassifyTask> kClassifyTaskNames[] = {
    {"dyck", ClassifyTask::dyck},
    {"parity", ClassifyTask::parity},
    {"majority", ClassifyTask::majority}};
constexpr std::span<const EnumName<ClassifyTask>> names_of(ClassifyTask) {
  return kClassifyTaskNames;
}

struct ClassifyOptions {
  int64_t min_len = 1;  // symbols, not counting <cls>
  int64_t max_len = 16;
  int64_t max_depth = 4;  // dyck: the depth bound D (>= 1)
  bool cls = true;        // src starts with <cls> (kClsId), for cls pooling
};

Vocab classify_vocab(ClassifyTask t);  // specials, <cls>, the task's symbols
Vocab class_names(ClassifyTask t);     // two names, id = class

// The class of a string of symbol ids (classify_vocab's, no <cls>) by the task's definition;
// qkv::Error on another id. max_depth is dyck's D (unused by the others).
int64_t true_class(ClassifyTask t, const Ids& symbols, int64_t max_depth);

// One example drawn from g (a function of o and g's state alone); qkv::Error naming the task
// when o is out of range: 1 <= min_len <= max_len; dyck also needs max_depth >= 1 and an even
// length >= 2 in [min_len, max_len].
Example make_dyck(const ClassifyOptions& o, Generator& g);
Example make_parity(const ClassifyOptions& o, Generator& g);
Example make_majority(const ClassifyOptions& o, Generator& g);
Example make_classify_example(ClassifyTask t, const ClassifyOptions& o, Generator& g);

// n examples from Generator(seed), named after the task: the same (t, o, n, seed) gives the
// same examples.
Dataset make_classify_task(ClassifyTask t, const ClassifyOptions& o, int64_t n, uint64_t seed);

}  // namespace qkv::data
