// The encoder-only family over a loaded run (run/family.hpp's calls of an Inference): classify,
// score a split (loss, accuracy, per-class counts), the pass that shows the encoder's
// self-attention over <cls> + the input.
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "core/cancel.hpp"
#include "data/classify_tasks.hpp"
#include "run/encoder.hpp"

namespace qkv::run {

namespace {

// valid, test or train of d.
const data::Dataset& split_named(const std::string& split, const data::DataSplits& d,
                                 const char* op) {
  QKV_CHECK(split == "valid" || split == "test" || split == "train", op,
            "--split must be valid, test or train, got '", split, "'");
  return split == "valid" ? d.valid : split == "test" ? d.test : d.train;
}

// Batches of the run's batch size over ds, in order (evaluate_classes's), at most max_batches.
std::vector<std::vector<int64_t>> batches_of(const data::Dataset& ds, int64_t batch,
                                             int64_t max_batches) {
  std::vector<std::vector<int64_t>> out;
  for (int64_t at = 0; at < ds.size(); at += batch) {
    if (max_batches > 0 && static_cast<int64_t>(out.size()) == max_batches) break;
    out.emplace_back();
    for (int64_t i = at; i < std::min(ds.size(), at + batch); ++i) out.back().push_back(i);
  }
  return out;
}

// Softmax of one row of logits, in double.
std::vector<double> softmax_row(const double* row, int64_t n) {
  const double mx = *std::max_element(row, row + n);
  std::vector<double> p(static_cast<size_t>(n));
  double z = 0;
  for (int64_t k = 0; k < n; ++k) z += (p[static_cast<size_t>(k)] = std::exp(row[k] - mx));
  for (double& x : p) x /= z;
  return p;
}

}  // namespace

data::Ids EncoderFamily::encode(const Inference& inf, const std::string& text,
                                const char* op) const {
  const data::Vocab& v = inf.run().data.src_vocab;
  data::Ids ids{data::kClsId};
  for (const unsigned char ch : text) {
    if (std::isspace(ch)) continue;
    const std::string s(1, static_cast<char>(ch));
    QKV_CHECK(v.contains(s) && !v.is_special(v.id(s)) && v.id(s) != data::kClsId, op, "'",
              std::isprint(ch) ? s : fmt::format("\\x{:02x}", ch), "' is not a symbol of ",
              name_of(inf.run().config.data.task), " (", inf.run().dir, "/src_vocab.txt)");
    ids.push_back(v.id(s));
  }
  QKV_CHECK(ids.size() > 1, op, "the input has no symbols");
  const auto n = static_cast<int64_t>(ids.size());
  QKV_CHECK(n <= inf.max_input_tokens(), op, "the input has ", n,
            " tokens with <cls>, more than the ", inf.max_input_tokens(),
            " positions the model has (learned positions, model.max_len)");
  QKV_CHECK(n <= inf.max_input(), op, "the input has ", n, " tokens, more than --max-input ",
            inf.max_input());
  return ids;
}

std::string EncoderFamily::text(const Inference& inf, const data::Ids& ids) const {
  std::string out;
  for (const std::string& t : output_labels(inf, ids)) out += (out.empty() ? "" : " ") + t;
  return out;
}

std::string EncoderFamily::output_name(const Inference&) const { return "class"; }

std::vector<std::string> EncoderFamily::input_labels(const Inference& inf,
                                                     const data::Ids& ids) const {
  return token_labels(ids, inf.run().data.src_vocab);
}

// Class ids as names; the read-out (kReadout) as the position it pools.
std::vector<std::string> EncoderFamily::output_labels(const Inference& inf,
                                                      const data::Ids& ids) const {
  std::vector<std::string> out;
  for (const int64_t id : ids)
    out.push_back(id == kReadout
                      ? (inf.run().config.model.pool == nn::Pooling::cls ? data::kCls : "mean")
                      : inf.run().data.tgt_vocab.token(id));
  return out;
}

std::vector<Classification> EncoderFamily::classify(const Inference& inf,
                                                    const std::vector<data::Ids>& inputs) const {
  std::vector<Classification> out;
  const auto c = inf.call();
  for (const data::Ids& ids : inputs) {
    cancellation_point();
    const Tensor logits = nn::model_as<nn::EncoderClassifier>(inf.model(), "classify")
                              .classify(row_of(ids))
                              .data()
                              .to(DType::f64)
                              .contiguous();  // (1, C)
    const std::vector<double> row = to_vector<double>(logits);
    Classification k;
    k.probabilities = softmax_row(row.data(), static_cast<int64_t>(row.size()));
    for (int64_t i = 0; i < static_cast<int64_t>(row.size()); ++i)
      k.classes.push_back(inf.run().data.tgt_vocab.token(i));
    k.predicted = std::max_element(k.probabilities.begin(), k.probabilities.end()) -
                  k.probabilities.begin();  // the first maximum: the lowest id on a tie
    out.push_back(std::move(k));
  }
  return out;
}

Scores EncoderFamily::score(const Inference& inf, const ScoreOptions& o) const {
  QKV_CHECK(o.decode.beam == 1 && !o.lowercase && !o.hypotheses, "eval",
            "--beam, --hyp-out and --lowercase are for text tasks (BLEU), not data.task = ",
            name_of(inf.run().config.data.task));
  QKV_CHECK(o.min_len == 0 || o.max_len > 0, "eval", "--min-len needs --max-len");
  const int64_t lo = o.min_len > 0 ? o.min_len : std::min(inf.run().config.data.min_len, o.max_len);
  const data::DataSplits regen =
      o.max_len > 0 ? regenerated(inf.run(), lo, o.max_len) : data::DataSplits();
  Scores s;
  const data::Dataset& ds = split_named(o.split, o.max_len > 0 ? regen : inf.run().data, "eval");
  const int64_t longest =
      ds.examples.empty()
          ? 0
          : static_cast<int64_t>(std::max_element(ds.examples.begin(), ds.examples.end(),
                                                  [](const auto& a, const auto& b) {
                                                    return a.src.size() < b.src.size();
                                                  })
                                     ->src.size());
  QKV_CHECK(longest <= inf.max_input_tokens(), "eval", ds.name, " has inputs of ", longest,
            " tokens, more than the model's ", inf.max_input_tokens(),
            " positions (learned positions, model.max_len)");
  const auto c = inf.call();
  const ClassMetrics m = evaluate_classes(nn::model_as<nn::EncoderClassifier>(inf.model(), "eval"),
                                          ds, inf.run().data.framing, inf.run().data.tgt_vocab,
                                          inf.run().config.data.batch_size);
  s.summary = examples_summary(m.examples, lo, o.max_len);
  s.metrics = loss_metrics(m.loss, "example");
  s.metrics.push_back({.key = "accuracy", .label = "accuracy", .value = m.accuracy});
  for (const ClassCounts& k : m.classes)  // "class balanced: 463/463 correct, 479 predicted"
    s.notes.push_back(cat("class ", k.name, ": ", k.correct, "/", k.examples, " correct, ",
                          k.predicted, " predicted"));
  s.json["examples"] = m.examples;
  s.json["classes"] = m.counts_json();
  if (o.max_len > 0) s.json["min_len"] = lo, s.json["max_len"] = o.max_len;
  return s;
}

Inspection EncoderFamily::inspect(const nn::Model& model, const config::RunConfig&,
                                  const data::DataSplits& d, const data::Ids& input) const {
  cancellation_point();  // one pass
  // Read as given: Inference::encode puts <cls> first; the probe's inputs (random symbols, or
  // a split's sources) are read as they are, pooled at position 0 all the same.
  QKV_CHECK(!input.empty(), "attention", "an empty input");
  Inspection a;
  a.input = input;
  a.tgt_in = {kReadout};  // one row of logits: the pooled read-out
  nn::Hooks patterns = pattern_capture();
  {
    const nn::HookScope scope(patterns);
    a.logits = nn::model_as<nn::EncoderClassifier>(model, "attention")
                   .classify(row_of(input))
                   .data();  // (1, C)
  }
  a.output = a.tgt_out = to_vector<int64_t>(argmax(a.logits, -1));  // the predicted class
  const auto labels = token_labels(input, d.src_vocab);
  a.views = views_of(model, patterns, {labels, labels, labels});
  return a;
}

void EncoderFamily::for_each_batch(const Inference& inf, const PassOptions& o,
                                   const std::function<void(const BatchPass&)>& fn) const {
  const data::Dataset& ds = split_named(o.split, inf.run().data, "inference");
  QKV_CHECK(ds.size() > 0, "inference", "the ", o.split, " split is empty");
  const int64_t batch = std::max<int64_t>(1, inf.run().config.data.batch_size);
  const auto c = inf.call(o.record, o.hooks);
  for (const std::vector<int64_t>& idx : batches_of(ds, batch, o.max_batches)) {
    cancellation_point();
    const data::Batch b = data::make_batch(ds, idx, inf.run().data.framing);
    const ag::Var logits = inf.model().forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask);  // (B,1,C)
    BatchPass p;
    p.loss = ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}), b.tgt_out.flatten(),
                               -1);  // every class is a label: nothing ignored
    p.tokens = b.size();
    p.input_valid = b.src_mask;
    p.output_valid = b.tgt_mask;  // (B, 1): the read-out
    fn(p);
  }
}

