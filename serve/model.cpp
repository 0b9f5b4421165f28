// A loaded checkpoint answering the server's questions (see model.hpp): the adapter over run/.
#include "serve/model.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numeric>
#include <optional>

#include "config/config.hpp"
#include "core/cancel.hpp"
#include "core/error.hpp"
#include "data/lm.hpp"
#include "inspect/attribution.hpp"
#include "inspect/head_table.hpp"
#include "inspect/heads.hpp"
#include "inspect/lens.hpp"
#include "inspect/site_json.hpp"
#include "inspect/work.hpp"
#include "run/family.hpp"
#include "run/inference.hpp"

namespace fs = std::filesystem;
using nlohmann::json;

namespace qkv::serve {

struct Model::Impl {
  std::unique_ptr<run::Inference> inf;
  // The model's attentions, listed once at load: the heads of an "ablate" are checked against
  // them.
  std::vector<inspect::Attention> attentions;
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

// The text's ids, as the run reads input, within the model's positions and the server's limit.
data::Ids encode(const run::Inference& inf, const std::string& text, const Limits& lim) {
  check_text(text, lim, "the text");
  const data::Ids ids = as_bad_input([&] { return inf.encode(text, "text"); });
  if (static_cast<int64_t>(ids.size()) > lim.max_input_tokens)
    throw BadInput(cat("the text has ", ids.size(), " tokens, more than the server's limit of ",
                       lim.max_input_tokens));
  return ids;
}

// The heads an "ablate" names (empty: none), checked against the model's attentions without
// installing anything; an unknown head is a BadInput naming op, as `qkv OP --ablate` says it.
std::vector<inspect::HeadRef> heads_named(const std::vector<inspect::Attention>& attentions,
                                          const std::string& spec, const char* op) {
  if (spec.empty()) return {};
  const std::string where = std::string(op) + " --ablate";
  return as_bad_input([&] { return inspect::parse_heads(spec, attentions, where.c_str()); });
}

// One question's ablation: the heads zero-ablated in this question's calls only (a HookScope on
// the request thread: nn/hooks.hpp, which the Inference's calls honour), so that the questions
// answered at once on other threads each keep their own (or none). As inspect::Ablation installs
// them: no heads install nothing (the same bits as without).
class Ablation {
 public:
  Ablation(const std::vector<inspect::Attention>& attentions, const std::string& spec,
           const char* op)
      : heads_(heads_named(attentions, spec, op)) {
    if (heads_.empty()) return;
    inspect::add_zero_ablation(hooks_, heads_);
    scope_.emplace(hooks_);
  }
  Ablation(const Ablation&) = delete;
  Ablation& operator=(const Ablation&) = delete;

