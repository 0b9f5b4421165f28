#include "figures/length_study.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "autograd/ops.hpp"
#include "config/config.hpp"
#include "config/document.hpp"
#include "core/error.hpp"
#include "core/random.hpp"
#include "data/tasks.hpp"
#include "figures/layer_study.hpp"
#include "nn/encoder_decoder.hpp"
#include "nn/hooks.hpp"
#include "run/decode.hpp"
#include "run/family.hpp"
#include "run/limits.hpp"
#include "run/run.hpp"
#include "train/seq2seq_step.hpp"
#include "train/trainer.hpp"

namespace qkv::figures {

using ag::Var;

namespace {

// The [model] section of each model of the study (length_study.hpp's list).
std::string model_section(const std::string& m, const LengthStudyOptions& o) {
  std::ostringstream t;
  t << "[model]\nd_model = " << o.d << "\nheads = " << o.heads << "\nd_ff = " << 2 * o.d
    << "\nencoder_layers = " << o.layers << "\ndecoder_layers = 1\ndropout = 0.0\n";
  if (m == "gru-no-attention" || m == "bahdanau") {
    t << "encoder = \"gru\"\ndecoder = \"gru\"\nposition = \"none\"\nscale_embedding = false\n";
    if (m == "bahdanau")
      t << "attention = \"additive\"\ncross_attention = true\n";
    else
      t << "cross_attention = false\n";
  } else {
    t << "encoder = \"" << m << "\"\nposition = \"sinusoidal\"\n";
  }
  return t.str();
}

config::RunConfig study_config(const std::string& model, const std::string& task,
                               const LengthStudyOptions& o) {
  std::ostringstream t;
  t << "seed = " << o.seed << "\n"
    << model_section(model, o) << "[data]\ntask = \"" << task << "\"\nvocab_size = " << o.vocab
    << "\nmin_len = 1\nmax_len = " << o.train_max_len
    << "\ntrain_size = " << std::max<int64_t>(1000, std::min<int64_t>(o.steps * o.batch, 20000))
    << "\nvalid_size = 10\ntest_size = 10\nbatch_size = " << o.batch
    << "\n[optim]\nname = \"adam\"\nlr = " << o.lr
    << "\nschedule = \"cosine\"\nwarmup = " << std::min(o.warmup, std::max<int64_t>(1, o.steps / 2))
    << "\nclip_norm = 1.0\n";
  config::RunConfig c =
      config::config_from_toml(config::parse_config(t.str(), "<qkv layers: " + model + ">"));
  c.validate();
  return c;
}

// run/limits' memory estimates of what the study trains (study_config) and scores (eval_examples
// at the longest eval length), refused in one line naming layers' options rather than the
// config keys behind them.
void check_study_memory(const std::string& model, const std::string& task,
                        const LengthStudyOptions& o) {
  static const std::pair<std::string, std::string> kOptions[] = {
      {"data.batch_size", "--train-batch"},
      {"data.train_size", "--train-steps x --train-batch"},
      {"data.test_size", "--eval-examples"},
      {"data.max_len", "--train-max-len or --eval-lengths"},
      {"model.d_model", "--d"},
      {"model.encoder_layers", "--train-layers"}};
  try {
    const config::RunConfig train = study_config(model, task, o);
    config::RunConfig score = train;
    const int64_t longest = *std::max_element(o.eval_lengths.begin(), o.eval_lengths.end());
    score.data.min_len = score.data.max_len = std::max(longest, train.data.max_len);
    score.data.train_size = score.data.valid_size = 0;
    score.data.test_size = o.eval_examples;
    run::check_data_memory(train);
    run::check_data_memory(score);
  } catch (const Error& e) {
    std::string what = e.what();
    for (const auto& [key, option] : kOptions)
      if (what.rfind(key + ":", 0) == 0) what = option + what.substr(key.size());
    throw Error("layers (" + model + " on " + task + "): " + what);
  }
}

// length_study.hpp's path profile of model's encoder on fresh sources of profile_length symbols.
std::vector<double> encoder_profile(nn::EncoderDecoder& model, const LengthStudyOptions& o,
                                    uint64_t seed) {
  const int64_t B = o.profile_batch, n = o.profile_length;
  const data::Dataset ds =
      data::make_task(data::SymbolTask::copy, {o.vocab, n, n}, B, data::substream_seed(seed, 7));
  std::vector<data::Ids> srcs;
  for (const auto& e : ds.examples) srcs.push_back(e.src);
  const auto [src, valid] = run::pad_sources(srcs);
  Var x;  // the embeddings as a leaf of the tape
  nn::Hooks hooks;
  hooks.add("encoder.embed", [&x](const Var& e) {
    x = Var(e.data().clone(), true);
    return x;
  });
  Var memory;
  {
    const nn::HookScope scope(hooks);
    memory = model.encode(src, valid);  // (B, n, d_mem)
  }
  Generator g(seed + 11);
  const std::vector<double> by_position = last_position_profile(memory, x, g);
  model.zero_grad();
  return {by_position.rbegin(), by_position.rend()};  // index: distance n - 1 - i
}

// Trains model on cfg's training split for o.steps steps; returns the mean loss of the last
// tenth of the steps.
double train_model(nn::EncoderDecoder& model, config::RunConfig cfg, const data::DataSplits& data,
                   const LengthStudyOptions& o) {
  cfg.optim.schedule = optim::fill_schedule(cfg.optim.schedule, 0, o.steps);
  auto opt = optim::make_optimizer(cfg.optim.optim, model.named_parameters());
  data::LoaderOptions lopt = data::loader_options(cfg.data);
  lopt.prefetch = 0;
  data::Loader loader(std::make_shared<const data::Dataset>(data.train), data.framing, lopt,
                      cfg.seed);
  train::Seq2SeqStep fwd(model, loader, {0, 0.0, false});
  train::TrainerOptions to;
  to.total_steps = o.steps;
  to.clip_norm = cfg.optim.clip_norm;
  to.schedule = cfg.optim.schedule;
  train::Trainer trainer(model.parameters(), *opt, fwd.forward_fn(), to);
  std::vector<double> losses;
  train::Callbacks record;
  record.step_end = [&losses](train::Trainer&, const train::StepStats& s) {
    losses.push_back(s.loss);
  };
  trainer.add_hook(record);
  model.train();
  trainer.fit();
  model.eval();
  const size_t tail = std::max<size_t>(1, losses.size() / 10);
  double sum = 0;
  for (size_t i = losses.size() - tail; i < losses.size(); ++i) sum += losses[i];
  return losses.empty() ? 0.0 : sum / static_cast<double>(tail);
}

LengthCurve study_one(const std::string& model_name, const std::string& task,
                      const LengthStudyOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  const config::RunConfig cfg = study_config(model_name, task, o);
  const data::DataSplits data = data::load_data(cfg.data);
  Generator init(cfg.seed);
  std::unique_ptr<nn::EncoderDecoder> model =
      nn::make_encoder_decoder(run::model_config(cfg, data), init);
  LengthCurve c;
  c.model = model_name, c.task = task, c.parameters = model->parameter_count();
  model->eval();
  c.profile_init = encoder_profile(*model, o, o.seed);
  c.final_loss = train_model(*model, cfg, data, o);
  c.profile_trained = encoder_profile(*model, o, o.seed);
  const run::Family& family = run::family_for(cfg.data.task);
  const run::ScoredLength length = [&](int64_t n, int64_t target) {
    return family.scored_output_tokens(cfg, data.framing, n, target);
  };
  const data::SymbolTask kind = data::parse_task(task);
  if (o.models.empty() || o.tasks.empty() || o.eval_lengths.empty())
    throw Error("layers: the length study needs a model, a task and an evaluation length");
  for (int64_t n : o.eval_lengths) {
    const data::Dataset ds = data::make_task(kind, {o.vocab, n, n}, o.eval_examples,
                                             data::substream_seed(o.seed, 100 + uint64_t(n)));
    const run::Metrics m = run::evaluate(*model, ds, data.framing, o.batch, length);
    c.n.push_back(n);
    c.exact_match.push_back(m.exact_match);
  }
  c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

std::vector<std::string> length_study_models() {
  return {"attention", "gru", "lstm", "conv", "gru-no-attention", "bahdanau"};
}

void check_length_study(const LengthStudyOptions& o) {
  const std::vector<std::string> all = length_study_models();
  for (const std::string& m : o.models)
    if (std::find(all.begin(), all.end(), m) == all.end())
      throw Error("layers --train-models: unknown model \"" + m + "\"; valid: " + joined(all));
  for (const std::string& t : o.tasks)
    if (t != "copy" && t != "reverse")
      throw Error("layers --train-tasks: unknown task \"" + t + "\"; valid: copy, reverse");
  if (o.steps < 0 || o.batch < 1 || o.eval_examples < 1 || o.vocab < 2 || o.train_max_len < 1 ||
      o.profile_length < 2 || o.profile_batch < 1)
    throw Error(
        "layers: --train-steps must be >= 0, batch, eval examples and training length >= 1, "
        "profile length >= 2");
  if (o.models.empty() || o.tasks.empty() || o.eval_lengths.empty())
    throw Error("layers: the length study needs a model, a task and an evaluation length");
  for (int64_t n : o.eval_lengths)
    if (n < 1)
      throw Error("layers --eval-lengths: every length must be >= 1, got " + std::to_string(n));
  if (o.d < 2 || o.d % 2 != 0 || o.heads < 1 || o.d % o.heads != 0)
    throw Error(
        "layers: d = " + std::to_string(o.d) +
        " must be even (two directions) and a multiple of heads = " + std::to_string(o.heads));
  if (o.steps > 0)
    for (const std::string& m : o.models)
      for (const std::string& t : o.tasks) check_study_memory(m, t, o);
}

std::vector<LengthCurve> run_length_study(const LengthStudyOptions& o) {
  check_length_study(o);
  std::vector<LengthCurve> out;
  if (o.steps == 0) return out;
  for (const std::string& m : o.models)
    for (const std::string& t : o.tasks) {
      out.push_back(study_one(m, t, o));
      const LengthCurve& c = out.back();
      std::fprintf(stderr, "layers: trained %-16s on %-7s  final loss %.4f  (%.0f s)\n", m.c_str(),
                   t.c_str(), c.final_loss, c.seconds);
    }
  return out;
}

}  // namespace qkv::figures
