#include "apps/trainer_lite.hpp"

#include <chrono>
#include <cmath>
#include <memory>

#include "apps/run.hpp"
#include "data/loader.hpp"
#include "figures/attention_stats.hpp"
#include "optim/clip.hpp"
#include "optim/schedule.hpp"

namespace qkv::app {

using figures::attention_entropy;

namespace {
double mean_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0.0 : s / static_cast<double>(v.size());
}
}  // namespace

LiteCurve train_lite(const RunConfig& cfg_in, int64_t steps) {
  QKV_CHECK(steps > 0, "train_lite", "steps must be > 0, got ", steps);
  RunConfig cfg = cfg_in;
  cfg.validate();
  if (cfg.optim.schedule.name == "cosine" && cfg.optim.schedule.total_steps == 0)
    cfg.optim.schedule.total_steps = steps;
  const auto t0 = std::chrono::steady_clock::now();
  data::DataSplits data = data::load_data(cfg.data);
  Generator init(cfg.seed);
  nn::Seq2Seq model(model_config(cfg, data), init);
  auto opt = optim::make_optimizer(cfg.optim.optim, model.named_parameters());
  const std::vector<ag::Var> params = model.parameters();
  auto train_set = std::make_shared<const data::Dataset>(data.train);
  data::LoaderOptions lopt = data::loader_options(cfg.data);
  lopt.prefetch = 0;
  data::Loader loader(train_set, data.framing, lopt, cfg.seed);

  LiteCurve c;
  model.train();
  for (int64_t s = 1; s <= steps; ++s) {
    const data::Batch b = loader.next();
    nn::AttentionMaps maps;
    const ag::Var logits = model.forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask, &maps);
    const ag::Var loss = ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}),
                                           b.tgt_out.flatten(), 0, cfg.train.label_smoothing);
    const double lv = loss.item();
    QKV_CHECK(std::isfinite(lv), "train_lite", "step ", s, ": loss is ", lv);
    std::vector<double> all = attention_entropy(maps.encoder_self);
    for (double h : attention_entropy(maps.decoder_self)) all.push_back(h);
    const std::vector<double> cross = attention_entropy(maps.decoder_cross);
    all.insert(all.end(), cross.begin(), cross.end());
    maps = nn::AttentionMaps();  // the graph keeps what backward needs

    loss.backward();
    if (cfg.optim.clip_norm > 0) optim::clip_grad_norm(params, cfg.optim.clip_norm);
    if (cfg.optim.clip_value > 0) optim::clip_grad_value(params, cfg.optim.clip_value);
    optim::apply_schedule(*opt, cfg.optim.schedule);
    opt->step();
    opt->zero_grad();

    c.step.push_back(s);
    c.loss.push_back(lv);
    c.entropy.push_back(mean_of(all));
    c.cross_entropy_attention.push_back(mean_of(cross));
  }
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

}  // namespace qkv::app
