// make_optimizer: the optimizer an OptimConfig names, with its learning rate and weight decays.
// (The [optim] section's reading is tested with the rest of the config, tests/config.)
#include <catch2/catch.hpp>

#include "optim/config.hpp"

using namespace qkv;
using namespace qkv::optim;
using Catch::Matchers::Contains;

// A parameter: a leaf that requires grad.
static Var leaf(Tensor t) { return Var(std::move(t), true); }

TEST_CASE("make_optimizer builds what the config names", "[optim][config]") {
  const NamedParams ps{{"w", leaf(zeros({4, 4}))}, {"b", leaf(zeros({4}))}};
  for (const OptimizerKind kind : {OptimizerKind::sgd, OptimizerKind::adam, OptimizerKind::adamw}) {
    OptimConfig c;
    c.name = kind, c.lr = 0.5, c.weight_decay = 0.1;
    auto opt = make_optimizer(c, ps);
    CHECK(std::string(opt->name()) == qkv::name_of(kind));
    CHECK(opt->lr() == 0.5);
    CHECK(opt->param_weight_decays() == std::vector<double>{0.1, 0.0});
  }
  // muon: the block matrix (orthogonalized) first, then the rest (AdamW), each with its decay
  OptimConfig m;
  m.name = OptimizerKind::muon, m.lr = 0.5, m.weight_decay = 0.1;
  const NamedParams block{{"b", leaf(zeros({4}))}, {"layers.0.w.weight", leaf(zeros({4, 4}))}};
  auto muon = make_optimizer(m, block);
  CHECK(std::string(muon->name()) == "muon");
  CHECK(muon->lr() == 0.5);
  CHECK(muon->param_names() == std::vector<std::string>{"layers.0.w.weight", "b"});
  CHECK(muon->param_weight_decays() == std::vector<double>{0.1, 0.0});
  OptimConfig bad;
  bad.lr = -1;
  CHECK_THROWS_WITH(make_optimizer(bad, ps), Contains("optim.lr"));
  OptimSection s;
  s.clip_norm = -1;
  CHECK_THROWS_WITH(s.validate(), Contains("optim.clip_norm"));
}
