// The [optim] section, read by the config's field visitor from optim/'s key list: values,
// defaults, the effective config reading back, and errors that name the bad key.
#include <catch2/catch.hpp>

#include "config/config.hpp"

using namespace qkv;
using namespace qkv::config;
using Catch::Matchers::Contains;

namespace {
optim::OptimSection optim_of(const std::string& toml) {
  return config_from_toml(parse_config("[optim]\n" + toml, "test.toml")).optim;
}
std::string err(const std::string& toml) {
  try {
    optim_of(toml);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}
}  // namespace

TEST_CASE("config: the [optim] section", "[optim][config]") {
  const optim::OptimSection s = optim_of(R"(
    name = "adamw"
    lr = 0.002
    betas = [0.9, 0.98]
    eps = 1e-9
    weight_decay = 0.01
    amsgrad = true
    no_decay_1d = false
    no_decay = ["bias", "norm"]
    schedule = "noam"
    warmup = 4000
    factor = 2.0
    d_model = 256
    clip_norm = 1.0
  )");
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
}

TEST_CASE("config: an empty [optim] section gives the defaults", "[optim][config]") {
  const optim::OptimSection s = optim_of("");
  CHECK(qkv::name_of(s.optim.name) == "adamw");
  CHECK(s.optim.lr == 1e-3);
  CHECK(qkv::name_of(s.schedule.name) == "constant");
  CHECK(s.schedule.lr == 1e-3);
  // The effective config writes every key, alphabetically, and reads back to the same section.
  const RunConfig c = config_from_toml(parse_config("[optim]\nlr = 0.01\n", "t.toml"));
  const std::string toml = effective_toml(c);
  const size_t at = toml.find("[optim]\namsgrad = false\nbetas = [ 0.9");
  CHECK(at != std::string::npos);
  CHECK(effective_toml(config_from_toml(parse_config(toml, "effective.toml"))) == toml);
}

TEST_CASE("config: bad [optim] keys and values are errors naming the key", "[optim][config]") {
  CHECK_THAT(err("learning_rate = 0.1"),
             Contains("optim.learning_rate") && Contains("unknown key"));
  CHECK_THAT(err("lr = -0.1"), Contains("optim.lr") && Contains(">= 0"));
  CHECK_THAT(err("lr = \"fast\""), Contains("optim.lr") && Contains("number"));
  CHECK_THAT(err("name = \"lamb\""), Contains("optim.name") && Contains("lamb"));
  CHECK_THAT(err("betas = [0.9]"), Contains("optim.betas"));
  CHECK_THAT(err("betas = [0.9, \"x\"]"), Contains("optim.betas"));
  CHECK_THAT(err("betas = [0.9, 1.0]"), Contains("optim.betas") && Contains("beta2"));
  CHECK_THAT(err("eps = -1"), Contains("optim.eps"));
  CHECK_THAT(err("weight_decay = -0.01"), Contains("optim.weight_decay"));
  CHECK_THAT(err("nesterov = 1"), Contains("optim.nesterov") && Contains("true or false"));
  CHECK_THAT(err("name = \"sgd\"\nnesterov = true"), Contains("optim.nesterov"));
  CHECK_THAT(err("name = \"adam\"\nmomentum = 0.9"), Contains("optim.momentum"));
  CHECK_THAT(err("name = \"sgd\"\namsgrad = true"), Contains("optim.amsgrad"));
  CHECK_THAT(err("no_decay = \"bias\""), Contains("optim.no_decay"));
  CHECK_THAT(err("no_decay = [1]"), Contains("optim.no_decay"));
  CHECK_THAT(err("no_decay = [\"\"]"), Contains("optim.no_decay"));
  CHECK_THAT(err("schedule = \"step\""), Contains("optim.schedule") && Contains("'step'"));
  // an integer key takes TOML integers only, as every section's integer keys do
  CHECK_THAT(err("schedule = \"warmup\"\nwarmup = 10.5"),
             Contains("optim.warmup") && Contains("integer"));
  CHECK_THAT(err("schedule = \"warmup\"\nwarmup = 100.0"),
             Contains("optim.warmup") && Contains("integer"));
  CHECK_THAT(err("schedule = \"noam\"\nwarmup = 4000\nd_model = -8"), Contains("optim.d_model"));
  CHECK_THAT(err("schedule = \"cosine\"\nwarmup = 10\ntotal_steps = 5"),
             Contains("optim.total_steps"));
  CHECK_THAT(err("clip_norm = -1.0"), Contains("optim.clip_norm"));
  CHECK_THAT(err("clip_value = -1.0"), Contains("optim.clip_value"));
  CHECK_THROWS_WITH(config_from_toml(parse_config("optim = 3\n", "t.toml")),
                    Contains("optim") && Contains("section"));
  CHECK_THAT(err("name = \"muon\"\nmuon_momentum = 1.0"), Contains("optim.muon_momentum"));
  CHECK_THAT(err("name = \"muon\"\nmuon_lr = -0.02"), Contains("optim.muon_lr"));
  CHECK_THAT(err("name = \"muon\"\nmuon_lr = \"high\""),
             Contains("optim.muon_lr") && Contains("number"));
  CHECK_THAT(err("name = \"muon\"\nlr = 0.0"), Contains("optim.lr"));
  CHECK_THAT(err("name = \"muon\"\nmomentum = 0.9"), Contains("muon_momentum"));
  CHECK_THAT(err("name = \"muon\"\nschedule = \"noam\"\nwarmup = 400"),
             Contains("optim.schedule") && Contains("noam"));
}

TEST_CASE("config: muon's keys read, write back and default", "[optim][config]") {
  const optim::OptimSection d = optim_of("name = \"muon\"");
  CHECK(qkv::name_of(d.optim.name) == "muon");
  CHECK(d.optim.muon_lr == 0.02);
  CHECK(d.optim.muon_momentum == 0.95);
  const RunConfig c = config_from_toml(parse_config(
      "[optim]\nname = \"muon\"\nmuon_lr = 0.05\nmuon_momentum = 0.9\nschedule = \"wsd\"\n",
      "t.toml"));
  CHECK(c.optim.optim.muon_lr == 0.05);
  CHECK(c.optim.optim.muon_momentum == 0.9);
  // written between momentum and name, alphabetically, and read back bit for bit
  const std::string toml = effective_toml(c);
  CHECK(toml.find("momentum = 0.0\nmuon_lr = ") != std::string::npos);
  const RunConfig back = config_from_toml(parse_config(toml, "effective.toml"));
  CHECK(back.optim.optim.muon_lr == 0.05);
  CHECK(back.optim.optim.muon_momentum == 0.9);
  CHECK(effective_toml(back) == toml);
}

TEST_CASE("config: noam's d_model comes from [model] when left out", "[optim][config]") {
  const RunConfig c = config_from_toml(parse_config(
      "[model]\nd_model = 48\nheads = 4\n[optim]\nschedule = \"noam\"\nwarmup = 40\n", "t.toml"));
  CHECK(c.optim.schedule.d_model == 48);
  // cosine's total_steps stays 0 in the config: the run fills it with its length
  const RunConfig cos =
      config_from_toml(parse_config("[optim]\nschedule = \"cosine\"\nwarmup = 10\n", "t.toml"));
  CHECK(cos.optim.schedule.total_steps == 0);
  CHECK_THROWS_WITH(cos.optim.schedule.validate(), Contains("optim.total_steps"));
}
