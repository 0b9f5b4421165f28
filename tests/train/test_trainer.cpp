// The Trainer (train/trainer.hpp): the order of its hooks, stopping (a hook's should_stop and
// early stopping), non-finite losses, and that its step is exactly the training step qkv train
// took before it existed (a copy of that step is kept here as the reference).
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "autograd/ops.hpp"
#include "core/random.hpp"
#include "core/tensor.hpp"
#include "data/config.hpp"
#include "nn/seq2seq.hpp"
#include "optim/clip.hpp"
#include "optim/optimizers.hpp"
#include "optim/schedule.hpp"
#include "train/seq2seq_step.hpp"
#include "train/trainer.hpp"

using namespace qkv;
using train::StopReason;

namespace {

// A model of the user's own: y = x w, fitted to targets by mean squared error.
struct Regression {
  Tensor x = Tensor(), y = Tensor();
  ag::Var w;
  explicit Regression(uint64_t seed) {
    Generator g(seed);
    x = randn({8, 3}, g);
    y = matmul(x, randn({3, 1}, g));  // an exact fit exists
    w = ag::Var(randn({3, 1}, g), true);
  }
  train::Forward forward() const {
    const ag::Var d = ag::sub(ag::matmul(ag::Var(x), w), ag::Var(y));
    return {ag::mean(ag::mul(d, d)), 8};
  }
};

optim::OptimConfig sgd(double lr) {
  optim::OptimConfig c;
  c.name = qkv::optim::OptimizerKind::sgd;
  c.lr = lr;
  return c;
}

// Records every hook call as a word: b(egin) s(tep begin) e(nd of step) v(alidate) c(heckpoint)
// q (should_stop asked) n(on-finite) E(nd).
struct Recorder : train::Hook {
  std::string log;
  int64_t stop_at = 0;  // should_stop answers true from this step on (0: never)
  void on_train_begin(train::Trainer&) override { log += "b "; }
  void on_step_begin(train::Trainer& t) override { log += cat("s", t.state().step, " "); }
  void on_step_end(train::Trainer&, const train::StepStats& s) override {
    log += cat("e", s.step, " ");
  }
  std::string on_nonfinite(train::Trainer&, const std::string&, bool skipping) override {
    log += skipping ? "n(skip) " : "n(stop) ";
    return "a note";
  }
  void on_validate(train::Trainer& t) override { log += cat("v", t.state().step, " "); }
  void on_checkpoint(train::Trainer& t) override { log += cat("c", t.state().step, " "); }
  bool should_stop(train::Trainer& t) override {
    log += "q ";
    return stop_at > 0 && t.state().step >= stop_at;
  }
  void on_train_end(train::Trainer&, StopReason r) override {
    log += r == StopReason::completed   ? "E(completed)"
           : r == StopReason::requested ? "E(requested)"
                                        : "E(early)";
  }
};

}  // namespace

TEST_CASE("Trainer: hooks are called in the documented order", "[train]") {
  Regression m(1);
  auto opt = optim::make_optimizer(sgd(0.1), std::vector<ag::Var>{m.w});
  train::TrainerOptions o;
  o.total_steps = 3;
  o.eval_every = 2;
  o.checkpoint_every = 3;
  train::Trainer t(
      {m.w}, *opt, [&] { return m.forward(); }, o);
  Recorder r;
  t.add_hook(r);
  CHECK(t.fit() == StopReason::completed);
  // should_stop is asked after each forward and again at the step's end (one process)
  CHECK(r.log == "b s1 q e1 q s2 q e2 v2 q s3 q e3 v3 c3 q E(completed)");
  CHECK(t.state().step == 3);
}

TEST_CASE("Trainer: an unvalidated last step is validated once after the loop", "[train]") {
  Regression m(1);
  auto opt = optim::make_optimizer(sgd(0.1), std::vector<ag::Var>{m.w});
  train::TrainerOptions o;
  o.total_steps = 2;
  o.eval_every = 2;
  train::Trainer t(
      {m.w}, *opt, [&] { return m.forward(); }, o);
  t.state().step = 2;  // a run resumed at its (validated) last step: nothing to do
  Recorder r;
  t.add_hook(r);
  t.fit();
  CHECK(r.log == "b E(completed)");
  // resumed at step 1 with 2 to go, the last step is a validation step: validated in the loop
  t.state().step = 1;
  r.log.clear();
  t.fit();
  CHECK(r.log == "b s2 q e2 v2 q E(completed)");
}

