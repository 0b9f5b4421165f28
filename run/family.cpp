#include "run/family.hpp"

#include <algorithm>

#include "run/families.hpp"

namespace qkv::run {

int64_t Family::total_steps(const config::RunConfig& cfg, int64_t per_epoch) const {
  const config::TrainOptions& t = cfg.train;
  if (t.epochs == 0) return t.max_steps;  // as many epochs as max_steps takes
  return t.max_steps > 0 ? std::min(t.max_steps, t.epochs * per_epoch) : t.epochs * per_epoch;
}

const Family& family_for(data::TaskKind kind) {
  static const Seq2SeqFamily seq2seq;
  static const LanguageModelFamily lm;
  switch (data::family_of(kind)) {
    case data::TaskFamily::pairs:
      return seq2seq;
    case data::TaskFamily::lm:
      break;
  }
  return lm;
}

}  // namespace qkv::run
