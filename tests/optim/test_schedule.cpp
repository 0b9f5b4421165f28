// Each schedule at chosen steps against its closed form, worked out by hand.
#include <catch2/catch.hpp>

#include "optim/optimizers.hpp"
#include "optim/schedule.hpp"

using namespace qkv;
using namespace qkv::optim;
using Catch::Matchers::Contains;

// A parameter: a leaf that requires grad.
static Var leaf(Tensor t) { return Var(std::move(t), true); }

namespace {
ScheduleConfig sched(const std::string& name, double lr, int64_t warmup) {
  ScheduleConfig c;
  c.name = qkv::parse_name<ScheduleKind>(name, "optim.schedule"), c.lr = lr, c.warmup = warmup;
  return c;
}
double at(const ScheduleConfig& c, int64_t step) {
  c.validate();
  return schedule_lr(c, step);
}
}  // namespace

TEST_CASE("constant schedule", "[optim][schedule]") {
  const ScheduleConfig c = sched("constant", 3e-4, 0);
  CHECK(at(c, 0) == 3e-4);
  CHECK(at(c, 123456) == 3e-4);
}

TEST_CASE("linear warmup then constant", "[optim][schedule]") {
  const ScheduleConfig c = sched("warmup", 1e-3, 100);
  CHECK(at(c, 0) == 0.0);
  CHECK(at(c, 25) == Approx(2.5e-4).epsilon(1e-14));
  CHECK(at(c, 50) == Approx(5e-4).epsilon(1e-14));
  CHECK(at(c, 99) == Approx(9.9e-4).epsilon(1e-14));
  CHECK(at(c, 100) == 1e-3);
  CHECK(at(c, 5000) == 1e-3);
  CHECK(at(sched("warmup", 1e-3, 0), 0) == 1e-3);  // no warmup
}

TEST_CASE("noam: factor * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)", "[optim][schedule]") {
  ScheduleConfig c = sched("noam", 123.0, 4000);  // lr is not used by noam
  c.d_model = 512, c.factor = 1.0;
  CHECK(at(c, 0) == Approx(1.746928107421711e-07).epsilon(1e-13));  // step 0 is treated as 1
  CHECK(at(c, 0) == at(c, 1));
  CHECK(at(c, 100) == Approx(1.746928107421711e-05).epsilon(1e-13));
  CHECK(at(c, 4000) == Approx(6.987712429686843e-4).epsilon(1e-13));  // the peak
  CHECK(at(c, 16000) == Approx(3.4938562148434214e-4).epsilon(1e-13));
  CHECK(at(c, 3999) < at(c, 4000));
  CHECK(at(c, 4001) < at(c, 4000));
  c.factor = 2.0;
  CHECK(at(c, 4000) == Approx(2 * 6.987712429686843e-4).epsilon(1e-13));
}

TEST_CASE("warmup + cosine decay to min_lr", "[optim][schedule]") {
  ScheduleConfig c = sched("cosine", 1e-3, 10);
  c.total_steps = 110, c.min_lr = 1e-4;
  CHECK(at(c, 0) == 0.0);
  CHECK(at(c, 5) == Approx(5e-4).epsilon(1e-14));
  CHECK(at(c, 10) == Approx(1e-3).epsilon(1e-14));
  CHECK(at(c, 35) == Approx(8.681980515339464e-4).epsilon(1e-13));  // a quarter of the way
  CHECK(at(c, 60) == Approx(5.5e-4).epsilon(1e-13));                // half way
  CHECK(at(c, 110) == Approx(1e-4).epsilon(1e-13));
  CHECK(at(c, 1000) == Approx(1e-4).epsilon(1e-13));  // stays at min_lr after total_steps
}

TEST_CASE("warmup + inverse square root", "[optim][schedule]") {
  const ScheduleConfig c = sched("inverse_sqrt", 1e-3, 100);
  CHECK(at(c, 0) == 0.0);
  CHECK(at(c, 50) == Approx(5e-4).epsilon(1e-14));
  CHECK(at(c, 100) == Approx(1e-3).epsilon(1e-14));
  CHECK(at(c, 400) == Approx(5e-4).epsilon(1e-14));
  CHECK(at(c, 10000) == Approx(1e-4).epsilon(1e-14));
  const ScheduleConfig none = sched("inverse_sqrt", 1e-3, 0);
  CHECK(at(none, 0) == 1e-3);
  CHECK(at(none, 4) == Approx(5e-4).epsilon(1e-14));
}

