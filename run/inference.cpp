// The inference interface's shared half: the scope, the calls, opening a run, next-token lists.
#include "run/inference.hpp"

#include <fmt/format.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "core/cancel.hpp"
#include "run/family.hpp"
#include "run/limits.hpp"

namespace qkv::run {

Inference::Inference(LoadedRun run, Precision p) : run_(std::move(run)), precision_(p) {
  run_.model->eval();
}

std::unique_ptr<Inference::Call> Inference::call(bool record, nn::Hooks* hooks) const {
  cancellation_point();
  std::unique_lock<std::recursive_mutex> tape(tape_mu_, std::defer_lock);
  // Waiting for another recording pass is a wait a cancelled request must not sit out. (Not
  // try_lock_for: GCC 12's ThreadSanitizer does not see the pthread_mutex_clocklock under it.)
  while (record && !tape.try_lock()) {
    cancellation_point();
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return std::unique_ptr<Call>(
      new Call{std::move(tape), nn::InferenceScope(*run_.model, precision_, hooks, record)});
}

std::vector<Metric> loss_metrics(double loss, const std::string& per) {
  return {{.key = "loss", .label = "loss", .value = loss},
          {.key = "perplexity",
           .label = "perplexity",
           .value = perplexity(loss),
           .note = "(per " + per + ")"}};
}

std::string fixed(double value, int decimals) {
  char out[64];
  std::snprintf(out, sizeof out, "%.*f", decimals, value);
  return out;
}

std::string metric_line(const Metric& m) {
  return fmt::format("{:<16}{}{}", m.label, fixed(m.value, m.decimals),
                     m.note.empty() ? "" : " " + m.note);
}

nlohmann::json scores_json(const Scores& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const Metric& m : s.metrics) j[m.key] = m.value;
  for (const auto& [key, value] : s.json.items()) j[key] = value;
  return j;
}

int64_t Inference::max_input_tokens() const {
  return run_.family().max_input_tokens(run_.config, *run_.model);
}

int64_t Inference::max_output_tokens(int64_t n) const {
  return run_.family().max_output_tokens(run_.config, n);
}

int64_t Inference::inspection_tokens(int64_t n) const {
  return run_.family().inspection_tokens(run_.config, n);
}

std::vector<Capability> Inference::capabilities() const { return run_.family().capabilities(); }

// A split regenerated at other lengths (copy, reverse, sort) with the run's seeds, so only the
// lengths change.
namespace {

// Refuses, naming --max-len, a regenerated split this machine cannot hold or evaluate: its
// examples (every split is regenerated, as training made them) and one batch's activations at
// that length, estimated as training's (run/limits.hpp), which bounds evaluation's from above.
void check_regenerated_memory(const LoadedRun& r, int64_t max_len) {
  config::RunConfig c = r.config;
  c.data.max_len = max_len;
  const double examples =
      static_cast<double>(c.data.train_size + c.data.valid_size + c.data.test_size);
  const double data_bytes = examples * (96 + 2 * 8 * (static_cast<double>(max_len) + 2));
  const MemoryEstimate m =
      estimate_model_memory(c, r.data.src_vocab.size(), r.data.tgt_vocab.size());
  require_memory("eval --max-len", data_bytes + m.bytes,
                 cat("regenerating ", static_cast<int64_t>(examples), " examples of up to ",
                     max_len, " symbols and scoring batches of ", c.data.batch_size, " of them"));
}

}  // namespace

data::DataSplits regenerated(const LoadedRun& r, int64_t min_len, int64_t max_len) {
  data::DataConfig c = r.config.data;
  if (!data::has_length_range(c.task)) {  // annotated_copy is synthetic too, of one fixed length
    std::string can;
    for (const auto& t : data::kTaskNames)
      if (data::has_length_range(t.value)) can += (can.empty() ? "" : ", ") + std::string(t.name);
    throw Error("eval --max-len: data.task = '" + std::string(name_of(c.task)) +
                "' cannot be regenerated at other lengths (only " + can + ")");
  }
  QKV_CHECK(min_len <= max_len, "eval", "--min-len ", min_len, " is above --max-len ", max_len);
  check_regenerated_memory(r, max_len);
  c.min_len = min_len;
  c.max_len = max_len;
  return data::load_data(c);
}

// "500 examples" and, for a split regenerated at other lengths, ", lengths 1..14".
std::string examples_summary(int64_t examples, int64_t min_len, int64_t max_len) {
  std::string s = ", " + std::to_string(examples) + " examples";
  if (max_len > 0) s += ", lengths " + std::to_string(min_len) + ".." + std::to_string(max_len);
  return s;
}

bool Inference::can(Capability c) const {
  const std::vector<Capability> all = capabilities();
  return std::find(all.begin(), all.end(), c) != all.end();
}

void Inference::require(Capability c, const char* op) const {
  if (can(c)) return;
  std::string instead;
  for (const Capability other : capabilities())
    instead += cat(instead.empty() ? "" : " or ", "qkv ", command_of(other));
  QKV_CHECK(false, op, run_.dir, " cannot ", command_of(c), " (model.kind = \"",
            name_of(run_.config.model.kind), "\")",
            instead.empty() ? std::string("") : cat(": use ", instead));
}

// The calls the run's family answers (Family's calls over a loaded run), each in its words.
data::Ids Inference::encode(const std::string& text, const char* op) const {
  return family().encode(*this, text, op);
}
std::string Inference::text(const data::Ids& ids) const { return family().text(*this, ids); }
std::vector<std::string> Inference::input_labels(const data::Ids& ids) const {
  return family().input_labels(*this, ids);
}
std::vector<std::string> Inference::output_labels(const data::Ids& ids) const {
  return family().output_labels(*this, ids);
}
std::string Inference::output_name() const { return family().output_name(*this); }

std::vector<data::Ids> Inference::decode(const std::vector<data::Ids>& inputs,
                                         const DecodeOptions& o) const {
  require(Capability::decode, "translate");
  return family().decode(*this, inputs, o);
}

void Inference::generate(const data::Ids& prompt, int64_t n, const SampleOptions& o, Generator& gen,
                         bool cached, const std::function<void(int64_t)>& on_token) const {
  require(Capability::generate, "generate");
  family().generate(*this, prompt, n, o, gen, cached, on_token);
}

std::vector<Classification> Inference::classify(const std::vector<data::Ids>& inputs) const {
  require(Capability::classify, "classify");
  return family().classify(*this, inputs);
}

Scores Inference::score(const ScoreOptions& o) const { return family().score(*this, o); }

Inspection Inference::inspect(const data::Ids& input) const {
  const auto c = call();
  return family().inspect(*run_.model, run_.config, run_.data, input);
}

void Inference::for_each_batch(const PassOptions& o,
                               const std::function<void(const BatchPass&)>& fn) const {
  family().for_each_batch(*this, o, fn);
}

int64_t Inference::pass_tokens(const PassOptions& o) const {
  return family().pass_tokens(*this, o);
}

Tensor Inference::logits(const data::Ids& input, const data::Ids& tgt_in, nn::Hooks* hooks) const {
  return family().logits(*this, input, tgt_in, hooks);
}

Tensor Inference::batch_logits(const Tensor& input, const Tensor& tgt_in, nn::Hooks* hooks,
                               const Tensor& input_valid, const Tensor& tgt_valid) const {
  return family().batch_logits(*this, input, tgt_in, hooks, input_valid, tgt_valid);
}

const data::DataSplits& Inference::full_data(const char* op) const {
  std::lock_guard<std::mutex> lock(data_mu_);
  if (!data_) {
    auto d = std::make_shared<data::DataSplits>(data::load_data(run_.config.data));
    QKV_CHECK(d->tgt_vocab == run_.data.tgt_vocab, op, run_.dir,
              ": the text's vocabulary differs from the run's; the data changed since training");
    data_ = std::move(d);
  }
  return *data_;
}

const AttentionView* Inspection::view(const std::string& hook) const {
  for (const AttentionView& v : views)
    if (v.hook == hook) return &v;
  return nullptr;
}

nn::Hooks pattern_capture() {
  nn::Hooks h;
  h.capture = nn::names_matching({"*.pattern"});
  return h;
}

Tensor row_of(const data::Ids& ids) {
  return from_vector<int64_t>(ids, {1, static_cast<int64_t>(ids.size())});
}

nlohmann::json classification_json(const std::string& input, const std::vector<std::string>& tokens,
                                   const Classification& c) {
  nlohmann::json classes = nlohmann::json::array();
  for (size_t k = 0; k < c.classes.size(); ++k)
    classes.push_back({{"class", c.classes[k]}, {"p", c.probabilities[k]}});
  return {{"input", input},
          {"tokens", tokens},
          {"predicted", c.classes[static_cast<size_t>(c.predicted)]},
          {"classes", classes}};
}

void check_batch_ids(const Tensor& ids, int64_t max_len, const char* what) {
  QKV_CHECK(ids.defined(), "forward", "no ", what);
  QKV_CHECK(ids.dim() == 2 && ids.dtype() == DType::i64, "forward", what,
            " must be (batch, positions) int64 ids, got ", dtype_name(ids.dtype()), " ",
            ids.shape());
  QKV_CHECK(ids.size(0) >= 1 && ids.size(1) >= 1, "forward", "the ", what, " ", ids.shape(),
            " is empty");
  QKV_CHECK(ids.size(1) <= max_len, "forward", "the ", what, " has ", ids.size(1),
            " positions; the model reads 1 to ", max_len);
}

Tensor all_real(const Tensor& ids) { return ones({ids.size(0), ids.size(1)}, DType::b8); }

void check_batch_valid(const Tensor& valid, const Tensor& ids, const char* what) {
  if (!valid.defined()) return;
  QKV_CHECK(valid.dtype() == DType::b8 && valid.shape() == ids.shape(), "forward", "the ", what,
            "'s mask must be bool ", ids.shape(), " like its ids, got ", dtype_name(valid.dtype()),
            " ", valid.shape());
  const Tensor v = valid.contiguous();
  const uint8_t* p = v.data<uint8_t>();
  for (int64_t b = 0; b < v.size(0); ++b) {
    bool any = false;
    for (int64_t i = 0; i < v.size(1) && !any; ++i) any = p[b * v.size(1) + i] != 0;
    QKV_CHECK(any, "forward", "row ", b, " of the ", what, " has no real position");
  }
}

Tensor valid_or_all(const Tensor& valid, const Tensor& ids) {
  return valid.defined() ? valid.contiguous() : all_real(ids);
}

std::vector<std::string> token_labels(const data::Ids& ids, const data::Vocab& v) {
  std::vector<std::string> t;
  for (int64_t id : ids) {
    const std::string& piece = v.token(id);
    if (piece == " " || piece == "\n") {  // a character model's blank characters, made visible
      t.push_back(piece == " " ? "_" : "\\n");
      continue;
    }
    std::string label;
    for (size_t i = 0; i < piece.size(); ++i) {
      if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
        label += '_';
        i += 2;
      } else {
        label += piece[i];
      }
    }
    t.push_back(std::move(label));
  }
  return t;
}