TEST_CASE("Trainer: should_stop ends the run after the step, without a final validation",
          "[train]") {
  Regression m(2);
  auto opt = optim::make_optimizer(sgd(0.1), std::vector<ag::Var>{m.w});
  train::TrainerOptions o;
  o.total_steps = 10;
  o.eval_every = 4;
  train::Trainer t(
      {m.w}, *opt, [&] { return m.forward(); }, o);
  Recorder r;
  r.stop_at = 2;
  t.add_hook(r);
  CHECK(t.fit() == StopReason::requested);
  CHECK(t.state().step == 2);
  CHECK(r.log == "b s1 q e1 q s2 q e2 q E(requested)");
}

TEST_CASE("Trainer: EarlyStopping stops after patience validations without improvement",
          "[train]") {
  Regression m(3);
  auto opt = optim::make_optimizer(sgd(0.1), std::vector<ag::Var>{m.w});
  train::TrainerOptions o;
  o.total_steps = 100;
  o.eval_every = 5;
  train::Trainer t(
      {m.w}, *opt, [&] { return m.forward(); }, o);
  // a validation that never improves after the first
  train::Callbacks validate;
  validate.validate = [](train::Trainer& tr) {
    if (tr.state().step > 5) ++tr.state().evals_since_best;
  };
  train::EarlyStopping early(3);
  StopReason seen = StopReason::completed;
  train::Callbacks end;
  end.train_end = [&](train::Trainer&, StopReason r) { seen = r; };
  t.add_hook(validate);
  t.add_hook(early);
  t.add_hook(end);
  CHECK(t.fit() == StopReason::early_stopping);
  CHECK(seen == StopReason::early_stopping);
  CHECK(t.state().step == 20);  // validations at 10, 15, 20 did not improve
  CHECK(t.state().evals_since_best == 3);
}

TEST_CASE("Trainer: the loss goes down on a model of the user's own", "[train]") {
  Regression m(4);
  auto opt = optim::make_optimizer(sgd(0.05), std::vector<ag::Var>{m.w});
  train::TrainerOptions o;
  o.total_steps = 50;
  train::Trainer t(
      {m.w}, *opt, [&] { return m.forward(); }, o);
  std::vector<double> losses;
  train::Callbacks log;
  log.step_end = [&](train::Trainer&, const train::StepStats& s) {
    losses.push_back(s.loss);
    CHECK(s.lr == 0.05);
    CHECK(s.grad_norm > 0);
    CHECK(s.tokens == 8);
  };
  t.add_hook(log);
  t.fit();
  REQUIRE(losses.size() == 50);
  CHECK(losses.back() < 0.7 * losses.front());
}

TEST_CASE("Trainer: a non-finite loss is skipped or stops the run with the hooks' notes",
          "[train]") {
  Regression m(5);
  auto opt = optim::make_optimizer(sgd(0.1), std::vector<ag::Var>{m.w});
  int calls = 0;
  auto forward = [&] {
    train::Forward f = m.forward();
    if (++calls == 2) f.loss = ag::mul(f.loss, std::numeric_limits<double>::quiet_NaN());
    return f;
  };
  train::TrainerOptions o;
  o.total_steps = 3;
  SECTION("skipped") {
    o.skip_nonfinite = true;
    train::Trainer t({m.w}, *opt, forward, o);
    Recorder r;
    t.add_hook(r);
    t.fit();
    CHECK(r.log == "b s1 q e1 q s2 q n(skip) s3 q e3 v3 q E(completed)");
    CHECK(std::isfinite(to_vector<float>(m.w.data())[0]));
  }
  SECTION("stopped") {
    train::Trainer t({m.w}, *opt, forward, o);
    Recorder r;
    t.add_hook(r);
    CHECK_THROWS_WITH(t.fit(), "train: step 2: loss is nan; stopping (a note)");
  }
}

namespace {

// A small copy-task Seq2Seq with dropout, and its loader.
struct CopySetup {
  data::DataSplits data;
  std::unique_ptr<nn::Seq2Seq> model;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<data::Loader> loader;
  CopySetup() {
    data::DataConfig dc;
    dc.train_size = 64;
    dc.valid_size = dc.test_size = 4;
    dc.max_len = 6;
    dc.batch_size = 8;
    data = data::load_data(dc);
    nn::ModelConfig mc;
    mc.src_vocab = data.src_vocab.size();
    mc.tgt_vocab = data.tgt_vocab.size();
    mc.d_model = 16, mc.heads = 2, mc.d_ff = 32, mc.encoder_layers = mc.decoder_layers = 1;
    mc.dropout = 0.1;
    Generator g(7);
    model = std::make_unique<nn::Seq2Seq>(mc, g);
    optim::OptimConfig oc;
    oc.name = qkv::optim::OptimizerKind::adam;
    oc.lr = 1e-3;
    opt = optim::make_optimizer(oc, model->named_parameters());
    data::LoaderOptions lo = data::loader_options(dc);
    lo.prefetch = 0;
    loader = std::make_unique<data::Loader>(std::make_shared<const data::Dataset>(data.train),
                                            data.framing, lo, 7);
    model->train();
  }
};

optim::ScheduleConfig warmup_schedule() {
  optim::ScheduleConfig s;
  s.name = qkv::optim::ScheduleKind::warmup;
  s.lr = 1e-3;
  s.warmup = 3;
  return s;
}

}  // namespace

