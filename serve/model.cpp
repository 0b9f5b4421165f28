// A loaded checkpoint answering the server's questions (see model.hpp): the adapter over run/.
#include "serve/model.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "config/config.hpp"
#include "core/error.hpp"
#include "data/lm.hpp"
#include "run/lm.hpp"
#include "run/run.hpp"
#include "serve/inspect.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace qkv::serve {

struct Model::Impl {
  run::LoadedRun run;
  std::string folder;  // the run folder's name, for messages
};

namespace {

// Runs f, turning the library's input errors (qkv::Error: unknown symbol, empty input...) into
// BadInput, which the server answers with a 400.
template <class F>
auto as_bad_input(F&& f) {
  try {
    return f();
  } catch (const Error& e) {
    throw BadInput(e.what());
  }
}

void check_text(const std::string& text, const Limits& lim, const char* what) {
  if (text.empty()) throw BadInput(cat(what, " is empty"));
  if (static_cast<int64_t>(text.size()) > lim.max_text_bytes)
    throw BadInput(
        cat(what, " has ", text.size(), " bytes, more than the limit of ", lim.max_text_bytes));
}

// The longest input the model can read: a language model's context; a Seq2Seq source bounded
// by the limit and, with learned positions, by model.max_len.
int64_t max_input_tokens(const run::LoadedRun& r, const Limits& lim) {
  if (r.task().language_model())
    return std::min(r.config.data.block_size, r.lm("context").max_positions());
  int64_t n = lim.max_source_tokens;
  if (r.config.model.position == nn::PositionKind::learned) n = std::min(n, r.config.model.max_len);
  return n;
}

data::Ids encode(const run::LoadedRun& r, const std::string& folder, const std::string& text,
                 const Limits& lim) {
  check_text(text, lim, "the text");
  const data::Ids ids = as_bad_input([&] {
    return r.task().language_model()
               ? data::encode_lm_text(text, r.data.tgt_vocab, r.data.tgt_spm.get(), "text")
               : run::encode_source(r, text, folder, "text");
  });
  if (ids.empty()) throw BadInput("the text is empty");
  const int64_t most = max_input_tokens(r, lim);
  if (static_cast<int64_t>(ids.size()) > most)
    throw BadInput(cat("the text has ", ids.size(), " tokens, more than the model's ", most,
                       r.task().language_model() ? " positions of context" : " source positions"));
  return ids;
}

// A map of the weights (1, h, n, m) of one layer as h row-major n x m lists of numbers.
json heads_of(const ag::Var& w) {
  const Tensor t = w.data().to(DType::f64).select(0, 0).contiguous();  // (h, n, m)
  const std::vector<double> v = to_vector<double>(t);
  const int64_t h = t.size(0), nm = t.size(1) * t.size(2);
  json heads = json::array();
  for (int64_t i = 0; i < h; ++i) {
    json cells = json::array();
    for (int64_t j = 0; j < nm; ++j) cells.push_back(std::round(v[i * nm + j] * 1e5) / 1e5);
    heads.push_back(std::move(cells));
  }
  return heads;
}

json kind_of(const std::string& kind, const std::string& title,
             const std::vector<std::string>& rows, const std::vector<std::string>& cols,
             const std::vector<ag::Var>& layers) {
  json k{{"kind", kind}, {"title", title}, {"rows", rows}, {"cols", cols}};
  k["layers"] = json::array();
  for (const ag::Var& w : layers) k["layers"].push_back(heads_of(w));
  return k;
}

}  // namespace

Model::Model(const std::string& run_dir, const std::string& which) : impl_(new Impl) {
  impl_->run = run::load_run(run_dir, which);
  impl_->folder = fs::path(run_dir).filename().string();
  checkpoint_ = fs::path(impl_->run.checkpoint).filename().string();
}

Model::~Model() = default;

bool Model::language_model() const { return impl_->run.task().language_model(); }

json Model::translate(const std::string& text, int64_t beam, const Limits& lim) {
  const run::LoadedRun& r = impl_->run;
  if (r.task().language_model())
    throw BadInput("a language model does not translate; use generate");
  if (beam < 1 || beam > lim.max_beam)
    throw BadInput(cat("beam must be in 1..", lim.max_beam, ", got ", beam));
  const data::Ids src = encode(r, impl_->folder, text, lim);
  const int64_t max_len = static_cast<int64_t>(src.size()) + r.config.train.max_decode_extra;
  std::lock_guard<std::mutex> hold(mu_);
  const data::Ids greedy =
      run::greedy_decode(r.seq2seq("translate"), {src}, r.data.framing, {max_len})[0];
  const data::Ids beamed = beam == 1 ? greedy
                                     : run::beam_decode(r.seq2seq("translate"), {src},
                                                        r.data.framing, beam, {max_len})[0];
  return {{"source_tokens", token_labels(src, r.data.src_vocab)},
          {"greedy", target_text(r, greedy)},
          {"beam", target_text(r, beamed)},
          {"beam_size", beam}};
}

void Model::check_sample(const SampleRequest& q, const Limits& lim) {
  const run::LoadedRun& r = impl_->run;
  if (!r.task().language_model()) throw BadInput("not a language model; use translate");
  if (q.tokens < 1 || q.tokens > lim.max_new_tokens)
    throw BadInput(cat("tokens must be in 1..", lim.max_new_tokens, ", got ", q.tokens));
  as_bad_input([&] { run::validate(run::SampleOptions{q.temperature, q.top_k, q.top_p}); });
  encode(r, impl_->folder, q.prompt, lim);
}

