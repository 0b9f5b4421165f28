// qkv saturation: the lesson's "why the sqrt(d_k) scaling" as measurements, for a list of d_k
// and for scale = 1/sqrt(d_k) and scale = 1. See docs/lesson.md for what each number is.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "apps/commands.hpp"
#include "config/document.hpp"
#include "core/atomic_file.hpp"
#include "core/parallel.hpp"
#include "core/random.hpp"
#include "figures/attention_stats.hpp"
#include "figures/plot.hpp"
#include "nn/attention.hpp"
#include "nn/hooks.hpp"
#include "run/limits.hpp"
#include "run/run.hpp"
#include "train/seq2seq_step.hpp"
#include "train/trainer.hpp"

namespace qkv::app {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;
using namespace figures;

namespace {

// Rows per chunk so that a chunk's (rows, width) draw stays near 2M elements.
int64_t chunk_rows(int64_t width) {
  return std::max<int64_t>(1, (int64_t{1} << 21) / std::max<int64_t>(1, width));
}

// Sample variance (Bessel) of q.k over n pairs of i.i.d. N(0, 1) vectors of width d; the
// scaled value is this over d (the same draws).
double dot_variance(int64_t d, int64_t n, Generator& g) {
  double sum = 0, sum2 = 0;
  for (int64_t done = 0; done < n;) {
    const int64_t c = std::min(chunk_rows(d), n - done);
    const Tensor q = randn({c, d}, g, DType::f64), k = randn({c, d}, g, DType::f64);
    const Tensor dots = qkv::sum(mul(q, k), {1});
    for (double v : to_vector<double>(dots)) sum += v, sum2 += v * v;
    done += c;
  }
  const double mean = sum / static_cast<double>(n);
  return (sum2 - static_cast<double>(n) * mean * mean) / static_cast<double>(n - 1);
}

// The softmax rows of `rows` queries over m keys, q and k i.i.d. N(0, 1) of width d, at both
// scales (the same draws): stats[0] scaled by 1/sqrt(d), stats[1] unscaled.
std::array<RowStats, 2> softmax_rows(int64_t d, int64_t m, int64_t rows, Generator& g) {
  std::array<RowStats, 2> acc{};
  for (int64_t done = 0; done < rows;) {
    const int64_t c = std::min(chunk_rows(d * (m + 1)), rows - done);
    const Tensor q = randn({c, 1, d}, g, DType::f64), k = randn({c, m, d}, g, DType::f64);
    const Tensor scores = matmul(q, k.transpose(1, 2)).reshape({c, m});  // (c, m)
    for (int s = 0; s < 2; ++s) {
      const RowStats r =
          row_stats(softmax(s == 0 ? mul(scores, nn::AttentionScale().resolve(d)) : scores, 1));
      const double w = static_cast<double>(c);
      acc[s].mean_entropy += r.mean_entropy * w;
      acc[s].mean_max_weight += r.mean_max_weight * w;
      acc[s].saturated_fraction += r.saturated_fraction * w;
      acc[s].jacobian_norm += r.jacobian_norm * w;
    }
    done += c;
  }
  for (RowStats& r : acc) {
    const double n = static_cast<double>(rows);
    r.mean_entropy /= n, r.mean_max_weight /= n, r.saturated_fraction /= n, r.jacobian_norm /= n;
  }
  return acc;
}

// Gradient norms reaching W_Q and W_K of a one-head MultiHeadAttention of width d (Xavier
// init, the same weights at both scales) on x (batch, m, d) ~ N(0, 1), self-attention, for
// the loss mean over tokens of <output, R> with a fixed R ~ N(0, 1).
// Also the gradient reaching the softmax's input (the scaled scores), through the attention
// weights: the Jacobian's share of the story, before the scale multiplies it on to W_Q / W_K.
struct GradNorms {
  double wq, wk, logits;
};
GradNorms mha_grad_norms(int64_t d, int64_t m, int64_t batch, nn::AttentionScale scale,
                         uint64_t seed) {
  Generator g(seed);
  nn::MultiHeadAttention mha(d, 1, g, true, scale);
  mha.to(DType::f64);
  const ag::Var x(randn({batch, m, d}, g, DType::f64));
  const Tensor r = randn({batch, m, d}, g, DType::f64);
  // The weights on the output's graph: its pattern hook point replaced by itself, so the output
  // is weights @ v (nn/hooks.hpp), and captured.
  nn::Hooks hooks;
  hooks.capture = nn::names_matching({"attn.pattern"});
  hooks.add("attn.pattern", [](const ag::Var& w) { return w; });
  ag::Var out;
  {
    const nn::HookScope scope(hooks);
    out = mha.forward(x, x, x);
  }
  const ag::Var weights = hooks.cache.at("attn.pattern");
  const ag::Var loss =
      ag::mul(ag::sum(ag::mul(out, ag::constant(r))), 1.0 / static_cast<double>(batch * m));
  const std::vector<Tensor> grads =
      ag::grad({loss}, {scalar(1.0, DType::f64)}, {mha.w_q->weight, mha.w_k->weight, weights});
  auto norm = [](const Tensor& t) { return std::sqrt(qkv::sum(mul(t, t)).item()); };
  return {norm(grads[0]), norm(grads[1]), norm(softmax_backward(weights.data(), grads[2], -1))};
}

// The copy task at one head of width d_model, scaled or not.
config::RunConfig copy_config(const SaturationArgs& a, bool scaled) {
  std::ostringstream t;
  t << "seed = " << a.seed << "\nthreads = " << a.threads
    << "\n[model]\nd_model = " << a.train_d_model << "\nheads = " << a.train_heads
    << "\nd_ff = " << a.train_d_model
    << "\nencoder_layers = 1\ndecoder_layers = 1\ndropout = 0.0\nattention_scale = "
    << (scaled ? "0.0" : "1.0")
    << "\n[data]\ntask = \"copy\"\nvocab_size = 10\nmin_len = 1\nmax_len = 10\ntrain_size = 5000\n"
       "valid_size = 10\ntest_size = 10\nbatch_size = "
    << a.train_batch
    << "\n[optim]\nname = \"adam\"\nlr = 5e-4\nbetas = [0.9, 0.98]\neps = 1e-9\nschedule = "
       "\"warmup\"\n"
       "warmup = 50\nclip_norm = 1.0\n";
  return config::config_from_toml(config::parse_config(t.str(), "<qkv saturation>"));
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6g", v);
  return b;
}

// The experiment's peak memory, refused before it starts (float64 throughout): the gradient
// norms hold a batch of (keys x keys) attention weights several times over (forward, backward,
// the softmax's own backward) and the layer's weights; the softmax rows a chunk of keys.
void check_saturation_memory(const SaturationArgs& a, const std::vector<int64_t>& dks) {
  const double m = static_cast<double>(a.keys), b = static_cast<double>(a.batch);
  double worst = 0;
  int64_t worst_d = 0;
  for (int64_t dk : dks) {
    const double d = static_cast<double>(dk);
    const double grads = 8 * (5 * b * m * m + 12 * b * m * d + 12 * d * d);
    const double rows = 8 * 3 * std::max(double(1 << 21), (m + 1) * d);
    const double bytes = std::max(grads, rows);
    if (bytes > worst) worst = bytes, worst_d = dk;
  }
  const double d = static_cast<double>(worst_d);
  const double weights = 8 * 5 * b * m * m, widths = 8 * (12 * b * m * d + 12 * d * d);
  const std::string key = weights >= widths ? "--keys" : "--d-k";
  require_memory("saturation " + key, worst,
                 std::to_string(a.keys) + " keys x batch " + std::to_string(a.batch) + " at d_k " +
                     std::to_string(worst_d) + " (float64 attention weights and gradients)");
  if (a.train_steps > 0) {
    config::RunConfig c = copy_config(a, true);
    run::check_model_memory(c, 14, 14);
  }
}

double tail_mean(const std::vector<double>& v, size_t n) {
  n = std::min(n, v.size());
  double s = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
  return n ? s / static_cast<double>(n) : 0.0;
}

double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}

// The loss curve and attention entropy of every step of a short training in memory (no run
// folder): the model, loader, optimizer, schedule and clipping of `qkv train`, through the same
// Trainer step, so the same config trains the same way.
struct Curve {
  std::vector<int64_t> step;    // 1, 2, ..., steps
  std::vector<double> loss;     // training cross-entropy of each step's batch (nats / token)
  std::vector<double> entropy;  // mean attention entropy of that step over all layers and kinds
  std::vector<double> cross_entropy_attention;  // the decoder cross-attention's alone
  double seconds = 0;
};

// Records the curve from each step's attention maps.
class CurveHook : public train::Hook {
 public:
  CurveHook(const train::Seq2SeqStep& fwd, Curve& c) : fwd_(fwd), c_(c) {}
  void on_step_end(train::Trainer&, const train::StepStats& s) override {
    std::vector<double> all, cross;
    for (const train::SitePatterns& s : fwd_.attention_patterns()) {
      const std::vector<double> e = attention_entropy(s.layers);
      all.insert(all.end(), e.begin(), e.end());
      if (s.site.cross()) cross.insert(cross.end(), e.begin(), e.end());
    }
    c_.step.push_back(s.step);
    c_.loss.push_back(s.loss);
    c_.entropy.push_back(mean_of(all));
    c_.cross_entropy_attention.push_back(mean_of(cross));
  }