TEST_CASE("wsd: linear warmup, stable, linear decay to min_lr at its breakpoints",
          "[optim][schedule]") {
  ScheduleConfig c = sched("wsd", 1e-3, 100);
  c.total_steps = 1000;
  c.decay_frac = 0.25;  // the decay: steps 750 .. 1000
  c.min_lr = 1e-4;
  CHECK(c.decay_steps() == 250);
  CHECK(at(c, 0) == 0.0);
  CHECK(at(c, 50) == Approx(5e-4).epsilon(1e-14));
  CHECK(at(c, 100) == 1e-3);  // the end of warmup
  CHECK(at(c, 500) == 1e-3);
  CHECK(at(c, 750) == 1e-3);  // the decay starts here, continuous
  CHECK(at(c, 751) == Approx(1e-4 + 9e-4 * 249.0 / 250.0).epsilon(1e-14));
  CHECK(at(c, 875) == Approx(1e-4 + 9e-4 * 0.5).epsilon(1e-14));  // half-way: the mean
  CHECK(at(c, 999) == Approx(1e-4 + 9e-4 / 250.0).epsilon(1e-14));
  CHECK(at(c, 1000) == 1e-4);  // min_lr at total_steps, and after
  CHECK(at(c, 5000) == 1e-4);
  // the default: to 0 over the last 20%, no warmup
  ScheduleConfig d = sched("wsd", 2e-3, 0);
  d.total_steps = 50;
  CHECK(d.decay_steps() == 10);
  CHECK(at(d, 0) == 2e-3);
  CHECK(at(d, 40) == 2e-3);
  CHECK(at(d, 45) == Approx(1e-3).epsilon(1e-14));
  CHECK(at(d, 50) == 0.0);
  // the run's length fills total_steps, as for cosine
  const ScheduleConfig filled = fill_schedule(sched("wsd", 1e-3, 10), 0, 200);
  CHECK(filled.total_steps == 200);
  CHECK(at(filled, 160) == 1e-3);
  CHECK(at(filled, 180) == Approx(5e-4).epsilon(1e-14));
  // bad values name the key
  ScheduleConfig bad = c;
  bad.decay_frac = 0;
  CHECK_THROWS_WITH(bad.validate(), Contains("optim.decay_frac: must be in (0, 1], got 0"));
  bad.decay_frac = 1.5;
  CHECK_THROWS_WITH(bad.validate(), Contains("optim.decay_frac"));
  bad = c;
  bad.warmup = 800;  // 800 warmup + 250 decay > 1000
  CHECK_THROWS_WITH(bad.validate(),
                    Contains("optim.warmup: wsd: 800 warmup steps and 250 decay steps"));
  CHECK_THROWS_WITH(fill_schedule(sched("wsd", 1e-3, 90), 0, 100), Contains("optim.warmup: wsd"));
  bad = c;
  bad.min_lr = 2e-3;
  CHECK_THROWS_WITH(bad.validate(), Contains("optim.min_lr"));
  validate_unfilled(sched("wsd", 1e-3, 500));  // the length is the run's: not judged yet
}

TEST_CASE("schedule validation names the bad key", "[optim][schedule]") {
  CHECK_THROWS_WITH(sched("linear_decay", 1e-3, 0).validate(),
                    Contains("optim.schedule") && Contains("linear_decay"));
  CHECK_THROWS_WITH(sched("warmup", 1e-3, -1).validate(), Contains("optim.warmup"));
  CHECK_THROWS_WITH(sched("warmup", -1e-3, 10).validate(), Contains("optim.lr"));
  ScheduleConfig n = sched("noam", 1, 0);
  n.d_model = 512;
  CHECK_THROWS_WITH(n.validate(), Contains("optim.warmup"));
  n.warmup = 10, n.d_model = 0;
  CHECK_THROWS_WITH(n.validate(), Contains("optim.d_model"));
  n.d_model = 64, n.factor = 0;
  CHECK_THROWS_WITH(n.validate(), Contains("optim.factor"));
  ScheduleConfig c = sched("cosine", 1e-3, 100);
  c.total_steps = 100;
  CHECK_THROWS_WITH(c.validate(), Contains("optim.total_steps"));
  c.total_steps = 200, c.min_lr = 2e-3;
  CHECK_THROWS_WITH(c.validate(), Contains("optim.min_lr"));
  CHECK_THROWS_AS(schedule_lr(sched("constant", 1e-3, 0), -1), Error);
}

TEST_CASE("apply_schedule follows the optimizer's step count", "[optim][schedule]") {
  Var p = leaf(zeros({3}));
  SGD opt(NamedParams{{"p", p}}, SGDOptions{});
  const ScheduleConfig c = sched("warmup", 0.1, 10);
  for (int t = 0; t < 4; ++t) {
    CHECK(apply_schedule(opt, c) == Approx(0.1 * t / 10).epsilon(1e-14));
    CHECK(opt.lr() == Approx(0.1 * t / 10).epsilon(1e-14));
    p.grad() = ones({3});
    opt.step();
  }
  CHECK(opt.steps() == 4);
}