 private:
  std::vector<inspect::HeadRef> heads_;
  nn::Hooks hooks_;                     // the replacements this question's calls run under
  std::optional<nn::HookScope> scope_;  // ends before hooks_
};

// A line of output as the page shows it: a line break as \n keeps it on one line.
std::string one_line(const std::string& text) {
  std::string shown;
  for (const char c : text) shown += c == '\n' ? std::string("\\n") : std::string(1, c);
  return shown;
}

// A map of the weights (h, n, m) of one layer as h row-major n x m lists of numbers.
json heads_of(const Tensor& w) {
  const Tensor t = w.to(DType::f64).contiguous();  // (h, n, m)
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

void check_k(int64_t k, const Limits& lim, bool zero_allowed) {
  if ((k < 1 && !(zero_allowed && k == 0)) || k > lim.max_top_k)
    throw BadInput(cat("k must be in ", zero_allowed ? 0 : 1, "..", lim.max_top_k, ", got ", k));
}

// The top-k next tokens at each position of an inspection's pass:
// [{"at": label, "top":[{"token","p"}...]}...]
json steps_json(const run::Inference& inf, const run::Inspection& a, int64_t k) {
  json steps = json::array();
  for (const run::NextTokens& n : inf.next_tokens(a, k)) {
    json top = json::array();
    for (const auto& [token, p] : n.top) top.push_back({{"token", token}, {"p", p}});
    steps.push_back({{"at", n.at}, {"top", std::move(top)}});
  }
  return steps;
}

// A sample request's options and prompt ids, checked as `qkv generate` checks them; the
// ablation is not (see check_sample). Reads only the run's vocabulary: needs no hold.
data::Ids sample_prompt(const run::Inference& inf, const SampleRequest& q, const Limits& lim) {
  as_bad_input([&] {
    inf.require(run::Capability::generate, "generate");
    return 0;
  });
  if (q.tokens < 1 || q.tokens > lim.max_new_tokens)
    throw BadInput(cat("tokens must be in 1..", lim.max_new_tokens, ", got ", q.tokens));
  as_bad_input([&] { run::validate(run::SampleOptions{q.temperature, q.top_k, q.top_p}); });
  return encode(inf, q.prompt, lim);
}

}  // namespace

Model::Model(const std::string& run_dir, const std::string& which,
             std::optional<Precision> precision)
    : impl_(new Impl) {
  impl_->inf = run::open_inference(
      run_dir, {.checkpoint = which, .precision = precision, .threads = -1, .op = "serve"});
  checkpoint_ = fs::path(impl_->inf->run().checkpoint).filename().string();
  impl_->attentions = inspect::attentions_of(*impl_->inf);
}

Model::~Model() = default;

json Model::translate(const std::string& text, int64_t beam, const Limits& lim,
                      const std::string& ablate) {
  const run::Inference& inf = *impl_->inf;
  if (beam < 1 || beam > lim.max_beam)
    throw BadInput(cat("beam must be in 1..", lim.max_beam, ", got ", beam));
  const Ablation held(impl_->attentions, ablate, "translate");
  as_bad_input([&] {
    inf.require(run::Capability::decode, "translate");
    return 0;
  });
  const data::Ids src = encode(inf, text, lim);
  const data::Ids greedy = as_bad_input([&] { return inf.decode({src}, {})[0]; });
  const data::Ids beamed = beam == 1 ? greedy : inf.decode({src}, {.beam = beam})[0];
  return {{"source_tokens", inf.input_labels(src)},
          {"greedy", inf.text(greedy)},
          {"beam", inf.text(beamed)},
          {"beam_size", beam}};
}

json Model::classify(const std::string& text, const Limits& lim, const std::string& ablate) {
  const run::Inference& inf = *impl_->inf;
  const Ablation held(impl_->attentions, ablate, "classify");
  as_bad_input([&] {
    inf.require(run::Capability::classify, "classify");
    return 0;
  });
  const data::Ids ids = encode(inf, text, lim);
  const run::Classification c = as_bad_input([&] { return inf.classify({ids})[0]; });
  json classes = json::array();
  for (size_t k = 0; k < c.classes.size(); ++k)
    classes.push_back({{"class", c.classes[k]}, {"p", c.probabilities[k]}});
  return {{"tokens", inf.input_labels(ids)},
          {"predicted", c.classes[static_cast<size_t>(c.predicted)]},
          {"classes", classes}};
}

void Model::check_sample(const SampleRequest& q, const Limits& lim) const {
  heads_named(impl_->attentions, q.ablate, "generate");  // an unknown head first, as before
  sample_prompt(*impl_->inf, q, lim);
}

void Model::generate(const SampleRequest& q, const Limits& lim,
                     const std::function<bool(const std::string&)>& on_text) {
  const Ablation held(impl_->attentions, q.ablate, "generate");
  const run::Inference& inf = *impl_->inf;
  const data::Ids prompt = sample_prompt(inf, q, lim);
  const run::LoadedRun& r = inf.run();
  data::LmDetokenizer text(r.data.tgt_vocab, r.data.tgt_spm != nullptr, q.prompt.back() == '\n');
  Generator gen(q.seed);
  as_bad_input([&] {
    inf.generate(prompt, q.tokens, run::SampleOptions{q.temperature, q.top_k, q.top_p}, gen, true,
                 [&](int64_t id) {
                   // unwinds out of generate: the call's scopes restore what they changed
                   if (!on_text(text.next(id))) throw Cancelled("the client closed the connection");
                 });
    return 0;
  });
}

json Model::attention(const std::string& text, const Limits& lim, const std::string& ablate,
                      int64_t k) {
  check_k(k, lim, true);
  const Ablation held(impl_->attentions, ablate, "attention");
  const run::Inference& inf = *impl_->inf;
  const data::Ids src = encode(inf, text, lim);
  const run::Inspection a = as_bad_input([&] { return inf.inspect(src); });
  json out{{"output", one_line(inf.text(a.output))}, {"kinds", json::array()}};
  if (k > 0) out["steps"] = steps_json(inf, a, k);
  for (const run::AttentionView& v : a.views) {
    json k{{"kind", v.site.key},
           {"title", v.site.title},
           {"site", inspect::site_json(v.site)},
           {"rows", v.rows},
           {"cols", v.cols}};
    k["layers"] = json::array();
    for (const Tensor& w : v.layers) k["layers"].push_back(heads_of(w));
    out["kinds"].push_back(std::move(k));
  }
  return out;
}

json Model::next_tokens(const std::string& text, int64_t k, const Limits& lim,
                        const std::string& ablate) {
  check_k(k, lim, false);
  const Ablation held(impl_->attentions, ablate, "next");
  const run::Inference& inf = *impl_->inf;
  const data::Ids src = encode(inf, text, lim);
  const run::Inspection a = as_bad_input([&] { return inf.inspect(src); });
  return {{"steps", steps_json(inf, a, k)}};
}

json Model::heads(const HeadsRequest& r, const Limits& lim, const std::string& ablate) {
  if (r.batches != kAsManyAsFit && (r.batches < 1 || r.batches > lim.max_head_batches))
    throw BadInput(cat("batches must be in 1..", lim.max_head_batches, ", got ", r.batches));
  if (r.probes < 1 || r.probes > lim.max_probes)
    throw BadInput(cat("probes must be in 1..", lim.max_probes, ", got ", r.probes));
  const Ablation held(impl_->attentions, ablate, "heads");
  const run::Inference& inf = *impl_->inf;
  return as_bad_input([&] {
    inspect::HeadTableOptions o{.split = r.split, .probes = r.probes, .seed = r.seed};
    // the work of the whole table within the server's bound, before any pass runs
    o.max_batches = inspect::head_table_batches(
        inf, o, r.batches, lim.max_head_work, "heads",
        "the server's limit; ask for fewer batches or probes, or use qkv heads");
    return inspect::head_table_json(inspect::head_table(inf, o));
  });
}

json Model::lens(const LensRequest& r, const Limits& lim, const std::string& ablate) {
  if (r.top < 1 || r.top > lim.max_top_k)
    throw BadInput(cat("top must be in 1..", lim.max_top_k, ", got ", r.top));
  const Ablation held(impl_->attentions, ablate, "lens");
  const run::Inference& inf = *impl_->inf;
  const data::Ids input = encode(inf, r.text, lim);
  return as_bad_input([&] {
    const inspect::Lens lens = inspect::logit_lens(inf, input, r.top);
    if (r.target.empty()) return inspect::lens_json(lens);
    // The attribution's own failure (a target that is no output token, a model it does not
    // apply to) still answers the lens, with the reason beside it: the page shows both from
    // this one pass instead of asking again.
    try {
      const inspect::Attribution parts = inspect::direct_logit_attribution(
          inf, input, inspect::output_token_id(inf, r.target, "lens target"));
      return inspect::lens_json(lens, &parts);
    } catch (const Error& e) {
      json out = inspect::lens_json(lens);
      out["attribution_error"] = e.what();
      return out;
    }
  });
}

json Model::ask(const std::string& ablate, const char* op,
                const std::function<json(const run::Inference&)>& f) {
  const Ablation held(impl_->attentions, ablate, op);
  return as_bad_input([&] { return f(*impl_->inf); });
}

data::Ids encode_input(const run::Inference& inf, const std::string& text, const Limits& lim) {
  return encode(inf, text, lim);
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
  json f{{"task", std::string(name_of(c.data.task))},
         {"d_model", c.model.d_model},
         {"heads", c.model.heads},
         {"position", std::string(name_of(c.model.position))},
         {"optimizer", std::string(name_of(c.optim.optim.name))},
         {"lr", c.optim.optim.lr},
         {"batch_size", c.data.batch_size},
         {"seed", c.seed}};
  // An attention-only model has no MLP: its config's d_ff is unused, so not shown as a size.
  f["d_ff"] = c.model.attn_only ? json("attention-only") : json(c.model.d_ff);
  const run::Family& family = run::family_for(c.data.task);
  family.describe(c, f);
  f["sites"] = inspect::sites_json(family.attention_sites(c.model));  // without its weights
  if (c.train.max_steps > 0)
    f["max_steps"] = c.train.max_steps;
  else
    f["epochs"] = c.train.epochs;
  return f;
}

}  // namespace qkv::serve
