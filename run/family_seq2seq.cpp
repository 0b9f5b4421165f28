// The sequence-to-sequence family: (source, target) pairs in batches planned by length,
// validated by teacher-forced loss and greedy decodes (BLEU and chrF on text), then tested.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "data/subword_sampling.hpp"
#include "nn/model_sites.hpp"
#include "nn/seq2seq.hpp"
#include "run/decode.hpp"
#include "run/families.hpp"
#include "run/run.hpp"
#include "runfolder/average.hpp"

#include "run/inference.hpp"
#include "run/train_hooks.hpp"
#include "run/train_run.hpp"

namespace qkv::run {

using nlohmann::json;

std::pair<int64_t, std::string> Seq2SeqFamily::positions_needed(const config::RunConfig& c,
                                                                const data::Framing& f,
                                                                const data::Dataset& ds,
                                                                bool decoded) const {
  int64_t need = 0;
  std::string where;
  for (size_t i = 0; i < ds.examples.size(); ++i) {
    const auto& e = ds.examples[i];
    const int64_t src = static_cast<int64_t>(e.src.size()),
                  tgt = static_cast<int64_t>(e.tgt.size());
    int64_t n = std::max(src, f.target_len(tgt));
    if (decoded) n = std::max(n, scored_output_tokens(c, f, src, tgt));
    if (n > need) {
      need = n;
      where = fmt::format("{} example {}", ds.name, i + 1);
    }
  }
  return {need, where};
}

// Learned positions end at model.max_len: refuse data that needs more before the run folder
// exists, rather than failing at the first long batch (or at validation) mid-run. Validation
// and the test decode their examples; training only reads them.
void Seq2SeqFamily::check_positions(const config::RunConfig& cfg, const data::DataSplits& d) const {
  if (cfg.model.position != nn::PositionKind::learned) return;
  std::pair<int64_t, std::string> most{0, ""};
  for (const auto& [ds, decoded] :
       {std::pair{&d.train, false}, std::pair{&d.valid, true}, std::pair{&d.test, true}})
    most = std::max(most, positions_needed(cfg, d.framing, *ds, decoded),
                    [](const auto& a, const auto& b) { return a.first < b.first; });
  QKV_CHECK(most.first <= cfg.model.max_len, "model.max_len", "learned positions cover ",
            cfg.model.max_len, " tokens, but ", most.second, " needs ", most.first,
            " (with <bos>/<eos> and train.max_decode_extra); raise model.max_len or drop long pairs"
            " with data.max_seq_len");
}

void Seq2SeqFamily::check_evaluable(const config::RunConfig& c, const data::Framing& f,
                                    const data::Dataset& ds) const {
  if (c.model.position != nn::PositionKind::learned) return;
  const int64_t need = positions_needed(c, f, ds, true).first;
  if (need > c.model.max_len)
    throw Error("model.max_len: learned positions cover " + std::to_string(c.model.max_len) +
                " tokens, but evaluating " + ds.name + " needs " + std::to_string(need) +
                " (with <eos> and train.max_decode_extra): learned positions cannot go further");
}

namespace {

// data.spm_alpha > 0: each epoch's segmentations drawn afresh; else none (every epoch is d.train).
data::EpochData epoch_data(const config::RunConfig& cfg, const data::DataSplits& d) {
  if (cfg.data.spm_alpha <= 0) return {};
  return data::SubwordSampler(d, cfg.data.spm_alpha, cfg.seed);
}

}  // namespace

std::unique_ptr<data::BatchSource> Seq2SeqFamily::make_loader(const config::RunConfig& cfg,
                                                              const data::DataSplits& d, int rank,
                                                              int ranks) const {
  return examples_loader(cfg, d, rank, ranks, epoch_data(cfg, d));
}

// From the first epoch's plan (a copy of the loader's generator, over the loader's first epoch).
int64_t Seq2SeqFamily::steps_per_epoch(const config::RunConfig& cfg,
                                       const data::DataSplits& d) const {
  const data::EpochData epochs = epoch_data(cfg, d);
  const std::shared_ptr<const data::Dataset> drawn = epochs ? epochs(0) : nullptr;
  return examples_steps_per_epoch(cfg, d, drawn ? *drawn : d.train);
}

std::string Seq2SeqFamily::split_sizes(const data::DataSplits& d) const {
  return examples_split_sizes(d);
}

std::unique_ptr<nn::Model> Seq2SeqFamily::make_model(const nn::ModelConfig& c,
                                                     Generator& gen) const {
  return nn::make_encoder_decoder(c, gen);
}

std::vector<nn::AttentionSite> Seq2SeqFamily::attention_sites(const nn::ModelConfig& c) const {
  return nn::encoder_decoder_sites(c);
}

bool Seq2SeqFamily::validate(RunContext& c, train::TrainState& st) const {
  const config::RunConfig& cfg = c.run.config;
  const Metrics m =
      evaluate(nn::model_as<nn::EncoderDecoder>(*c.run.model, "validate"), c.run.data.valid,
               c.run.data.framing, cfg.data.batch_size, scored_length(cfg, c.run.data.framing),
               cfg.train.eval_examples, is_symbol_task(cfg.data) ? nullptr : &c.run.data);
  json j = {{"step", st.step},
            {"epoch", st.epoch},
            {"split", "valid"},
            {"loss", m.loss},
            {"token_accuracy", m.token_accuracy},
            {"exact_match", m.exact_match},
            {"examples", m.examples}};
  if (m.bleu >= 0) j["bleu"] = m.bleu, j["chrf"] = m.chrf;
  c.metrics.write(j);
  // train.best_metric: the score to beat (higher is better); ties go to the lower loss
  double score = m.exact_match;
  switch (cfg.train.best_metric) {
    case config::BestMetric::bleu:
      score = m.bleu;
      break;
    case config::BestMetric::loss:
      score = -m.loss;
      break;
    case config::BestMetric::exact_match:
      break;
  }
  bool better = score > st.best_score || (score == st.best_score && m.loss < st.best_loss);
  if (st.best.empty()) better = true;  // the first validation (-loss may be below -1)
  if (better) {
    st.best_score = score;
    st.best_loss = m.loss;
    st.evals_since_best = 0;
  } else {
    ++st.evals_since_best;
  }
  c.say(fmt::format(
      "step {} valid: loss {:.4f}  token acc {:.4f}  exact match {:.4f}{}{}", st.step, m.loss,
      m.token_accuracy, m.exact_match,
      m.bleu >= 0 ? fmt::format("  BLEU {:.2f}  chrF {:.2f} (greedy)", m.bleu, m.chrf) : "",
      better ? "  (best)" : ""));
  return better;
}

// The held-out test split with the best checkpoint.
std::string Seq2SeqFamily::final_result(TrainingRun& r, const train::TrainState& st,
                                        MetricsLog& metrics) const {
  const config::RunConfig& cfg = r.config;
  const std::string which = load_final_weights(r);  // the average, else the best
  const Metrics test =
      evaluate(nn::model_as<nn::EncoderDecoder>(*r.model, "test"), r.data.test, r.data.framing,
               cfg.data.batch_size, scored_length(cfg, r.data.framing), 0,
               is_symbol_task(cfg.data) ? nullptr : &r.data);
  json tj = {{"step", st.step},
             {"split", "test"},
             {"loss", test.loss},
             {"token_accuracy", test.token_accuracy},
             {"exact_match", test.exact_match},
             {"examples", test.examples}};
  if (test.bleu >= 0) tj["bleu"] = test.bleu, tj["chrf"] = test.chrf;
  if (cfg.checkpoint.average_last > 0) tj["checkpoint"] = kAverageCheckpoint;
  metrics.write(tj);
  return fmt::format(
      "done: {} steps; test ({} examples, {}): loss {:.4f}  token acc {:.4f}  exact "
      "match {:.4f}{}",
      st.step, test.examples, which, test.loss, test.token_accuracy, test.exact_match,
      test.bleu >= 0 ? fmt::format("  BLEU {:.2f}  chrF {:.2f} (greedy)", test.bleu, test.chrf)
                     : "");
}

const Family& seq2seq_family() {  // the registry's (run/family.cpp)
  static const Seq2SeqFamily family;
  return family;
}

int64_t Seq2SeqFamily::max_input_tokens(const config::RunConfig& c, const nn::Model&) const {
  return c.model.position == nn::PositionKind::learned ? c.model.max_len
                                                       : std::numeric_limits<int64_t>::max();
}

ScoredLength Seq2SeqFamily::scored_length(const config::RunConfig& c,
                                          const data::Framing& f) const {
  return [this, &c, f](int64_t n, int64_t target) { return scored_output_tokens(c, f, n, target); };
}

// A decode stops at <eos> or after the input's length and train.max_decode_extra more.
int64_t Seq2SeqFamily::max_output_tokens(const config::RunConfig& c, int64_t n) const {
  return n + c.train.max_decode_extra;
}

// Exact match: a text task's decodes are its translations (BLEU's too), never looking at the
// reference; a synthetic task's run to the longer side, so a decode that overruns its target is
// seen wrong; without <eos> a decode always runs to its limit, which is then the target's length.
int64_t Seq2SeqFamily::scored_output_tokens(const config::RunConfig& c, const data::Framing& f,
                                            int64_t n, int64_t target) const {
  if (!is_symbol_task(c.data)) return max_output_tokens(c, n);
  if (f.eos < 0) return target;
  return max_output_tokens(c, std::max(n, target));
}

// The probe's 2 L tokens are a source, and their greedy decode (after <bos>) shares the same
// positions: 0 + max_decode_extra is the decode's room beyond its input.
config::ProbeRoom Seq2SeqFamily::probe_room(const config::RunConfig& c,
                                            const nn::Model& model) const {
  return {max_input_tokens(c, model), "model.max_len", max_output_tokens(c, 0)};
}

// The source, and its greedy decode after <bos>.
int64_t Seq2SeqFamily::inspection_tokens(const config::RunConfig& c, int64_t n) const {
  return n + max_output_tokens(c, n) + 1;
}

// Cross-attention's alignment is measured on real pairs: the split's first sources.
std::vector<data::Ids> Seq2SeqFamily::probe_sources(const data::DataSplits& d,
                                                    const std::string& split, int64_t n) const {
  const data::Dataset* ds = split == "train" ? &d.train : split == "test" ? &d.test : &d.valid;
  std::vector<data::Ids> out;
  for (int64_t i = 0; i < std::min<int64_t>(n, ds->size()); ++i)
    out.push_back(ds->examples[static_cast<size_t>(i)].src);
  return out;
}

// Every repeated sequence's inspection keeps its attention maps, every layer's and head's, until
// all are scored: the decoder reads its greedy output of up to 2 L + extra + 1 tokens, and
// alignment reads a second set of inputs; a copy of one map is made while it is scored.
MemoryEstimate Seq2SeqFamily::probe_memory(const config::RunConfig& c, double) const {
  const nn::ModelConfig& m = c.model;
  const double n = 2.0 * static_cast<double>(c.probe.length > 0 ? c.probe.length : 16);
  const double nd = n + static_cast<double>(c.train.max_decode_extra) + 1;
  const double enc = static_cast<double>(m.encoder_layers),
               dec = static_cast<double>(m.decoder_layers);
  const double per_input =
      2 * 4 * static_cast<double>(m.heads) * (enc * n * n + dec * nd * nd + dec * nd * n);
  const double maps = 2 * static_cast<double>(c.probe.sequences) * per_input;
  return probe_estimate(c, maps, {});
}

// A step's mean tokens over an epoch: sources, and targets with <bos>/<eos>.
DataPlan Seq2SeqFamily::data_plan(const TrainingRun& r) const {
  double src = 0, tgt = 0;
  for (const data::Example& e : r.data.train.examples) {
    src += static_cast<double>(e.src.size());
    tgt += static_cast<double>(r.data.framing.target_len(static_cast<int64_t>(e.tgt.size())));
  }
  const double steps = static_cast<double>(std::max<int64_t>(1, r.per_epoch));
  DataPlan p;
  p.size_key = "train_examples";
  p.size = r.data.train.size();
  p.size_line = fmt::format("training split   {} examples", p.size);
  p.source_tokens = src / steps;
  p.target_tokens = tgt / steps;
  p.tokens_line = fmt::format("tokens per step  {} source + {} target (mean over an epoch)",
                              fixed(p.source_tokens, 0), fixed(p.target_tokens, 0));
  return p;
}

Inspection Seq2SeqFamily::inspect(const nn::Model& model, const config::RunConfig& c,
                                  const data::DataSplits& d, const data::Ids& src) const {
  const data::Framing& f = d.framing;
  Inspection a;
  a.input = src;
  // The model's own output (greedy), then one teacher-forced pass over it that keeps every
  // pattern.
  const int64_t n = static_cast<int64_t>(src.size());
  a.output = greedy_decode(nn::model_as<nn::EncoderDecoder>(model, "attention"), {src}, f,
                           {max_output_tokens(c, n)})[0];
  data::Ids full{f.bos};
  full.insert(full.end(), a.output.begin(), a.output.end());
  if (f.eos >= 0) full.push_back(f.eos);
  QKV_CHECK(full.size() >= 2, "attention", "the model produced no output for this input");
  a.tgt_in.assign(full.begin(), full.end() - 1);
  a.tgt_out.assign(full.begin() + 1, full.end());
  const Tensor sv = ones({1, n}, DType::b8);
  const Tensor tv = ones({1, static_cast<int64_t>(a.tgt_in.size())}, DType::b8);
  nn::Hooks patterns = pattern_capture();
  {
    const nn::HookScope scope(patterns);
    a.logits = model.forward(row_of(src), row_of(a.tgt_in), sv, tv).data().select(0, 0);
  }
  a.views = views_of(model, patterns,
                     {token_labels(src, d.src_vocab), token_labels(a.tgt_out, d.tgt_vocab),
                      token_labels(a.tgt_in, d.tgt_vocab)});
  return a;
}

void Seq2SeqFamily::describe(const config::RunConfig& c, nlohmann::json& facts) const {
  facts["model"] = c.model.attn_only ? "attention-only encoder-decoder" : "encoder-decoder";
  facts["decoder_layers"] = c.model.decoder_layers;
  write_capabilities(facts);
  facts["encoder_layers"] = c.model.encoder_layers;
  facts["encoder"] = std::string(name_of(c.model.encoder));
  facts["decoder"] = std::string(name_of(c.model.decoder));
  facts["cross_attention"] = c.model.cross_attention;
}

}  // namespace qkv::run
