// The [optim] section: parsing, defaults, and errors that name the bad key.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "optim/config.hpp"

using namespace qkv;
using namespace qkv::optim;
using Catch::Matchers::Contains;
using nlohmann::json;

// A parameter: a leaf that requires grad.
static Var leaf(Tensor t) { return Var(std::move(t), true); }

TEST_CASE("parse the [optim] section", "[optim][config]") {
  const json j = json::parse(R"({
    "name": "adamw", "lr": 0.002, "betas": [0.9, 0.98], "eps": 1e-9, "weight_decay": 0.01,
    "amsgrad": true, "no_decay_1d": false, "no_decay": ["bias", "norm"],
    "schedule": "noam", "warmup": 4000, "factor": 2.0, "d_model": 256, "clip_norm": 1.0
  })");
  const OptimSection s = parse_optim_section(j);
  CHECK(qkv::name_of(s.optim.name) == "adamw");
  CHECK(s.optim.lr == 0.002);
  CHECK(s.optim.beta1 == 0.9);
  CHECK(s.optim.beta2 == 0.98);
  CHECK(s.optim.eps == 1e-9);
  CHECK(s.optim.weight_decay == 0.01);
  CHECK(s.optim.amsgrad);
  CHECK(!s.optim.no_decay_1d);
  CHECK(s.optim.no_decay == std::vector<std::string>{"bias", "norm"});
  CHECK(qkv::name_of(s.schedule.name) == "noam");
  CHECK(s.schedule.lr == 0.002);
  CHECK(s.schedule.warmup == 4000);
  CHECK(s.schedule.factor == 2.0);
  CHECK(s.schedule.d_model == 256);
  CHECK(s.clip_norm == 1.0);
  CHECK(s.clip_value == 0.0);
  // The echo parses back to the same settings.
  CHECK(to_json(parse_optim_section(to_json(s))) == to_json(s));
}

TEST_CASE("an absent or empty [optim] section gives the defaults", "[optim][config]") {
  for (const json& j : {json(), json::object()}) {
    const OptimSection s = parse_optim_section(j);
    CHECK(qkv::name_of(s.optim.name) == "adamw");
    CHECK(s.optim.lr == 1e-3);
    CHECK(qkv::name_of(s.schedule.name) == "constant");
    CHECK(s.schedule.lr == 1e-3);
  }
  // A whole-number float is accepted where an integer is expected (JSON writers do that).
  CHECK(parse_optim_section(json{{"schedule", "warmup"}, {"warmup", 100.0}}).schedule.warmup ==
        100);
}

TEST_CASE("bad [optim] keys and values are errors naming the key", "[optim][config]") {
  auto err = [](const json& j) {
    try {
      parse_optim_section(j);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  CHECK_THAT(err(json{{"learning_rate", 0.1}}),
             Contains("optim.learning_rate") && Contains("unknown key"));
  CHECK_THAT(err(json{{"lr", -0.1}}), Contains("optim.lr") && Contains(">= 0"));
  CHECK_THAT(err(json{{"lr", "fast"}}), Contains("optim.lr") && Contains("number"));
  CHECK_THAT(err(json{{"name", "lamb"}}), Contains("optim.name") && Contains("lamb"));
  CHECK_THAT(err(json{{"betas", {0.9}}}), Contains("optim.betas"));
  CHECK_THAT(err(json{{"betas", {0.9, 1.0}}}), Contains("optim.betas") && Contains("beta2"));
  CHECK_THAT(err(json{{"eps", -1}}), Contains("optim.eps"));
  CHECK_THAT(err(json{{"weight_decay", -0.01}}), Contains("optim.weight_decay"));
  CHECK_THAT(err(json{{"nesterov", 1}}), Contains("optim.nesterov") && Contains("true or false"));
  CHECK_THAT(err(json{{"name", "sgd"}, {"nesterov", true}}), Contains("optim.nesterov"));
  CHECK_THAT(err(json{{"name", "adam"}, {"momentum", 0.9}}), Contains("optim.momentum"));
  CHECK_THAT(err(json{{"name", "sgd"}, {"amsgrad", true}}), Contains("optim.amsgrad"));
  CHECK_THAT(err(json{{"no_decay", "bias"}}), Contains("optim.no_decay"));
  CHECK_THAT(err(json{{"no_decay", {""}}}), Contains("optim.no_decay"));
  CHECK_THAT(err(json{{"schedule", "step"}}), Contains("optim.schedule") && Contains("'step'"));
  CHECK_THAT(err(json{{"schedule", "warmup"}, {"warmup", 10.5}}),
             Contains("optim.warmup") && Contains("integer"));
  CHECK_THAT(err(json{{"schedule", "noam"}, {"warmup", 4000}, {"d_model", -8}}),
             Contains("optim.d_model"));
  // d_model left out: 0, for the app to fill from [model]; the schedule itself still needs it.
  const OptimSection noam = parse_optim_section(json{{"schedule", "noam"}, {"warmup", 4000}});
  CHECK(noam.schedule.d_model == 0);
  CHECK_THROWS_WITH(noam.schedule.validate(), Contains("optim.d_model"));
  CHECK_THROWS_WITH(schedule_lr(noam.schedule, 10), Contains("d_model"));
  // cosine's total_steps left out: 0, for the trainer to fill with the run's length.
  const OptimSection cos = parse_optim_section(json{{"schedule", "cosine"}, {"warmup", 10}});
  CHECK(cos.schedule.total_steps == 0);
  CHECK_THROWS_WITH(cos.schedule.validate(), Contains("optim.total_steps"));
  CHECK_THAT(err(json{{"schedule", "cosine"}, {"warmup", 10}, {"total_steps", 5}}),
             Contains("optim.total_steps"));
  CHECK_THAT(err(json{{"clip_norm", -1.0}}), Contains("optim.clip_norm"));
  CHECK_THAT(err(json::array()), Contains("optim") && Contains("table"));
}

TEST_CASE("make_optimizer builds what the section names", "[optim][config]") {
  const NamedParams ps{{"w", leaf(zeros({4, 4}))}, {"b", leaf(zeros({4}))}};
  for (const std::string name : {"sgd", "adam", "adamw"}) {
    const OptimSection s =
        parse_optim_section(json{{"name", name}, {"lr", 0.5}, {"weight_decay", 0.1}});
    auto opt = make_optimizer(s.optim, ps);
    CHECK(std::string(opt->name()) == name);
    CHECK(opt->lr() == 0.5);
    CHECK(opt->param_weight_decays() == std::vector<double>{0.1, 0.0});
  }
  OptimConfig bad;
  bad.lr = -1;
  CHECK_THROWS_WITH(make_optimizer(bad, ps), Contains("optim.lr"));
}