int64_t EncoderFamily::pass_tokens(const Inference& inf, const PassOptions& o) const {
  const data::Dataset& ds = split_named(o.split, inf.run().data, "inference");
  const int64_t batch = std::max<int64_t>(1, inf.run().config.data.batch_size);
  int64_t tokens = 0;
  for (const std::vector<int64_t>& idx : batches_of(ds, batch, o.max_batches)) {
    int64_t longest = 0;
    for (const int64_t i : idx)
      longest =
          std::max(longest, static_cast<int64_t>(ds.examples[static_cast<size_t>(i)].src.size()));
    tokens += static_cast<int64_t>(idx.size()) * (longest + 1);  // the sources and the read-out
  }
  return tokens;
}

Tensor EncoderFamily::logits(const Inference& inf, const data::Ids& input, const data::Ids&,
                             nn::Hooks* hooks) const {
  QKV_CHECK(!input.empty() && static_cast<int64_t>(input.size()) <= inf.max_input_tokens(),
            "logits", "the input has ", input.size(), " tokens; the model reads 1 to ",
            inf.max_input_tokens());
  const auto c = inf.call(false, hooks);
  return nn::model_as<nn::EncoderClassifier>(inf.model(), "logits")
      .classify(row_of(input))
      .data()
      .to(DType::f32);  // (1, C)
}

Tensor EncoderFamily::batch_logits(const Inference& inf, const Tensor& input, const Tensor&,
                                   nn::Hooks* hooks, const Tensor& input_valid,
                                   const Tensor&) const {
  check_batch_ids(input, std::min(inf.max_input_tokens(), inf.max_input()), "input");
  check_batch_valid(input_valid, input, "input");
  const auto c = inf.call(false, hooks);
  const Tensor s = input.contiguous();
  return inf.model()
      .forward(s, Tensor(), valid_or_all(input_valid, s), Tensor())
      .data()
      .to(DType::f32)
      .contiguous();
}

}  // namespace qkv::run