TEST_CASE("Trainer: its step equals qkv train's former step bit for bit", "[train]") {
  const double clip = 0.5, smoothing = 0.1;
  const int steps = 4;
  // The reference: the step as apps/train.cpp wrote it before the Trainer.
  CopySetup a;
  std::vector<double> ref_loss, ref_norm;
  const std::vector<ag::Var> pa = a.model->parameters();
  for (int s = 0; s < steps; ++s) {
    const data::Batch b = a.loader->next();
    const ag::Var logits = a.model->forward(b.src, b.tgt_in, b.src_mask, b.tgt_mask);
    const ag::Var loss = ag::cross_entropy(ag::reshape(logits, {-1, logits.size(-1)}),
                                           b.tgt_out.flatten(), 0, smoothing);
    ref_loss.push_back(loss.item());
    loss.backward();
    ref_norm.push_back(optim::clip_grad_norm(pa, clip));
    optim::apply_schedule(*a.opt, warmup_schedule());
    a.opt->step();
    a.opt->zero_grad();
  }
  // The Trainer
  CopySetup b;
  train::Seq2SeqStep fwd(*b.model, *b.loader, {0, smoothing, false});
  train::TrainerOptions o;
  o.total_steps = steps;
  o.clip_norm = clip;
  o.schedule = warmup_schedule();
  train::Trainer t(b.model->parameters(), *b.opt, fwd.forward_fn(), o);
  t.set_loader(b.loader.get());
  std::vector<double> loss, norm;
  train::Callbacks rec;
  rec.step_end = [&](train::Trainer&, const train::StepStats& s) {
    loss.push_back(s.loss);
    norm.push_back(s.grad_norm);
  };
  t.add_hook(rec);
  t.fit();
  CHECK(loss == ref_loss);
  CHECK(norm == ref_norm);
  const std::vector<ag::Var> pb = b.model->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    CHECK(to_vector<float>(pa[i].data()) == to_vector<float>(pb[i].data()));
  CHECK(t.state().loader == b.loader->state());
  CHECK(t.state().epoch == b.loader->state().epoch);
}

namespace {

// Serves fixed batches, in order, over and over.
struct FixedBatches : data::BatchSource {
  std::vector<data::Batch> batches;
  size_t at = 0;
  data::Batch next() override { return batches[at++ % batches.size()]; }
  data::LoaderState state() const override { return {0, static_cast<int64_t>(at), 0, 0}; }
  void restore(const data::LoaderState& s) override { at = static_cast<size_t>(s.index); }
};

// A copy-task Seq2Seq without dropout (the micro-batches and the big batch must see the same
// function) and SGD with momentum (Adam would blow the rounding of near-zero gradients up to
// a whole step).
struct AccumSetup {
  data::DataSplits data;
  std::unique_ptr<nn::Seq2Seq> model;
  std::unique_ptr<optim::Optimizer> opt;
  AccumSetup() {
    data::DataConfig dc;
    dc.train_size = 48;
    dc.valid_size = dc.test_size = 4;
    dc.min_len = 2;
    dc.max_len = 9;  // micro-batches of different lengths and token counts
    data = data::load_data(dc);
    nn::ModelConfig mc;
    mc.src_vocab = data.src_vocab.size();
    mc.tgt_vocab = data.tgt_vocab.size();
    mc.d_model = 16, mc.heads = 2, mc.d_ff = 32, mc.encoder_layers = mc.decoder_layers = 1;
    mc.dropout = 0;
    Generator g(11);
    model = std::make_unique<nn::Seq2Seq>(mc, g);
    optim::OptimConfig oc;
    oc.name = qkv::optim::OptimizerKind::sgd;
    oc.lr = 0.3;
    oc.momentum = 0.9;
    opt = optim::make_optimizer(oc, model->named_parameters());
    model->train();
  }
};

struct StepRecord {
  std::vector<double> loss, norm, lr;
  std::vector<int64_t> steps, tokens;
};

StepRecord fit_fixed(AccumSetup& s, FixedBatches& src, int64_t accum, int64_t steps) {
  train::Seq2SeqStep fwd(*s.model, src, {0, 0.1, false});
  train::TrainerOptions o;
  o.total_steps = steps;
  o.clip_norm = 0.5;  // clipping sees the step's whole gradient
  o.schedule = warmup_schedule();
  o.schedule->lr = 0.3;
  o.grad_accum = accum;
  train::Trainer t(s.model->parameters(), *s.opt, fwd.forward_fn(), o);
  StepRecord r;
  train::Callbacks rec;
  rec.step_end = [&](train::Trainer&, const train::StepStats& st) {
    r.steps.push_back(st.step);
    r.loss.push_back(st.loss);
    r.norm.push_back(st.grad_norm);
    r.lr.push_back(st.lr);
    r.tokens.push_back(st.tokens);
  };
  t.add_hook(rec);
  t.fit();
  return r;
}

}  // namespace

