// Token attribution (inspect/token_attribution.hpp): the pass's layout from the model's sites,
// gradients at the embedding hook points through replacements that require grad, the attention
// rollout from captured patterns, and value zeroing through replaced value vectors.
#include "inspect/token_attribution.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <sstream>

#include "core/cancel.hpp"
#include "core/error.hpp"
#include "core/nearest.hpp"
#include "data/tokenizer.hpp"
#include "data/utf8.hpp"
#include "inspect/attribution.hpp"
#include "inspect/recorded_pass.hpp"
#include "nn/inference_scope.hpp"
#include "nn/model.hpp"
#include "run/inference.hpp"

namespace qkv::inspect {

namespace {

constexpr std::array<std::pair<AttributionMethod, std::string_view>, 5> kMethods{{
    {AttributionMethod::saliency, "saliency"},
    {AttributionMethod::input_x_gradient, "input-x-gradient"},
    {AttributionMethod::integrated_gradients, "integrated-gradients"},
    {AttributionMethod::attention_rollout, "attention-rollout"},
    {AttributionMethod::value_zeroing, "value-zeroing"},
}};

constexpr std::array<std::pair<IgBaseline, std::string_view>, 2> kBaselines{{
    {IgBaseline::zero, "zero"},
    {IgBaseline::pad, "pad"},
}};

// The name of v in a {value, name} table ("?" if missing, which its test rules out).
template <class E, size_t N>
const char* name_in(const std::array<std::pair<E, std::string_view>, N>& table, E v) {
  for (const auto& [value, name] : table)
    if (value == v) return name.data();
  return "?";
}

// The value named name; qkv::Error "OP: unknown WHAT 'name'; did you mean ...? (the WHATs: ...)".
template <class E, size_t N>
E named(const std::array<std::pair<E, std::string_view>, N>& table, const std::string& name,
        const char* op, const char* what) {
  std::vector<std::string_view> names;
  for (const auto& [value, n] : table) {
    if (n == name) return value;
    names.push_back(n);
  }
  std::string all;
  for (const std::string_view n : names) all += (all.empty() ? "" : ", ") + std::string(n);
  throw Error(cat(op, ": unknown ", what, " '", name, "'", did_you_mean(name, names, "'", "'"),
                  " (the ", what, "s: ", all, ")"));
}

// The longest output side a query may score: a work bound where positions do not bound it.
constexpr int64_t kMaxOutputTokens = 1024;

// One pass's layout: which ids go to which side, where each output row is read, and the
// embedding hook points (slots) whose positions are the columns, in order.
struct Frame {
  bool has_input = false, has_output = false;
  data::Ids src, tgt;         // the input side's ids, the output side's (either may be empty)
  std::vector<int64_t> rows;  // per output: its position in the logits
  std::vector<std::pair<std::string, int64_t>> slots;  // (hook point, positions)
  int64_t inputs = 0, context = 0;                     // columns of each side
  std::vector<int64_t> visible;                        // per output: context columns read
  int64_t columns() const { return inputs + context; }
};

Frame frame_of(const run::Inference& inf, const AttributionQuery& q) {
  QKV_CHECK(!q.input.empty(), "attribute", "an empty input");
  QKV_CHECK(!q.outputs.empty(), "attribute",
            "no output token to score (the model's output is empty: give --target)");
  Frame f;
  const nn::Model::Embeddings embeds = inf.model().embeddings();
  const std::string &in_embed = embeds.input, &out_embed = embeds.output;
  f.has_input = !in_embed.empty(), f.has_output = !out_embed.empty();
  const int64_t V = inf.model().output_layer().weight.size(0);
  for (const int64_t id : q.outputs)
    QKV_CHECK(id >= 0 && id < V, "attribute", "output id ", id, " is outside the output layer's ",
              V, " rows");
  QKV_CHECK(q.contrast < V, "attribute", "contrast id ", q.contrast,
            " is outside the output layer's ", V, " rows");
  const auto k = static_cast<int64_t>(q.outputs.size());
  const auto n = static_cast<int64_t>(q.input.size());
  const data::Ids head(q.outputs.begin(), q.outputs.end() - 1);  // all but the last output
  if (f.has_input && f.has_output) {  // encoder-decoder: the source, and <bos> + the outputs
    QKV_CHECK(k <= std::min(inf.max_input_tokens(), kMaxOutputTokens), "attribute",
              "the target has ", k, " tokens, more than the model's ",
              std::min(inf.max_input_tokens(), kMaxOutputTokens), " output positions");
    f.src = q.input;
    f.tgt = {inf.run().data.framing.bos};
    f.tgt.insert(f.tgt.end(), head.begin(), head.end());
    f.slots = {{in_embed, n}, {out_embed, k}};
    f.inputs = n, f.context = k;
    for (int64_t r = 0; r < k; ++r) f.rows.push_back(r), f.visible.push_back(r + 1);
  } else if (f.has_output) {  // language model: the prompt and the outputs but the last
    QKV_CHECK(n + k - 1 <= inf.max_input_tokens(), "attribute", "the prompt's ", n,
              " tokens and the target's ", k, " need ", n + k - 1,
              " positions, more than the model's context of ", inf.max_input_tokens());
    f.tgt = q.input;
    f.tgt.insert(f.tgt.end(), head.begin(), head.end());
    f.slots = {{out_embed, n + k - 1}};
    f.inputs = n, f.context = k - 1;
    for (int64_t r = 0; r < k; ++r) f.rows.push_back(n - 1 + r), f.visible.push_back(r);
  } else {  // classifier: one class at the pooled read-out
    QKV_CHECK(k == 1, "attribute", "a classifier has one output (its class), got ", k);
    f.src = q.input;
    f.slots = {{in_embed, n}};
    f.inputs = n;
    f.rows = {0};
    f.visible = {0};
  }
  return f;
}

// The one-row logits (T, V) of the frame through the inference interface, with hooks.
Tensor frame_logits(const run::Inference& inf, const Frame& f, nn::Hooks* hooks) {
  return inf.logits(f.has_input ? f.src : f.tgt, f.has_input && f.has_output ? f.tgt : data::Ids{},
                    hooks);
}

// The frame's ids as a recorded pass reads them.
PassIds pass_of(const Frame& f) { return {f.src, f.tgt}; }

using Vec = std::vector<double>;

Vec as_vec(const Tensor& t) { return to_vector<double>(t.to(DType::f64).contiguous()); }

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// f_r of each output row from one row of logits (T, V): the logit, or the difference.
double row_value(const Tensor& logits, const Frame& f, const AttributionQuery& q, size_t r) {
  const Vec row = as_vec(logits.select(0, f.rows[r]));
  const double v = row[static_cast<size_t>(q.outputs[r])];
  return q.contrast >= 0 ? v - row[static_cast<size_t>(q.contrast)] : v;
}

// Each slot's embedding (n_s, d) of the frame's pass, in the model's dtype.
std::vector<Tensor> embeddings(const run::Inference& inf, const Frame& f) {
  nn::Hooks cap;
  std::vector<std::string> names;
  for (const auto& s : f.slots) names.push_back(s.first);
  cap.capture = nn::names_matching(names);
  frame_logits(inf, f, &cap);
  std::vector<Tensor> out;
  for (const auto& s : f.slots) out.push_back(cap.cache.at(s.first).data().select(0, 0));
  return out;
}

// Each slot's baseline b (n_s, d) for the frame's pass: zeros, or the embeddings of a pass
// whose every id is its side's <pad> (so the model embeds pad as it embeds any token).
std::vector<Tensor> baseline_embeddings(const run::Inference& inf, const Frame& f, IgBaseline b,
                                        const std::vector<Tensor>& embeds) {
  std::vector<Tensor> out;
  if (b == IgBaseline::zero) {
    for (const Tensor& e : embeds) out.push_back(zeros_like(e));
    return out;
  }
  const data::DataSplits& d = inf.run().data;
  Frame pads = f;
  const auto fill = [](data::Ids& ids, const data::Vocab& v, const char* side) {
    QKV_CHECK(ids.empty() || v.pad() >= 0, "attribute", "--baseline pad: the ", side,
              " vocabulary has no <pad> token (use --baseline zero)");
    std::fill(ids.begin(), ids.end(), v.pad());
  };
  fill(pads.src, d.src_vocab, "input");
  fill(pads.tgt, d.tgt_vocab, f.has_input ? "output" : "model's");
  return embeddings(inf, pads);
}

// b + alpha (e - b) (n, d) for each alpha, as copies (K, n, d) in e's dtype.
Tensor scaled_copies(const Tensor& e, const Tensor& b, const std::vector<double>& alphas) {
  const Vec v = as_vec(e), base = as_vec(b);
  Vec out;
  for (const double a : alphas)
    for (size_t i = 0; i < v.size(); ++i) out.push_back(base[i] + a * (v[i] - base[i]));
  return from_vector<double>(out, {static_cast<int64_t>(alphas.size()), e.size(0), e.size(1)})
      .to(e.dtype());
}

// Adds into sum[r][s] (n_s * d) the gradient of row r's f at slot s, summed over one recorded
// pass of copies with the embeddings at base + alpha (embeds - base) for each alpha.
void add_gradients(const run::Inference& inf, const Frame& f, const AttributionQuery& q,
                   const std::vector<Tensor>& embeds, const std::vector<Tensor>& base,
                   const std::vector<double>& alphas, std::vector<std::vector<Vec>>& sum) {
  cancellation_point();
  const auto K = static_cast<int64_t>(alphas.size());
  nn::Hooks hooks;
  std::vector<ag::Var> leaves;
  for (size_t s = 0; s < f.slots.size(); ++s) {
    leaves.emplace_back(scaled_copies(embeds[s], base[s], alphas), true);
    hooks.add(f.slots[s].first, [leaf = leaves.back()](const ag::Var&) { return leaf; });
  }
  // A pass of its own with a tape: the inference calls record none. ag::grad below writes no
  // weight's .grad(), so nothing shared is written (the tape lock guards .grad() only).
  const nn::InferenceScope scope(inf.model(), inf.precision(), &hooks, true);
  const ag::Var logits = forward_copies(inf.model(), pass_of(f), K);  // (K, T, V)
  for (size_t r = 0; r < f.rows.size(); ++r) {
    const Tensor seed = logit_seed(logits, f.rows[r], q.outputs[r], q.contrast);
    const std::vector<Tensor> grads = ag::grad({logits}, {seed}, leaves, r + 1 < f.rows.size());
    for (size_t s = 0; s < leaves.size(); ++s) {
      const Vec gv = as_vec(grads[s]);  // (K, n, d)
      Vec& acc = sum[r][s];
      if (acc.empty()) acc.assign(gv.size() / static_cast<size_t>(K), 0.0);
      for (size_t i = 0; i < gv.size(); ++i) acc[i % acc.size()] += gv[i];
    }
  }
}

// Per row, per column: saliency |g|, or (e - b) . g for the products.
std::vector<Vec> reduce(const Frame& f, AttributionMethod m, const std::vector<Tensor>& embeds,
                        const std::vector<Tensor>& base, const std::vector<std::vector<Vec>>& grads,
                        double scale) {
  std::vector<Vec> out;
  for (size_t r = 0; r < f.rows.size(); ++r) {
    Vec row;
    for (size_t s = 0; s < f.slots.size(); ++s) {
      const Vec e = as_vec(embeds[s]), b = as_vec(base[s]);
      const int64_t n = f.slots[s].second, d = embeds[s].size(1);
      for (int64_t i = 0; i < n; ++i) {
        double v = 0;
        for (int64_t j = 0; j < d; ++j) {
          const double g = grads[r][s][i * d + j] * scale;
          v += m == AttributionMethod::saliency ? g * g : (e[i * d + j] - b[i * d + j]) * g;
        }
        row.push_back(m == AttributionMethod::saliency ? std::sqrt(v) : v);
      }
    }
    out.push_back(std::move(row));
  }
  return out;
}

void gradient_scores(const run::Inference& inf, const Frame& f, const AttributionQuery& q,
                     TokenAttribution& a) {
  const std::vector<Tensor> embeds = embeddings(inf, f);
  const bool ig = q.method == AttributionMethod::integrated_gradients;
  // input x gradient is e . g: the zero baseline, one step at alpha = 1
  const std::vector<Tensor> base =
      baseline_embeddings(inf, f, ig ? q.baseline : IgBaseline::zero, embeds);
  std::vector<std::vector<Vec>> grads(f.rows.size(), std::vector<Vec>(f.slots.size()));
  if (!ig) {
    add_gradients(inf, f, q, embeds, base, {1.0}, grads);
    a.scores = reduce(f, q.method, embeds, base, grads, 1.0);
    return;
  }
  for (int64_t at = 0; at < q.steps; at += q.batch) {  // the midpoints (k + 1/2) / m
    std::vector<double> alphas;
    for (int64_t k = at; k < std::min(q.steps, at + q.batch); ++k)
      alphas.push_back((static_cast<double>(k) + 0.5) / static_cast<double>(q.steps));
    add_gradients(inf, f, q, embeds, base, alphas, grads);
  }
  a.scores = reduce(f, q.method, embeds, base, grads, 1.0 / static_cast<double>(q.steps));
  a.steps = q.steps;
  a.baseline = name_of(q.baseline);
  // f at the input and at the baseline, through the inference interface
  const Tensor at_input = frame_logits(inf, f, nullptr);
  nn::Hooks at_b;
  for (size_t s = 0; s < f.slots.size(); ++s)  // (1, n_s, d), as the hook point carries it
    at_b.add(f.slots[s].first, [b = base[s]](const ag::Var& e) {
      return ag::Var(b.reshape({1, b.size(0), b.size(1)}).to(e.dtype()));
    });
  const Tensor at_baseline = frame_logits(inf, f, &at_b);
  for (size_t r = 0; r < f.rows.size(); ++r) {
    a.value.push_back(row_value(at_input, f, q, r));
    a.baseline_value.push_back(row_value(at_baseline, f, q, r));
  }
}

// --- attention rollout and value zeroing: dense row-major matrices in float64
struct Mat {
  int64_t n = 0, m = 0;
  Vec v;
  double& at(int64_t i, int64_t j) { return v[static_cast<size_t>(i * m + j)]; }
  double at(int64_t i, int64_t j) const { return v[static_cast<size_t>(i * m + j)]; }
};
Mat zero_mat(int64_t n, int64_t m) { return {n, m, Vec(static_cast<size_t>(n * m), 0.0)}; }
Mat identity(int64_t n, double scale = 1.0) {
  Mat a = zero_mat(n, n);
  for (int64_t i = 0; i < n; ++i) a.at(i, i) = scale;
  return a;
}
Mat product(const Mat& a, const Mat& b) {
  Mat c = zero_mat(a.n, b.m);
  for (int64_t i = 0; i < a.n; ++i)
    for (int64_t k = 0; k < a.m; ++k)
      for (int64_t j = 0; j < b.m; ++j) c.at(i, j) += a.at(i, k) * b.at(k, j);
  return c;
}
// A pattern (1, h, n, m) as its mean over heads (n x m), times `keep`, plus `self` I.
Mat mixed(const Tensor& pattern, double keep, double self) {
  const int64_t h = pattern.size(1), n = pattern.size(2), m = pattern.size(3);
  const Vec p = as_vec(pattern);
  Mat a = zero_mat(n, m);
  for (int64_t head = 0; head < h; ++head)
    for (int64_t i = 0; i < n * m; ++i) a.v[i] += keep * p[head * n * m + i] / h;
  for (int64_t i = 0; i < std::min(n, m); ++i) a.at(i, i) += self;
  return a;
}

// One mixing step of the output side's positions: D <- own D + from_input [R_in | 0], where
// own (T x T) mixes the output side's positions and from_input (T x S) reads the input side's
// last positions (R_in: the input side's composed mixing); from_input empty: none.
struct Step {
  Mat own, from_input;
};

// The composed mixing over the columns [input | output side] (a model of one side: its own),
// from the input side's per-layer matrices (each S x S, applied from the first) and the output
// side's steps in forward order; then the rows the outputs are read at, through the pooling.
void compose(const run::Inference& inf, const Frame& f, const std::vector<Mat>& input_layers,
             const std::vector<Step>& output_steps, TokenAttribution& a) {
  const auto S = static_cast<int64_t>(f.src.size()), T = static_cast<int64_t>(f.tgt.size());
  Mat in = identity(S);
  for (const Mat& m : input_layers) in = product(m, in);
  Mat stream = in;  // the positions the output layer reads, over the columns
  if (f.has_output) {
    stream = zero_mat(T, S + T);  // [input | output side], from [0 | I]
    for (int64_t i = 0; i < T; ++i) stream.at(i, S + i) = 1;
    for (const Step& s : output_steps) {
      Mat next = product(s.own, stream);
      if (s.from_input.n > 0) {
        const Mat read = product(s.from_input, in);  // (T, S)
        for (int64_t i = 0; i < T; ++i)
          for (int64_t j = 0; j < S; ++j) next.at(i, j) += read.at(i, j);
      }
      stream = std::move(next);
    }
  }
  for (const int64_t t : f.rows) {
    const Vec w = read_weights(inf.model(), stream.n, t);
    Vec row(static_cast<size_t>(stream.m), 0.0);
    for (int64_t p = 0; p < stream.n; ++p)
      for (int64_t j = 0; j < stream.m; ++j) row[j] += w[p] * stream.at(p, j);
    a.scores.push_back(std::move(row));
  }
}

// The most layers of the sites whose queries are on the output side.
int64_t output_layers(const std::vector<nn::AttentionSite>& sites) {
  int64_t layers = 0;
  for (const nn::AttentionSite& s : sites)
    if (s.queries == nn::Side::output) layers = std::max(layers, s.layers);
  return layers;
}

// Rollout and value zeroing compose the attention layers' mixing of positions, which describes
// the model only where attention is what mixes them: each side with token embeddings has
// self-attention. A side without (a recurrent or convolutional encoder, Bahdanau's recurrent
// decoder) mixes its positions in layers the composition cannot see, and would be scored as if
// each position held its own token alone.
void check_composable(const run::Inference& inf, AttributionMethod m) {
  const nn::Model::Embeddings e = inf.model().embeddings();
  bool in = false, out = false;
  for (const nn::AttentionSite& s : inf.model().attention_sites())
    if (s.queries == s.keys) (s.queries == nn::Side::input ? in : out) = true;
  std::string sides;  // the embeddings whose positions mix outside attention
  for (const auto& [point, attends] : {std::pair{e.input, in}, std::pair{e.output, out}})
    if (!point.empty() && !attends) sides.append(sides.empty() ? "" : " and ").append(point);
  QKV_CHECK(sides.empty(), "attribute", name_of(m),
            " composes attention layers, but the positions after ", sides,
            " mix in layers that are no attention (recurrent or convolutional); use saliency, "
            "input-x-gradient or integrated-gradients");
}

void rollout_scores(const run::Inference& inf, const Frame& f, TokenAttribution& a) {
  nn::Hooks cap = run::pattern_capture();
  frame_logits(inf, f, &cap);
  const auto pattern = [&](const nn::AttentionSite& s, int64_t l) {
    return cap.cache.at(s.pattern(l)).data();  // (1, h, n, m)
  };
  const std::vector<nn::AttentionSite> sites = inf.model().attention_sites();
  std::vector<Mat> input_layers;
  for (const nn::AttentionSite& s : sites)
    if (s.queries == nn::Side::input)
      for (int64_t l = 0; l < s.layers; ++l) input_layers.push_back(mixed(pattern(s, l), 0.5, 0.5));
  std::vector<Step> steps;  // per decoder layer: self-attention, then cross-attention
  const auto T = static_cast<int64_t>(f.tgt.size());
  for (int64_t l = 0; l < output_layers(sites); ++l)
    for (const nn::AttentionSite& s : sites) {
      if (s.queries != nn::Side::output || l >= s.layers) continue;
      if (s.keys == nn::Side::output)
        steps.push_back({mixed(pattern(s, l), 0.5, 0.5), {}});
      else  // half the stream stays, half is read from the input side
        steps.push_back({identity(T, 0.5), mixed(pattern(s, l), 0.5, 0.0)});
    }
  compose(inf, f, input_layers, steps, a);
}

// Value zeroing at one attention layer: the block's output (resid_post of layer l) of a pass
// with the value vector of each key position j set to 0 in every head, against the pass's
// own: the cosine distance (n queries x m keys). One pass of m + 1 copies (copy 0 unchanged).
Mat zeroing_distances(const run::Inference& inf, const Frame& f, const nn::AttentionSite& s,
                      int64_t l) {
  const auto m = static_cast<int64_t>(s.keys == nn::Side::input ? f.src.size() : f.tgt.size());
  const std::string out = s.prefix + std::to_string(l) + ".resid_post";
  nn::Hooks h;
  h.capture = nn::names_matching({out});
  h.add(s.point_of(l, "v"), [m](const ag::Var& v) {  // (m + 1, h, m, d_head)
    std::vector<float> keep(static_cast<size_t>((m + 1) * m), 1.0f);
    for (int64_t j = 0; j < m; ++j) keep[static_cast<size_t>((j + 1) * m + j)] = 0;
    return ag::mul(v, ag::Var(from_vector<float>(keep, {m + 1, 1, m, 1}).to(v.dtype())));
  });
  cancellation_point();
  {
    const nn::InferenceScope scope(inf.model(), inf.precision(), &h, false);
    forward_copies(inf.model(), pass_of(f), m + 1);
  }
  const Tensor x = h.cache.at(out).data();  // (m + 1, n, d)
  const int64_t n = x.size(1);
  Mat dist = zero_mat(n, m);
  for (int64_t i = 0; i < n; ++i) {
    const Vec a = as_vec(x.select(0, 0).select(0, i));
    for (int64_t j = 0; j < m; ++j) {
      const Vec b = as_vec(x.select(0, j + 1).select(0, i));
      const double na = std::sqrt(dot(a, a)), nb = std::sqrt(dot(b, b));
      dist.at(i, j) = na > 0 && nb > 0 ? std::max(0.0, 1 - dot(a, b) / (na * nb)) : 0.0;
    }
  }
  return dist;
}

// Each row of the matrices divided by its sum over all of them (a row of zeros stays).
void normalize_rows(std::vector<Mat*> parts) {
  for (int64_t i = 0; i < parts[0]->n; ++i) {
    double sum = 0;
    for (const Mat* p : parts)
      for (int64_t j = 0; j < p->m; ++j) sum += p->at(i, j);
    if (sum > 0)
      for (Mat* p : parts)
        for (int64_t j = 0; j < p->m; ++j) p->at(i, j) /= sum;
  }
}

void value_zeroing_scores(const run::Inference& inf, const Frame& f, TokenAttribution& a) {
  const std::vector<nn::AttentionSite> sites = inf.model().attention_sites();
  std::vector<Mat> input_layers;
  for (const nn::AttentionSite& s : sites)
    if (s.queries == nn::Side::input)
      for (int64_t l = 0; l < s.layers; ++l) {
        input_layers.push_back(zeroing_distances(inf, f, s, l));
        normalize_rows({&input_layers.back()});
      }
  std::vector<Step> steps;  // per decoder layer: its self and cross keys, normalized together
  const auto T = static_cast<int64_t>(f.tgt.size());
  for (int64_t l = 0; l < output_layers(sites); ++l) {
    Step step{zero_mat(T, T), {}};
    for (const nn::AttentionSite& s : sites) {
      if (s.queries != nn::Side::output || l >= s.layers) continue;
      (s.keys == nn::Side::output ? step.own : step.from_input) = zeroing_distances(inf, f, s, l);
    }
    if (step.from_input.n > 0)
      normalize_rows({&step.own, &step.from_input});
    else
      normalize_rows({&step.own});
    steps.push_back(std::move(step));
  }
  compose(inf, f, input_layers, steps, a);
}

// The column labels of each side.
void label(const run::Inference& inf, const Frame& f, const AttributionQuery& q,
           TokenAttribution& a) {
  if (f.has_input && f.has_output) {
    a.inputs = inf.input_labels(f.src);
    a.context = inf.output_labels(f.tgt);
  } else if (f.has_output) {
    const std::vector<std::string> all = inf.output_labels(f.tgt);
    a.inputs.assign(all.begin(), all.begin() + f.inputs);
    a.context.assign(all.begin() + f.inputs, all.end());
  } else {
    a.inputs = inf.input_labels(f.src);
  }
  a.outputs = inf.output_labels(q.outputs);
  if (q.contrast >= 0) a.contrast = inf.output_labels({q.contrast})[0];
}

}  // namespace

const char* name_of(AttributionMethod m) { return name_in(kMethods, m); }

AttributionMethod attribution_method(const std::string& name, const char* op) {
  return named(kMethods, name, op, "method");
}

const char* name_of(IgBaseline b) { return name_in(kBaselines, b); }

const char* describe(IgBaseline b) {
  return b == IgBaseline::pad ? "the padding token's embedding at every position"
                              : "zero embeddings";
}

IgBaseline ig_baseline(const std::string& name, const char* op) {
  return named(kBaselines, name, op, "baseline");
}

double TokenAttribution::completeness_error(size_t row) const {
  double sum = 0;
  for (const double v : scores[row]) sum += v;
  const double change = value[row] - baseline_value[row];
  return std::abs(sum - change) / std::max(std::abs(change), 1e-12);
}

data::Ids default_outputs(const run::Inference& inf, const data::Ids& input, int64_t tokens) {
  // the sides by their embeddings, not their attention sites: a recurrent encoder has none
  if (!inf.model().embeddings().input.empty())
    return inf.inspect(input).output;  // a translator's greedy output; the class
  QKV_CHECK(tokens >= 1 && tokens <= kMaxAttributionTokens, "attribute", "--tokens must be 1..",
            kMaxAttributionTokens, ", got ", tokens);
  QKV_CHECK(static_cast<int64_t>(input.size()) + tokens - 1 <= inf.max_input_tokens(), "attribute",
            "the prompt's ", input.size(), " tokens and ", tokens,
            " next tokens need more than the model's context of ", inf.max_input_tokens());
  data::Ids text = input, next;
  for (int64_t i = 0; i < tokens; ++i) {  // greedy: the most likely token after the text so far
    const Tensor logits = inf.logits(text, {});
    next.push_back(to_vector<int64_t>(argmax(logits.select(0, logits.size(0) - 1), -1))[0]);
    text.push_back(next.back());
  }
  return next;
}

data::Ids output_ids(const run::Inference& inf, const std::string& text, const char* op) {
  const nn::Model::Embeddings e = inf.model().embeddings();
  const bool in = !e.input.empty(), out = !e.output.empty();
  if (!out) return {output_token_id(inf, text, op)};  // a class name
  if (!in) return inf.encode(text, op);               // a language model's text
  const data::DataSplits& d = inf.run().data;
  const data::DataConfig& dc = inf.run().config.data;
  const std::string t = dc.lowercase ? data::to_lower_utf8(text) : text;
  std::vector<std::string> pieces;
  if (run::is_symbol_task(dc)) {
    std::istringstream words(t);
    for (std::string w; words >> w;) pieces.push_back(w);
  } else {
    pieces = d.tokenizer == data::TokenizerKind::sentencepiece ? d.tgt_spm->encode(t)
                                                               : data::tokenize(t, d.tokenizer);
  }
  data::Ids ids;
  for (const std::string& p : pieces) {
    QKV_CHECK(d.tgt_vocab.contains(p) && !d.tgt_vocab.is_special(d.tgt_vocab.id(p)), op, "'", p,
              "' is no token of the model's output (", d.tgt_vocab.size(), " tokens)");
    ids.push_back(d.tgt_vocab.id(p));
  }
  QKV_CHECK(!ids.empty(), op, "an empty target");
  return ids;
}

Work attribution_work(const run::Inference& inf, const AttributionQuery& q) {
  const Frame f = frame_of(inf, q);
  const auto tokens = static_cast<double>(f.src.size() + f.tgt.size());
  const auto rows = static_cast<double>(f.rows.size());
  if (q.method == AttributionMethod::attention_rollout)
    return {tokens, fmt::format("one pass of {} tokens", tokens)};
  if (q.method == AttributionMethod::value_zeroing) {  // per layer: key positions + 1 copies
    double copies = 0;
    for (const nn::AttentionSite& s : inf.model().attention_sites())
      copies += static_cast<double>(s.layers) *
                static_cast<double>((s.keys == nn::Side::input ? f.src : f.tgt).size() + 1);
    return {copies * tokens, fmt::format("{} copies of {} tokens", copies, tokens)};
  }
  const bool ig = q.method == AttributionMethod::integrated_gradients;
  const double copies = ig ? static_cast<double>(q.steps) : 1.0;
  // the plain passes: the embeddings; IG's f(input) and f(baseline), and the pad embeddings
  const double plain = !ig ? 1 : q.baseline == IgBaseline::pad ? 4 : 3;
  return {copies * tokens * (1 + 2 * rows) + plain * tokens,
          fmt::format("{} {} of {} tokens, a backward for each of {} output tokens", copies,
                      ig ? "interpolated inputs" : "input", tokens, rows)};
}

TokenAttribution attribute_tokens(const run::Inference& inf, const AttributionQuery& q) {
  QKV_CHECK(q.steps >= 1 && q.steps <= kMaxAttributionSteps, "attribute", "--steps must be 1..",
            kMaxAttributionSteps, ", got ", q.steps);
  QKV_CHECK(q.batch >= 1, "attribute", "batch must be >= 1, got ", q.batch);
  QKV_CHECK(q.contrast < 0 || (q.method != AttributionMethod::attention_rollout &&
                               q.method != AttributionMethod::value_zeroing),
            "attribute", name_of(q.method),
            " does not depend on the output token, so it has no contrast; --contrast needs a "
            "gradient method");
  if (q.method == AttributionMethod::attention_rollout ||
      q.method == AttributionMethod::value_zeroing)
    check_composable(inf, q.method);
  check_work(attribution_work(inf, q), q.max_work, "attribute",
             "--max-work; use a shorter input or target, or fewer --steps");
  const Frame f = frame_of(inf, q);
  TokenAttribution a;
  a.method = name_of(q.method);
  label(inf, f, q, a);
  a.visible = f.visible;
  if (q.method == AttributionMethod::attention_rollout)
    rollout_scores(inf, f, a);
  else if (q.method == AttributionMethod::value_zeroing)
    value_zeroing_scores(inf, f, a);
  else
    gradient_scores(inf, f, q, a);
  for (size_t r = 0; r < a.scores.size(); ++r)  // the causal zeros exact, whatever the method
    for (int64_t j = f.inputs + f.visible[r]; j < f.columns(); ++j) a.scores[r][j] = 0;
  return a;
}

nlohmann::json token_attribution_json(const TokenAttribution& a) {
  nlohmann::json rows = nlohmann::json::array();
  const size_t in = a.inputs.size();
  for (size_t r = 0; r < a.scores.size(); ++r) {
    const Vec& s = a.scores[r];
    nlohmann::json row{{"token", a.outputs[r]},
                       {"inputs", Vec(s.begin(), s.begin() + static_cast<ptrdiff_t>(in))},
                       {"context", Vec(s.begin() + static_cast<ptrdiff_t>(in),
                                       s.begin() + static_cast<ptrdiff_t>(in) + a.visible[r])}};
    if (a.steps > 0) {
      double sum = 0;
      for (const double v : s) sum += v;
      row["value"] = a.value[r];
      row["baseline_value"] = a.baseline_value[r];
      row["sum"] = sum;
      row["completeness_error"] = a.completeness_error(r);
    }
    rows.push_back(std::move(row));
  }
  nlohmann::json j{{"method", a.method},
                   {"contrast", a.contrast.empty() ? nlohmann::json() : nlohmann::json(a.contrast)},
                   {"inputs", a.inputs},
                   {"context", a.context},
                   {"outputs", rows}};
  if (a.steps > 0) j["steps"] = a.steps, j["baseline"] = a.baseline;
  return j;
}

}  // namespace qkv::inspect