void Model::generate(const SampleRequest& q, const Limits& lim,
                     const std::function<bool(const std::string&)>& on_text) {
  check_sample(q, lim);
  const run::LoadedRun& r = impl_->run;
  const data::Ids prompt = encode(r, impl_->folder, q.prompt, lim);
  const int64_t context = max_input_tokens(r, lim);
  data::LmDetokenizer text(r.data.tgt_vocab, r.data.tgt_spm != nullptr, q.prompt.back() == '\n');
  Generator gen(q.seed);
  struct Stopped {};  // the client went away: unwind out of generate
  std::lock_guard<std::mutex> hold(mu_);
  try {
    run::generate(r.lm("generate"), prompt, q.tokens, context,
                  run::SampleOptions{q.temperature, q.top_k, q.top_p}, gen, true, [&](int64_t id) {
                    if (!on_text(text.next(id))) throw Stopped{};
                  });
  } catch (const Stopped&) {  // generate's eval scope restored the training flag
  }
}

json Model::attention(const std::string& text, const Limits& lim) {
  const run::LoadedRun& r = impl_->run;
  const data::Ids src = encode(r, impl_->folder, text, lim);
  AttendedInput a;
  {
    std::lock_guard<std::mutex> hold(mu_);
    a = as_bad_input([&] { return attend(r, src); });
  }
  const auto src_l =
      token_labels(a.src, r.data.src_vocab.size() ? r.data.src_vocab : r.data.tgt_vocab);
  json out{{"output", target_text(r, a.out)}, {"kinds", json::array()}};
  if (r.task().language_model()) {
    const auto t = token_labels(a.src, r.data.tgt_vocab);
    out["kinds"].push_back(kind_of("causal", "causal self-attention", t, t, a.maps.decoder_self));
    return out;
  }
  const auto in = token_labels(a.tgt_in, r.data.tgt_vocab);
  const auto lab = token_labels(a.tgt_out, r.data.tgt_vocab);
  out["kinds"].push_back(
      kind_of("encoder_self", "encoder self-attention", src_l, src_l, a.maps.encoder_self));
  out["kinds"].push_back(
      kind_of("decoder_self", "decoder self-attention", lab, in, a.maps.decoder_self));
  out["kinds"].push_back(kind_of("cross", "cross-attention", lab, src_l, a.maps.decoder_cross));
  return out;
}

json Model::next_tokens(const std::string& text, int64_t k, const Limits& lim) {
  if (k < 1 || k > lim.max_top_k)
    throw BadInput(cat("k must be in 1..", lim.max_top_k, ", got ", k));
  const run::LoadedRun& r = impl_->run;
  const data::Ids src = encode(r, impl_->folder, text, lim);
  AttendedInput a;
  {
    std::lock_guard<std::mutex> hold(mu_);
    a = as_bad_input([&] { return attend(r, src); });
  }
  const Tensor logits = a.logits.to(DType::f64).contiguous();  // (T, V)
  const int64_t T = logits.size(0), V = logits.size(1);
  const std::vector<double> lv = to_vector<double>(logits);
  const auto at = token_labels(a.tgt_in, r.data.tgt_vocab);
  json steps = json::array();
  for (int64_t t = 0; t < T; ++t) {
    const double* row = lv.data() + t * V;
    const double mx = *std::max_element(row, row + V);
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += std::exp(row[v] - mx);
    std::vector<int64_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    const int64_t kk = std::min(k, V);
    std::partial_sort(order.begin(), order.begin() + kk, order.end(),
                      [&](int64_t x, int64_t y) { return row[x] > row[y]; });
    json top = json::array();
    for (int64_t i = 0; i < kk; ++i)
      top.push_back({{"token", token_labels({order[i]}, r.data.tgt_vocab)[0]},
                     {"p", std::exp(row[order[i]] - mx) / z}});
    steps.push_back({{"at", at[t]}, {"top", std::move(top)}});
  }
  return {{"steps", std::move(steps)}, {"language_model", r.task().language_model()}};
}

json list_checkpoints(const std::string& run_dir) {
  json names = json::array();
  const fs::path dir = fs::path(run_dir) / "checkpoints";
  for (const char* link : {"best", "latest"})
    if (fs::exists(dir / link)) names.push_back(link);
  std::vector<std::string> steps;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("step-", 0) == 0 && e.is_directory(ec)) steps.push_back(n);
  }
  std::sort(steps.begin(), steps.end());
  for (auto& s : steps) names.push_back(s);
  return names;
}

std::string resolve_checkpoint_name(const std::string& run_dir, const std::string& which) {
  return fs::path(run::resolve_checkpoint(run_dir, which)).filename().string();
}

json run_facts(const std::string& run_dir) {
  const config::RunConfig c = config::load_config((fs::path(run_dir) / "config.toml").string());
  const bool lm = run::task_of(c.data.task).language_model();
  json f{{"task", std::string(name_of(c.data.task))},
         {"model", lm ? "decoder-only language model" : "encoder-decoder"},
         {"language_model", lm},
         {"d_model", c.model.d_model},
         {"heads", c.model.heads},
         {"d_ff", c.model.d_ff},
         {"decoder_layers", c.model.decoder_layers},
         {"position", std::string(name_of(c.model.position))},
         {"optimizer", std::string(name_of(c.optim.optim.name))},
         {"lr", c.optim.optim.lr},
         {"batch_size", c.data.batch_size},
         {"seed", c.seed}};
  if (!lm) f["encoder_layers"] = c.model.encoder_layers;
  if (lm) f["block_size"] = c.data.block_size;
  if (c.train.max_steps > 0)
    f["max_steps"] = c.train.max_steps;
  else
    f["epochs"] = c.train.epochs;
  return f;
}

}  // namespace qkv::serve