std::vector<AttentionView> views_of(const nn::Model& model, const nn::Hooks& captured,
                                    const PassLabels& labels) {
  std::vector<AttentionView> out;
  for (const nn::AttentionSite& site : model.attention_sites()) {
    const bool input_queries = site.queries == nn::Side::input;
    AttentionView v{site,
                    site.hook() + ".pattern",
                    input_queries ? labels.input : labels.output_queries,
                    site.keys == nn::Side::input ? labels.input : labels.output_keys,
                    {}};
    for (int64_t l = 0; l < site.layers; ++l) {
      const auto it = captured.cache.find(site.pattern(l));
      QKV_CHECK(it != captured.cache.end(), "attention", "no pattern at ", site.pattern(l));
      v.layers.push_back(it->second.data().select(0, 0));  // (h, n, m)
    }
    out.push_back(std::move(v));
  }
  return out;
}

std::string Inference::default_map_kind() const {
  const std::vector<nn::AttentionSite> sites = model().attention_sites();
  return sites.empty() ? "" : sites.back().name;  // none: the command says the model has none
}

std::vector<NextTokens> Inference::next_tokens(const Inspection& in, int64_t k) const {
  const Tensor logits = in.logits.to(DType::f64).contiguous();  // (T, V)
  const int64_t T = logits.size(0), V = logits.size(1), kk = std::min(k, V);
  const std::vector<double> lv = to_vector<double>(logits);
  const std::vector<std::string> at = output_labels(in.tgt_in);
  std::vector<NextTokens> steps;
  for (int64_t t = 0; t < T; ++t) {
    const double* row = lv.data() + t * V;
    const double mx = *std::max_element(row, row + V);
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(row[v] - mx);
    std::vector<int64_t> order(static_cast<size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + kk, order.end(), [&](int64_t x, int64_t y) {
      return row[x] > row[y] || (row[x] == row[y] && x < y);
    });
    NextTokens n{at[static_cast<size_t>(t)], {}};
    for (int64_t i = 0; i < kk; ++i)
      n.top.emplace_back(output_labels({order[static_cast<size_t>(i)]})[0],
                         std::exp(row[order[static_cast<size_t>(i)]] - mx) / z);
    steps.push_back(std::move(n));
  }
  return steps;
}

std::unique_ptr<Inference> open_inference(const std::string& run_dir, const OpenOptions& o) {
  LoadedRun r = load_run(run_dir, o.checkpoint);
  if (o.threads >= 0)
    apply_threads(o.threads > 0 ? o.threads : r.config.threads,
                  o.threads > 0 ? "--threads" : "threads");
  const Precision p = choose_precision(o.precision, r.config.precision, "precision");
  auto inf = std::make_unique<Inference>(std::move(r), p);
  inf->set_max_input(o.max_input);
  return inf;
}

}  // namespace qkv::run