 private:
  const train::Seq2SeqStep& fwd_;
  Curve& c_;
};

// Trains for `steps` optimizer steps (the cosine schedule, when chosen without a length,
// decays over them). Deterministic for a given config and thread count.
Curve train_curve(const config::RunConfig& cfg_in, int64_t steps) {
  QKV_CHECK(steps > 0, "saturation", "training steps must be > 0, got ", steps);
  config::RunConfig cfg = cfg_in;
  cfg.validate();
  cfg.optim.schedule = optim::fill_schedule(cfg.optim.schedule, 0, steps);
  const auto t0 = std::chrono::steady_clock::now();
  data::DataSplits data = data::load_data(cfg.data);
  Generator init(cfg.seed);
  nn::Seq2Seq model(run::model_config(cfg, data), init);
  auto opt = optim::make_optimizer(cfg.optim.optim, model.named_parameters());
  data::LoaderOptions lopt = data::loader_options(cfg.data);
  lopt.prefetch = 0;
  data::Loader loader(std::make_shared<const data::Dataset>(data.train), data.framing, lopt,
                      cfg.seed);
  train::Seq2SeqStep fwd(model, loader, {0, cfg.train.label_smoothing, true});
  train::TrainerOptions o;
  o.total_steps = steps;
  o.clip_norm = cfg.optim.clip_norm;
  o.clip_value = cfg.optim.clip_value;
  o.schedule = cfg.optim.schedule;
  train::Trainer trainer(model.parameters(), *opt, fwd.forward_fn(), o);
  Curve c;
  CurveHook record(fwd, c);
  trainer.add_hook(record);
  model.train();
  trainer.fit();
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

// The two scales compared: softmax(q.k / sqrt(d_k)) and softmax(q.k).
const char* const kScale[2] = {"1/sqrt(d_k)", "1"};

// Training: the copy task with and without scaling; the curves go into j["training"], a CSV
// and two charts in out.
void train_both_scales(const SaturationArgs& a, const fs::path& out, ojson& j) {
  std::ostringstream tcsv;
  tcsv << "scale,step,loss,attention_entropy,cross_attention_entropy\n";
  LineChart loss_chart{"Copy task, d_model " + std::to_string(a.train_d_model) + ", " +
                           std::to_string(a.train_heads) + " head(s): training loss",
                       "step",
                       "cross-entropy (nats / token)",
                       false,
                       false,
                       {}};
  LineChart ent_chart{"Copy task: mean attention entropy during training",
                      "step",
                      "entropy (nats), mean over layers and rows",
                      false,
                      false,
                      {}};
  std::printf("\ncopy task, d_model %lld, %lld head(s) (d_k = %lld), %lld steps:\n",
              static_cast<long long>(a.train_d_model), static_cast<long long>(a.train_heads),
              static_cast<long long>(a.train_d_model / a.train_heads),
              static_cast<long long>(a.train_steps));
  for (int s = 0; s < 2; ++s) {
    const Curve c = train_curve(copy_config(a, s == 0), a.train_steps);
    const std::string label = s == 0 ? "scale 1/sqrt(d_k)" : "scale 1 (unscaled)";
    Series ls{label, {}, c.loss, ""}, es{label, {}, c.entropy, ""};
    for (int64_t st : c.step)
      ls.x.push_back(static_cast<double>(st)), es.x.push_back(static_cast<double>(st));
    loss_chart.series.push_back(ls);
    ent_chart.series.push_back(es);
    for (size_t i = 0; i < c.step.size(); ++i)
      tcsv << kScale[s] << ',' << c.step[i] << ',' << num(c.loss[i]) << ',' << num(c.entropy[i])
           << ',' << num(c.cross_entropy_attention[i]) << '\n';
    j["training"].push_back({{"scale", kScale[s]},
                             {"d_model", a.train_d_model},
                             {"heads", a.train_heads},
                             {"steps", a.train_steps},
                             {"step", c.step},
                             {"loss", c.loss},
                             {"attention_entropy", c.entropy},
                             {"cross_attention_entropy", c.cross_entropy_attention},
                             {"seconds", c.seconds}});
    const size_t tail = std::max<size_t>(1, c.loss.size() / 10);
    std::printf(
        "  scale %-11s  first loss %.4f  final loss %.4f (mean of last %zu steps)  attention "
        "entropy %.4f -> %.4f  (%.0f s)\n",
        kScale[s], c.loss.front(), tail_mean(c.loss, tail), tail, c.entropy.front(),
        tail_mean(c.entropy, tail), c.seconds);
  }
  atomic_write_file((out / "saturation_training.csv").string(), tcsv.str());
  write_svg((out / "training_loss.svg").string(), loss_chart);
  write_svg((out / "training_entropy.svg").string(), ent_chart);
}

// The d_k to measure: --d-k, or 4, 8, ..., 1024; each checked, then the other sizes.
std::vector<int64_t> checked_d_k(const SaturationArgs& a) {
  std::vector<int64_t> dks = a.d_k;
  if (dks.empty())
    for (int64_t d = 4; d <= 1024; d *= 2) dks.push_back(d);
  for (int64_t d : dks) QKV_CHECK(d >= 1, "saturation", "--d-k values must be >= 1, got ", d);
  QKV_CHECK(a.keys >= 2, "saturation", "--keys must be >= 2, got ", a.keys);
  QKV_CHECK(a.samples >= 2 && a.rows >= 1 && a.batch >= 1, "saturation",
            "--samples must be >= 2, --rows and --batch >= 1");
  QKV_CHECK(a.train_steps >= 0 && a.train_d_model >= 1 && a.train_heads >= 1 &&
                a.train_d_model % a.train_heads == 0,
            "saturation",
            "--train-steps must be >= 0 and --train-heads must divide --train-d-model");
  return dks;
}

// What the sweep over d_k collects: a JSON record and a CSV row per (d_k, scale), and for each
// figure a series per scale (index 0: scaled by 1/sqrt(d_k), 1: unscaled).
struct Sweep {
  ojson records = ojson::array();
  std::ostringstream csv;
  Series ent[2], top[2], sat[2], jac[2], gq[2], gk[2], gl[2];

  Sweep() {
    csv << "d_k,scale,var_qk,mean_entropy,max_entropy,mean_max_weight,saturated_fraction,jacobian_"
           "norm,"
           "grad_norm_wq,grad_norm_wk,grad_norm_logits\n";
    for (int s = 0; s < 2; ++s) {
      const std::string sfx = s == 0 ? "scale 1/sqrt(d_k)" : "scale 1 (unscaled)";
      ent[s] = {sfx, {}, {}, ""}, top[s] = {sfx, {}, {}, ""}, sat[s] = {sfx, {}, {}, ""},
      jac[s] = {sfx, {}, {}, ""};
      gq[s] = {"W_Q, " + sfx, {}, {}, ""}, gk[s] = {"W_K, " + sfx, {}, {}, ""},
      gl[s] = {sfx, {}, {}, ""};
    }
  }

  // One (d_k, scale): its record, CSV row, a point on each series and a line of the table.
  void add(int64_t d, int s, double var, const RowStats& r, const GradNorms& g, double log_m) {
    records.push_back({{"d_k", d},
                       {"scale", kScale[s]},
                       {"var_qk", var},
                       {"mean_entropy", r.mean_entropy},
                       {"max_entropy", log_m},
                       {"mean_max_weight", r.mean_max_weight},
                       {"saturated_fraction", r.saturated_fraction},
                       {"jacobian_norm", r.jacobian_norm},
                       {"grad_norm_wq", g.wq},
                       {"grad_norm_wk", g.wk},
                       {"grad_norm_logits", g.logits}});
    csv << d << ',' << kScale[s] << ',' << num(var) << ',' << num(r.mean_entropy) << ','
        << num(log_m) << ',' << num(r.mean_max_weight) << ',' << num(r.saturated_fraction) << ','
        << num(r.jacobian_norm) << ',' << num(g.wq) << ',' << num(g.wk) << ',' << num(g.logits)
        << '\n';
    const double x = static_cast<double>(d);
    ent[s].x.push_back(x), ent[s].y.push_back(r.mean_entropy);
    top[s].x.push_back(x), top[s].y.push_back(r.mean_max_weight);
    sat[s].x.push_back(x), sat[s].y.push_back(r.saturated_fraction);
    jac[s].x.push_back(x), jac[s].y.push_back(r.jacobian_norm);
    gq[s].x.push_back(x), gq[s].y.push_back(g.wq);
    gk[s].x.push_back(x), gk[s].y.push_back(g.wk);
    gl[s].x.push_back(x), gl[s].y.push_back(g.logits);
    std::printf("%6lld  %-11s  %9.4g  %8.4f  %6.4f  %10.4f  %9.4f  %8.4f  %10.4g  %10.4g  %10.4g\n",
                static_cast<long long>(d), kScale[s], var, r.mean_entropy, log_m, r.mean_max_weight,
                r.saturated_fraction, r.jacobian_norm, g.wq, g.wk, g.logits);
  }
};

void print_sweep_header() {
  std::printf("%6s  %-11s  %9s  %8s  %6s  %10s  %9s  %8s  %10s  %10s  %10s\n", "d_k", "scale",
              "var(q.k)", "entropy", "log m", "max weight", "saturated", "|J|_F", "|dL/dW_Q|",
              "|dL/dW_K|", "|dL/dlogit|");
}

// Every measurement at one d_k, at both scales (the same draws for both).
void measure_d_k(const SaturationArgs& a, int64_t d, double log_m, Sweep& sweep) {
  Generator g(random_bits(a.seed, static_cast<uint64_t>(d)));
  const double var_raw = dot_variance(d, a.samples, g);
  const std::array<RowStats, 2> rs = softmax_rows(d, a.keys, a.rows, g);
  for (int s = 0; s < 2; ++s) {
    const nn::AttentionScale scale = s == 0 ? nn::AttentionScale() : nn::AttentionScale(1.0);
    const GradNorms norms = mha_grad_norms(d, a.keys, a.batch, scale,
                                           random_bits(a.seed + 1, static_cast<uint64_t>(d)));
    const double var = s == 0 ? var_raw / static_cast<double>(d) : var_raw;
    sweep.add(d, s, var, rs[s], norms, log_m);
  }
  std::fflush(stdout);
}

// One row's weights at example_d_k, scaled and unscaled (the same q and keys): the bar chart
// and its CSV.
struct ExampleRow {
  std::vector<double> scaled, raw;
  std::string csv;
  BarChart bars;
};

ExampleRow example_row(const SaturationArgs& a) {
  Generator eg(random_bits(a.seed + 2, static_cast<uint64_t>(a.example_d_k)));
  const Tensor q = randn({1, a.example_d_k}, eg, DType::f64),
               k = randn({a.keys, a.example_d_k}, eg, DType::f64);
  const Tensor sc = matmul(q, k.t());
  ExampleRow row;
  row.scaled = to_vector<double>(softmax(mul(sc, nn::AttentionScale().resolve(a.example_d_k)), 1));
  row.raw = to_vector<double>(softmax(sc, 1));
  std::ostringstream row_csv;
  row_csv << "key,scaled,unscaled\n";
  row.bars = BarChart{
      "One row of attention weights at d_k = " + std::to_string(a.example_d_k) + ", " +
          std::to_string(a.keys) + " keys, q and k ~ N(0, 1)",
      "key",
      "attention weight",
      {},
      {{"scale 1/sqrt(d_k)", {}, row.scaled, ""}, {"scale 1 (unscaled)", {}, row.raw, ""}}};
  for (int64_t j = 0; j < a.keys; ++j) {
    row.bars.categories.push_back(std::to_string(j + 1));
    row_csv << j + 1 << ',' << num(row.scaled[j]) << ',' << num(row.raw[j]) << '\n';
  }
  row.csv = row_csv.str();
  return row;
}

// saturation.json: the settings, every record, the example row; "training" is filled by
// train_both_scales.
ojson results_json(const SaturationArgs& a, const std::vector<int64_t>& dks, const Sweep& sweep,
                   const ExampleRow& row) {
  return {{"settings",
           {{"d_k", dks},
            {"keys", a.keys},
            {"samples", a.samples},
            {"rows", a.rows},
            {"batch", a.batch},
            {"seed", a.seed},
            {"saturation_threshold", 0.99}}},
          {"records", sweep.records},
          {"example_row", {{"d_k", a.example_d_k}, {"scaled", row.scaled}, {"unscaled", row.raw}}},
          {"training", ojson::array()}};
}

// The sweep's figures against d_k: entropy, largest weight, saturated rows, the softmax
// Jacobian and the gradient norms.
void write_sweep_figures(const SaturationArgs& a, const fs::path& out,
                         const std::vector<int64_t>& dks, double log_m, const Sweep& w) {
  Series maxh{"log m (uniform weights)", {}, {}, "#777777"};
  for (int64_t d : dks) maxh.x.push_back(static_cast<double>(d)), maxh.y.push_back(log_m);
  const std::string at_init = std::to_string(a.keys) + " keys, q and k ~ N(0, 1)";
  write_svg((out / "entropy.svg").string(),
            LineChart{"Mean row entropy of softmax(scale q.k), " + at_init,
                      "d_k",
                      "entropy (nats)",
                      true,
                      false,
                      {w.ent[0], w.ent[1], maxh}});
  write_svg((out / "max_weight.svg").string(),
            LineChart{"Mean largest attention weight, " + at_init,
                      "d_k",
                      "max_j p_j",
                      true,
                      false,
                      {w.top[0], w.top[1]}});
  write_svg((out / "saturated_fraction.svg").string(),
            LineChart{"Rows whose largest weight exceeds 0.99, " + at_init,
                      "d_k",
                      "fraction of rows",
                      true,
                      false,
                      {w.sat[0], w.sat[1]}});
  write_svg((out / "jacobian_norm.svg").string(),
            LineChart{"Softmax Jacobian norm ||diag(p) - p p^T||_F, " + at_init,
                      "d_k",
                      "mean Frobenius norm",
                      true,
                      false,
                      {w.jac[0], w.jac[1]}});
  write_svg((out / "gradient_norm.svg").string(),
            LineChart{"Gradient norm reaching W_Q and W_K (one-head MultiHeadAttention)",
                      "d_k = d_model",
                      "||dL/dW|| (Frobenius)",
                      true,
                      true,
                      {w.gq[0], w.gk[0], w.gq[1], w.gk[1]}});
  write_svg((out / "logit_gradient_norm.svg").string(),
            LineChart{"Gradient reaching the attention logits (softmax input), one-head MHA",
                      "d_k = d_model",
                      "||dL/d logits|| (Frobenius)",
                      true,
                      true,
                      {w.gl[0], w.gl[1]}});
}

}  // namespace

int cmd_saturation(const SaturationArgs& a) {
  const std::vector<int64_t> dks = checked_d_k(a);
  check_saturation_memory(a, dks);
  run::apply_threads(a.threads, "--threads");
  fs::create_directories(a.out);
  const double log_m = std::log(static_cast<double>(a.keys));

  Sweep sweep;
  print_sweep_header();
  for (int64_t d : dks) measure_d_k(a, d, log_m, sweep);
  const ExampleRow row = example_row(a);
  ojson j = results_json(a, dks, sweep, row);

  const fs::path out(a.out);
  if (a.train_steps > 0) train_both_scales(a, out, j);

  atomic_write_file((out / "saturation.json").string(), j.dump(1) + "\n");
  atomic_write_file((out / "saturation.csv").string(), sweep.csv.str());
  atomic_write_file((out / "saturation_row.csv").string(), row.csv);
  write_svg((out / "row_weights.svg").string(), row.bars);
  write_sweep_figures(a, out, dks, log_m, sweep);
  std::printf("\nwrote %s/saturation.json, CSVs and figures\n", a.out.c_str());
  return 0;
}

}  // namespace qkv::app
