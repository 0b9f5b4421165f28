#include "data/tasks.hpp"

#include <algorithm>

#include "core/random.hpp"

namespace qkv::data {

SymbolTask parse_task(const std::string& name) {
  if (const auto k = find_name<SymbolTask>(name)) return *k;
  throw Error(cat("parse_task: unknown task '", name, "' (expected copy, reverse or sort)"));
}

const char* task_name(SymbolTask k) { return name_of(k).data(); }

Vocab task_vocab(int64_t vocab_size) {
  QKV_CHECK(vocab_size >= 1, "task_vocab", "vocab_size must be >= 1, got ", vocab_size);
  std::vector<std::string> symbols;
  for (int64_t k = 1; k <= vocab_size; ++k) symbols.push_back(std::to_string(k));
  return Vocab::with_specials(symbols);
}

Dataset make_task(SymbolTask kind, const TaskOptions& o, int64_t n, uint64_t seed) {
  const char* op = task_name(kind);
  QKV_CHECK(o.vocab_size >= 1, op, "vocab_size must be >= 1, got ", o.vocab_size);
  QKV_CHECK(o.min_len >= 1 && o.max_len >= o.min_len, op, "need 1 <= min_len <= max_len, got ",
            o.min_len, " and ", o.max_len);
  QKV_CHECK(n >= 0, op, "negative example count ", n);
  Generator g(seed);
  Dataset ds;
  ds.name = op;
  ds.examples.reserve(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const int64_t L = o.min_len + g.next_int(o.max_len - o.min_len + 1);
    Example e;
    for (int64_t j = 0; j < L; ++j) e.src.push_back(4 + g.next_int(o.vocab_size));  // "1" is id 4
    e.tgt = e.src;
    if (kind == SymbolTask::reverse) std::reverse(e.tgt.begin(), e.tgt.end());
    if (kind == SymbolTask::sort) std::sort(e.tgt.begin(), e.tgt.end());
    ds.examples.push_back(std::move(e));
  }
  return ds;
}

Vocab annotated_copy_vocab() {
  std::vector<std::string> t{kPad};
  for (int64_t k = 1; k < kAnnotatedV; ++k) t.push_back(std::to_string(k));
  return Vocab(t);
}

Dataset make_annotated_copy(int64_t n, uint64_t seed) {
  QKV_CHECK(n >= 0, "annotated_copy", "negative example count ", n);
  Generator g(seed);
  Dataset ds;
  ds.name = "annotated_copy";
  for (int64_t i = 0; i < n; ++i) {
    Example e;
    e.src.push_back(1);  // data[:, 0] = 1
    for (int64_t j = 1; j < kAnnotatedLen; ++j) e.src.push_back(1 + g.next_int(kAnnotatedV - 1));
    e.tgt.assign(e.src.begin() + 1, e.src.end());  // the framing puts the leading 1 back
    ds.examples.push_back(std::move(e));
  }
  return ds;
}

uint64_t substream_seed(uint64_t seed, uint64_t k) { return random_bits(seed, ~k); }

}  // namespace qkv::data