TEST_CASE("Trainer: grad_accum K micro-batches equal one batch of their rows, to rounding",
          "[train]") {
  const int64_t k = 3, rows = 4, steps = 3;
  AccumSetup small, big;
  FixedBatches micro, whole;
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int64_t> all;
    for (int64_t i = 0; i < k; ++i) {
      std::vector<int64_t> idx;
      for (int64_t r = 0; r < rows; ++r) idx.push_back((s * k + i) * rows + r);
      micro.batches.push_back(data::make_batch(small.data.train, idx, small.data.framing));
      all.insert(all.end(), idx.begin(), idx.end());
    }
    whole.batches.push_back(data::make_batch(big.data.train, all, big.data.framing));
  }
  // the micro-batches really differ in tokens (else any weighting would pass)
  REQUIRE(micro.batches[0].tgt_tokens != micro.batches[1].tgt_tokens);
  const StepRecord a = fit_fixed(small, micro, k, steps);
  const StepRecord b = fit_fixed(big, whole, 1, steps);
  CHECK(micro.at == static_cast<size_t>(k * steps));  // K forwards per optimizer step
  CHECK(a.steps == std::vector<int64_t>{1, 2, 3});    // one record per optimizer step
  CHECK(a.lr == b.lr);
  CHECK(a.tokens == b.tokens);
  for (int64_t s = 0; s < steps; ++s) {
    CHECK(a.loss[s] == Approx(b.loss[s]).epsilon(1e-5));
    CHECK(a.norm[s] == Approx(b.norm[s]).epsilon(1e-4));
  }
  CHECK(a.norm[0] > 0.5);  // clipping was active
  const auto pa = small.model->parameters(), pb = big.model->parameters();
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    const std::vector<float> x = to_vector<float>(pa[i].data()), y = to_vector<float>(pb[i].data());
    for (size_t j = 0; j < x.size(); ++j) worst = std::max(worst, std::abs(double(x[j]) - y[j]));
  }
  CHECK(worst < 1e-6);
  // and the parameters did move: equality is not that of two untrained models
  AccumSetup fresh;
  CHECK(to_vector<float>(fresh.model->parameters()[0].data()) != to_vector<float>(pa[0].data()));
}

TEST_CASE("Trainer: grad_accum weighs a forward without token counts equally", "[train]") {
  // Two half-batches of the regression, each a mean: accumulated, they are the full mean.
  Regression m(3);
  int calls = 0;
  auto half = [&] {
    const int64_t from = (calls++ % 2) * 4;
    const Tensor x = m.x.narrow(0, from, 4).contiguous(), y = m.y.narrow(0, from, 4).contiguous();
    const ag::Var d = ag::sub(ag::matmul(ag::Var(x), m.w), ag::Var(y));
    return train::Forward{ag::mean(ag::mul(d, d)), 4};
  };
  auto opt = optim::make_optimizer(sgd(0.05), std::vector<ag::Var>{m.w});
  train::TrainerOptions o;
  o.total_steps = 1;
  o.grad_accum = 2;
  train::Trainer t({m.w}, *opt, half, o);
  const std::vector<float> before = to_vector<float>(m.w.data());
  double loss = 0;
  train::Callbacks rec;
  rec.step_end = [&](train::Trainer&, const train::StepStats& s) { loss = s.loss; };
  t.add_hook(rec);
  t.fit();
  CHECK(calls == 2);
  // the reference: one full-batch step by hand
  Regression ref(3);
  const train::Forward f = ref.forward();
  CHECK(loss == Approx(f.loss.item()).epsilon(1e-6));
  f.loss.backward();
  const std::vector<float> g = to_vector<float>(ref.w.grad());
  const std::vector<float> after = to_vector<float>(m.w.data());
  for (size_t i = 0; i < g.size(); ++i)
    CHECK(after[i] == Approx(before[i] - 0.05 * g[i]).epsilon(1e-5));
  CHECK_THROWS_WITH(
      [&] {
        train::TrainerOptions bad;
        bad.grad_accum = 0;
        train::Trainer x({m.w}, *opt, half, bad);
      }(),
      Catch::Contains("train.grad_accum: must be >= 1"));
}
