#include "figures/layer_study.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>
#include <sstream>

#include "autograd/ops.hpp"
#include "core/error.hpp"
#include "core/random.hpp"
#include "figures/plot.hpp"
#include "nn/conv.hpp"
#include "nn/recurrent.hpp"
#include "nn/transformer.hpp"

namespace qkv::figures {

using ag::Var;

namespace {

// One layer, built once per (kind, seed) and called as x (B, n, d) -> (B, n, d).
struct Layer {
  std::shared_ptr<nn::Module> module;
  std::function<Var(const Var&)> forward;
};

Layer build_layer(LayerKind k, const LayerStudyOptions& o) {
  Generator gen(o.seed);
  switch (k) {
    case LayerKind::attention: {
      nn::BlockConfig c;
      c.d_model = o.d, c.heads = o.heads, c.d_ff = o.d, c.attn_only = true, c.dropout = 0;
      auto b = std::make_shared<nn::TransformerEncoderBlock>(c, gen,
                                                             std::make_shared<Generator>(o.seed));
      return {b, [b](const Var& x) { return b->forward(x, Tensor()); }};
    }
    case LayerKind::gru:
    case LayerKind::lstm: {
      std::shared_ptr<nn::Recurrent> r;
      if (k == LayerKind::gru)
        r = std::make_shared<nn::GRU>(o.d, o.d, gen);
      else
        r = std::make_shared<nn::LSTM>(o.d, o.d, gen);
      return {r, [r](const Var& x) { return r->forward(x).out; }};
    }
    case LayerKind::conv: {
      nn::ConvStackOptions c;
      c.d = o.d, c.layers = o.conv_layers, c.kernel = o.kernel, c.causal = o.conv_causal;
      auto s = std::make_shared<nn::ConvStack>(c, gen);
      return {s, [s](const Var& x) { return s->forward(x); }};
    }
  }
  throw Error("layers: unknown layer kind");
}

void check_options(const LayerStudyOptions& o) {
  if (o.d < 1 || o.heads < 1 || o.d % o.heads != 0)
    throw Error("layers: d = " + std::to_string(o.d) +
                " must be a positive multiple of heads = " + std::to_string(o.heads));
  if (o.kernel < 1 || o.conv_layers < 1 || o.batch < 1 || o.repeats < 1 || o.profile_batch < 1)
    throw Error("layers: kernel, conv layers, batch, repeats and profile batch must be >= 1");
  for (int64_t n : o.lengths)
    if (n < 2) throw Error("layers: every length must be >= 2, got " + std::to_string(n));
  if (o.profile_length < 2) throw Error("layers: profile length must be >= 2");
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : 0.5 * (v[m - 1] + v[m]);
}

}  // namespace

const char* layer_name(LayerKind k) {
  switch (k) {
    case LayerKind::attention:
      return "attention";
    case LayerKind::gru:
      return "gru";
    case LayerKind::lstm:
      return "lstm";
    case LayerKind::conv:
      return "conv";
  }
  return "?";
}

std::vector<LayerKind> all_layer_kinds() {
  return {LayerKind::attention, LayerKind::gru, LayerKind::lstm, LayerKind::conv};
}

int64_t layer_flops(LayerKind k, int64_t n, const LayerStudyOptions& o) {
  const int64_t d = o.d;
  switch (k) {
    case LayerKind::attention:
      return 8 * n * d * d + 4 * n * n * d;
    case LayerKind::gru:
      return 12 * n * d * d;
    case LayerKind::lstm:
      return 16 * n * d * d;
    case LayerKind::conv:
      return 2 * o.conv_layers * o.kernel * n * d * d;
  }
  return 0;
}

int64_t sequential_steps(LayerKind k, int64_t n) {
  return k == LayerKind::gru || k == LayerKind::lstm ? n : 1;
}

double time_forward_backward(LayerKind k, int64_t n, const LayerStudyOptions& o) {
  check_options(o);
  const Layer layer = build_layer(k, o);
  Generator g(o.seed + 7);
  const Tensor input = randn({o.batch, n, o.d}, g);
  std::vector<double> times;
  for (int64_t r = -1; r < o.repeats; ++r) {  // r = -1: an untimed warm-up (first-touch, caches)
    layer.module->zero_grad();
    Var x(input, true);
    const auto t0 = std::chrono::steady_clock::now();
    const Var out = layer.forward(x);
    out.backward(ones_like(out.data()));
    if (r >= 0)
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(times);
}

std::vector<double> gradient_profile(LayerKind k, int64_t n, const LayerStudyOptions& o) {
  check_options(o);
  const Layer layer = build_layer(k, o);
  Generator g(o.seed + 11);
  Var x(randn({o.profile_batch, n, o.d}, g), true);
  return last_position_profile(layer.forward(x), x, g);
}

std::vector<double> last_position_profile(const Var& out, const Var& x, Generator& g) {
  const int64_t B = out.data().size(0), n = out.data().size(1), dm = out.data().size(2);
  const int64_t d = x.data().size(2);
  // The output gradient: u at position n - 1 of every row, 0 elsewhere.
  std::vector<float> u = to_vector<float>(randn({dm}, g));
  double un = 0;
  for (float v : u) un += double(v) * v;
  std::vector<float> seed_grad(static_cast<size_t>(B * n * dm), 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < dm; ++c)
      seed_grad[static_cast<size_t>((b * n + n - 1) * dm + c)] =
          static_cast<float>(u[static_cast<size_t>(c)] / std::sqrt(un));
  out.backward(from_vector(seed_grad, {B, n, dm}));
  const std::vector<float> gx = to_vector<float>(x.grad().contiguous());
  std::vector<double> norms(static_cast<size_t>(n), 0.0);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < n; ++i) {
      double s = 0;
      for (int64_t c = 0; c < d; ++c) {
        const double v = gx[static_cast<size_t>((b * n + i) * d + c)];
        s += v * v;
      }
      norms[static_cast<size_t>(i)] += std::sqrt(s) / static_cast<double>(B);
    }
  return norms;
}

double loglog_slope(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) throw Error("layers: slope needs two points or more");
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  const double m = static_cast<double>(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double lx = std::log(x[i]), ly = std::log(y[i]);
    sx += lx, sy += ly, sxx += lx * lx, sxy += lx * ly;
  }
  const double den = m * sxx - sx * sx;
  return den == 0 ? 0 : (m * sxy - sx * sy) / den;
}

std::vector<LayerResult> run_layer_study(const LayerStudyOptions& o) {
  check_options(o);
  if (o.lengths.size() < 2) throw Error("layers: need at least two lengths to fit an exponent");
  std::vector<int64_t> ns = o.lengths;
  std::sort(ns.begin(), ns.end());
  std::vector<LayerResult> out;
  for (LayerKind k : all_layer_kinds()) {
    LayerResult r{k, ns, {}, {}, {}, 0, {}};
    for (int64_t n : ns) {
      r.seconds.push_back(time_forward_backward(k, n, o));
      r.flops.push_back(layer_flops(k, n, o));
      r.steps.push_back(sequential_steps(k, n));
    }
    // The fit over the larger half of n (at least two points): small n is overhead-bound.
    const size_t from = std::min(ns.size() / 2, ns.size() - 2);
    std::vector<double> lx, ly;
    for (size_t i = from; i < ns.size(); ++i)
      lx.push_back(static_cast<double>(ns[i])), ly.push_back(r.seconds[i]);
    r.exponent = loglog_slope(lx, ly);
    const std::vector<double> p = gradient_profile(k, o.profile_length, o);
    r.profile.assign(p.rbegin(), p.rend());  // index = distance from j = n - 1
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace qkv::figures
