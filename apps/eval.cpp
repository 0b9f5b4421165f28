// qkv eval DIR [--split valid|test|train] [--json] [--max-len N [--min-len N]]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "apps/commands.hpp"
#include "apps/limits.hpp"
#include "apps/lm.hpp"
#include "apps/run.hpp"
#include "core/parallel.hpp"

namespace qkv::app {
namespace {

// Length generalisation: the run's synthetic task again, with lengths in [min_len, max_len]
// and the same seeds, so only the lengths change. Text tasks (tsv, dates) have no length knob.
void regenerate(LoadedRun& r, int64_t min_len, int64_t max_len) {
  data::DataConfig c = r.config.data;
  if (c.task != "copy" && c.task != "reverse" && c.task != "sort")
    throw Error("eval --max-len: data.task = '" + c.task +
                "' cannot be regenerated at other lengths (only copy, reverse and sort)");
  if (min_len > max_len)
    throw Error("eval: --min-len " + std::to_string(min_len) + " is above --max-len " +
                std::to_string(max_len));
  c.min_len = min_len;
  c.max_len = max_len;
  data::DataSplits d = data::load_data(c);
  r.data.train = std::move(d.train);
  r.data.valid = std::move(d.valid);
  r.data.test = std::move(d.test);
}

// Learned positions end at model.max_len: say so, naming the key, instead of failing mid-way.
// (Up to model.max_len the table has rows, trained or not: those are evaluated.)
void check_learned(const LoadedRun& r, const data::Dataset& ds) {
  if (r.config.model.position != "learned") return;
  int64_t need = 0;
  for (const auto& e : ds.examples) {
    const int64_t src = static_cast<int64_t>(e.src.size()),
                  tgt = static_cast<int64_t>(e.tgt.size());
    need = std::max({need, src, r.data.framing.target_len(tgt)});
    if (r.data.framing.eos >= 0)
      need = std::max(need, std::max(src, tgt) + r.config.train.max_decode_extra);
  }
  if (need > r.config.model.max_len)
    throw Error("model.max_len: learned positions cover " + std::to_string(r.config.model.max_len) +
                " tokens, but evaluating " + ds.name + " needs " + std::to_string(need) +
                " (with <eos> and train.max_decode_extra): learned positions cannot go further");
}

// A language model: the exact loss over the whole split (apps/lm.hpp, lm_loss_full).
int eval_lm(const EvalArgs& a, const LoadedRun& r) {
  QKV_CHECK(a.max_len == 0 && a.min_len == 0, "eval",
            "--max-len / --min-len regenerate synthetic"
            " tasks; a language model has none");
  QKV_CHECK(a.split == "valid" || a.split == "train", "eval",
            "--split must be valid or train for"
            " a language model (the first 90% trains, the last 10% validates), got '",
            a.split, "'");
  const data::DataSplits d = data::load_data(r.config.data);
  QKV_CHECK(d.tgt_vocab == r.data.tgt_vocab, "eval", a.run_dir,
            ": the text's vocabulary differs from the run's; the data changed since training");
  const int64_t block = r.config.data.block_size;
  const LmLoss m = lm_loss_full(*r.model, a.split == "valid" ? d.lm_valid : d.lm_train, block,
                                r.config.data.batch_size);
  if (a.json) {
    std::printf(
        "%s\n",
        nlohmann::json(
            {{"loss", m.loss}, {"tokens", m.tokens}, {"windows", m.windows}, {"block_size", block}})
            .dump()
            .c_str());
  } else {
    std::printf("%s (%s, %s split: %lld tokens in %lld windows of %lld)\n", a.run_dir.c_str(),
                r.checkpoint.c_str(), a.split.c_str(), static_cast<long long>(m.tokens),
                static_cast<long long>(m.windows), static_cast<long long>(block));
    std::printf("  loss            %.4f\n  bits per char   %.4f\n", m.loss, m.loss / std::log(2.0));
  }
  return 0;
}

}  // namespace

int cmd_eval(const EvalArgs& a) {
  LoadedRun r = load_run(a.run_dir, a.checkpoint);
  apply_threads(a.threads > 0 ? a.threads : r.config.threads,
                a.threads > 0 ? "--threads" : "threads");
  if (r.model->lm) return eval_lm(a, r);
  if (a.min_len > 0 && a.max_len == 0) throw Error("eval: --min-len needs --max-len");
  const int64_t lo = a.min_len > 0 ? a.min_len : std::min(r.config.data.min_len, a.max_len);
  if (a.max_len > 0) regenerate(r, lo, a.max_len);
  const data::Dataset* ds = a.split == "valid"   ? &r.data.valid
                            : a.split == "test"  ? &r.data.test
                            : a.split == "train" ? &r.data.train
                                                 : nullptr;
  QKV_CHECK(ds, "eval", "--split must be valid, test or train, got '", a.split, "'");
  check_learned(r, *ds);
  const Metrics m = evaluate(*r.model, *ds, r.data.framing, r.config.data.batch_size,
                             r.config.train.max_decode_extra);
  if (a.json) {
    nlohmann::json j = {{"loss", m.loss},
                        {"token_accuracy", m.token_accuracy},
                        {"exact_match", m.exact_match},
                        {"examples", m.examples}};
    if (a.max_len > 0) {  // the regenerated split: its lengths and target tokens (with <eos>)
      j["min_len"] = lo;
      j["max_len"] = a.max_len;
      j["tokens"] = m.tokens;
    }
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s (%s, %s split, %lld examples", a.run_dir.c_str(), r.checkpoint.c_str(),
                a.split.c_str(), static_cast<long long>(m.examples));
    if (a.max_len > 0)
      std::printf(", lengths %lld..%lld", static_cast<long long>(lo),
                  static_cast<long long>(a.max_len));
    std::printf(")\n");
    std::printf("  loss            %.4f\n  token accuracy  %.4f\n  exact match     %.4f\n", m.loss,
                m.token_accuracy, m.exact_match);
  }
  return 0;
}

}  // namespace qkv::app
