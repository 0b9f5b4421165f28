// The language-model family (data.task = "lm", model.kind = "decoder"), after nanoGPT: windows
// of block_size tokens at random offsets of one token stream; an "epoch" is as many tokens as
// the training text; validation is estimate_loss; max_steps alone, when set, is the run's
// length (max_iters).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/cancel.hpp"
#include "core/random.hpp"
#include "data/lm.hpp"
#include "nn/decoder_lm.hpp"
#include "nn/model_sites.hpp"
#include "run/families.hpp"
#include "run/lm.hpp"
#include "runfolder/average.hpp"

#include "run/inference.hpp"
#include "run/train_hooks.hpp"
#include "run/train_run.hpp"

namespace qkv::run {

std::unique_ptr<nn::Model> LanguageModelFamily::make_model(const nn::ModelConfig& c,
                                                           Generator& gen) const {
  return std::make_unique<nn::DecoderLM>(c, gen);
}

std::vector<nn::AttentionSite> LanguageModelFamily::attention_sites(
    const nn::ModelConfig& c) const {
  return nn::decoder_lm_sites(c);
}

std::unique_ptr<data::BatchSource> LanguageModelFamily::make_loader(const config::RunConfig& cfg,
                                                                    const data::DataSplits& d,
                                                                    int rank, int ranks) const {
  return std::make_unique<data::LmLoader>(std::make_shared<const data::Ids>(d.lm_train),
                                          cfg.data.block_size, cfg.data.batch_size, cfg.seed, rank,
                                          ranks);
}

int64_t LanguageModelFamily::steps_per_epoch(const config::RunConfig& cfg,
                                             const data::DataSplits& d) const {
  return std::max<int64_t>(
      1, static_cast<int64_t>(d.lm_train.size()) / (cfg.data.batch_size * cfg.data.block_size));
}

int64_t LanguageModelFamily::total_steps(const config::RunConfig& cfg, int64_t per_epoch) const {
  if (cfg.train.max_steps > 0) return cfg.train.max_steps;
  return Family::total_steps(cfg, per_epoch);
}

std::string LanguageModelFamily::split_sizes(const data::DataSplits& d) const {
  return fmt::format("{} train / {} valid tokens", d.lm_train.size(), d.lm_valid.size());
}

// nanoGPT's estimate_loss: eval_iters random batches of each split, drawn from a generator
// of (seed, step), so a resumed run estimates exactly as an uninterrupted one.
bool LanguageModelFamily::validate(RunContext& c, train::TrainState& st) const {
  const config::RunConfig& cfg = c.run.config;
  Generator g(random_bits(cfg.seed ^ 0x65737469ULL, static_cast<uint64_t>(st.step)));
  const int64_t bs = cfg.data.block_size, b = cfg.data.batch_size, it = cfg.train.eval_iters;
  const auto& lm = nn::model_as<nn::DecoderLM>(*c.run.model, "validate");
  const double train_loss = lm_loss_estimate(lm, c.run.data.lm_train, bs, b, it, g);
  const double loss = lm_loss_estimate(lm, c.run.data.lm_valid, bs, b, it, g);
  c.metrics.write({{"step", st.step},
                   {"split", "valid"},
                   {"loss", loss},
                   {"train_loss", train_loss},
                   {"batches", it}});
  const bool better = loss < st.best_loss;
  if (better) {
    st.best_loss = loss;
    st.evals_since_best = 0;
  } else {
    ++st.evals_since_best;
  }
  c.say(fmt::format("step {}: train loss {:.4f}, val loss {:.4f}{}", st.step, train_loss, loss,
                    better ? "  (best)" : ""));
  return better;
}

// No test split: the best validation estimate is the result; with checkpoint.average_last,
// the average's estimate too (the batches of the last validation's generator).
std::string LanguageModelFamily::final_result(TrainingRun& r, const train::TrainState& st,
                                              MetricsLog& metrics) const {
  const config::RunConfig& cfg = r.config;
  std::string line =
      fmt::format("done: {} steps; best val loss {:.4f} ({} batches of {} x {} tokens)", st.step,
                  st.best_loss, cfg.train.eval_iters, cfg.data.batch_size, cfg.data.block_size);
  const std::string averaged = load_final_average(r);
  if (averaged.empty()) return line;
  Generator g(random_bits(cfg.seed ^ 0x65737469ULL, static_cast<uint64_t>(st.step)));
  const int64_t bs = cfg.data.block_size, b = cfg.data.batch_size, it = cfg.train.eval_iters;
  const auto& lm = nn::model_as<nn::DecoderLM>(*r.model, "final_result");
  lm_loss_estimate(lm, r.data.lm_train, bs, b, it, g);  // as validation draws: train first
  const double loss = lm_loss_estimate(lm, r.data.lm_valid, bs, b, it, g);
  metrics.write({{"step", st.step},
                 {"split", "valid_average"},  // not a point of the validation curve
                 {"checkpoint", kAverageCheckpoint},
                 {"loss", loss},
                 {"batches", it}});
  return line + fmt::format("; {}: val loss {:.4f}", averaged, loss);
}

void LanguageModelFamily::check_positions(const config::RunConfig& cfg,
                                          const data::DataSplits&) const {
  const nn::ModelConfig& m = cfg.model;
  if (m.position == nn::PositionKind::learned && cfg.data.block_size > m.max_len)
    throw Error("model.max_len: learned positions cover " + std::to_string(m.max_len) +
                " tokens, less than data.block_size = " + std::to_string(cfg.data.block_size));
}

const Family& language_model_family() {  // the registry's (run/family.cpp)
  static const LanguageModelFamily family;
  return family;
}

int64_t LanguageModelFamily::max_input_tokens(const config::RunConfig& c,
                                              const nn::Model& model) const {
  return std::min(c.data.block_size, nn::model_as<nn::DecoderLM>(model, "context").max_positions());
}

int64_t LanguageModelFamily::max_output_tokens(const config::RunConfig&, int64_t) const {
  return std::numeric_limits<int64_t>::max();  // the context slides: a sample has no end
}

// The probe's 2 L tokens are one text the model reads; nothing is decoded.
config::ProbeRoom LanguageModelFamily::probe_room(const config::RunConfig& c,
                                                  const nn::Model& model) const {
  return {max_input_tokens(c, model), "data.block_size", std::nullopt};
}

// The text alone: nothing is decoded.
int64_t LanguageModelFamily::inspection_tokens(const config::RunConfig&, int64_t n) const {
  return n;
}

// Every attention reads the text itself.
std::vector<data::Ids> LanguageModelFamily::probe_sources(const data::DataSplits&,
                                                          const std::string&, int64_t) const {
  return {};
}

// Every repeated sequence's causal maps are kept until all are scored; the icl windows go
// through the model in one pass: their activations, and the logits with a float64 copy for
// the position losses.
MemoryEstimate LanguageModelFamily::probe_memory(const config::RunConfig& c, double tv) const {
  const config::ProbeOptions& p = c.probe;
  const nn::ModelConfig& m = c.model;
  const double n = 2.0 * static_cast<double>(p.length > 0 ? p.length : 16);
  const double dec = static_cast<double>(m.decoder_layers);
  const double per_input = 2 * 4 * static_cast<double>(m.heads) * (dec * n * n);
  const double maps = static_cast<double>(p.sequences) * per_input;
  const double ff = m.attn_only ? 0.0 : static_cast<double>(m.d_ff);
  const double icl = 4 * static_cast<double>(p.icl_windows) *
                     static_cast<double>(c.data.block_size) *
                     (dec * (16 * static_cast<double>(m.d_model) + 3 * ff) + 5 * tv);
  return probe_estimate(
      c, maps,
      {icl, "probe.icl_windows",
       fmt::format(", and {} in-context-learning windows of {} tokens in one pass", p.icl_windows,
                   c.data.block_size)});
}

// A character text (data.task = "lm") samples with its saved vocabulary alone; a SentencePiece
// one loads its tokenizer through the data, and a generated stream (repeat) its symbols.
bool LanguageModelFamily::needs_data(const config::RunConfig& c) const {
  return c.data.task != data::TaskKind::lm || c.data.tokenizer != data::TokenizerKind::chars;
}

// A step reads batch_size windows of block_size tokens, grad_accum times.
DataPlan LanguageModelFamily::data_plan(const TrainingRun& r) const {
  const config::RunConfig& c = r.config;
  DataPlan p;
  p.size_key = "train_tokens";
  p.size = static_cast<int64_t>(r.data.lm_train.size());
  p.size_line = fmt::format("training text    {} tokens", p.size);
  p.target_tokens = static_cast<double>(c.data.batch_size * c.data.block_size * c.train.grad_accum);
  p.tokens_line =
      fmt::format("tokens per step  {} (batch_size x block_size)", fixed(p.target_tokens, 0));
  return p;
}

Inspection LanguageModelFamily::inspect(const nn::Model& model, const config::RunConfig& c,
                                        const data::DataSplits& d, const data::Ids& ids) const {
  QKV_CHECK(!ids.empty(), "attention", "the text is empty");
  QKV_CHECK(static_cast<int64_t>(ids.size()) <= max_input_tokens(c, model), "attention",
            "the text has ", ids.size(), " tokens, more than the model's context of ",
            max_input_tokens(c, model));
  cancellation_point();  // one pass: the probe's pattern scores run one per input
  Inspection a;
  a.input = a.tgt_in = a.tgt_out = ids;  // each query is a token of the text
  nn::Hooks patterns = pattern_capture();
  {
    const nn::HookScope scope(patterns);
    a.logits = nn::model_as<nn::DecoderLM>(model, "attention")
                   .forward(row_of(ids))
                   .data()
                   .select(0, 0);  // (T, V)
  }
  a.output = to_vector<int64_t>(argmax(a.logits, -1));
  const auto t = token_labels(ids, d.tgt_vocab);
  a.views = views_of(model, patterns, {t, t, t});
  return a;
}

void LanguageModelFamily::describe(const config::RunConfig& c, nlohmann::json& facts) const {
  facts["model"] = c.model.attn_only ? "attention-only decoder-only language model"
                                     : "decoder-only language model";
  facts["decoder_layers"] = c.model.decoder_layers;
  write_capabilities(facts);
  facts["block_size"] = c.data.block_size;
}

}  // namespace qkv::run
