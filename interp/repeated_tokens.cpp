#include "interp/repeated_tokens.hpp"

#include <algorithm>

namespace qkv::interp {

Tensor repeated_tokens(const RepeatedTokens& spec, Generator& g) {
  const char* op = "repeated_tokens";
  QKV_CHECK(spec.batch > 0 && spec.length > 0, op, "needs batch and length > 0, got batch ",
            spec.batch, ", length ", spec.length);
  std::vector<int64_t> drawable;  // the ids r is drawn from, ascending
  for (int64_t id = 0; id < spec.vocab; ++id)
    if (std::find(spec.specials.begin(), spec.specials.end(), id) == spec.specials.end())
      drawable.push_back(id);
  QKV_CHECK(!drawable.empty(), op, "no token to draw: the vocabulary of ", spec.vocab,
            " ids is all specials");
  const Tensor draws = randint({spec.batch, spec.length}, 0, static_cast<int64_t>(drawable.size()),
                               g);  // (batch, L)
  const int64_t prefix = spec.bos >= 0 ? 1 : 0, width = prefix + 2 * spec.length;
  Tensor out = empty({spec.batch, width}, DType::i64);
  const int64_t* d = draws.data<int64_t>();
  int64_t* o = out.data<int64_t>();
  for (int64_t b = 0; b < spec.batch; ++b) {
    int64_t* row = o + b * width;
    if (prefix) row[0] = spec.bos;
    for (int64_t k = 0; k < spec.length; ++k)
      row[prefix + k] = row[prefix + spec.length + k] = drawable[d[b * spec.length + k]];
  }
  return out;
}

}  // namespace qkv::interp
