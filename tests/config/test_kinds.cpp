// The kinds a config chooses among: every names table reads back what it writes, the config
// reader takes each name of every table and the effective config prints it back by name.
#include <catch2/catch.hpp>

#include "config/config.hpp"
#include "config/document.hpp"

using namespace qkv;
using namespace qkv::config;

namespace {

template <NamedEnum E>
void check_table(const char* what) {
  INFO(what);
  const auto table = names_table<E>();
  REQUIRE(!table.empty());
  for (const EnumName<E>& n : table) {
    CHECK(find_name<E>(n.name) == n.value);
    CHECK(find_name<E>(name_of(n.value)) == n.value);  // an alias prints as its canonical name
  }
  CHECK_FALSE(find_name<E>("no such kind").has_value());
  CHECK_THROWS_WITH(parse_name<E>("no such kind", "some.key"),
                    Catch::StartsWith("some.key: must be ") &&
                        Catch::Contains(std::string(table[0].name)) &&
                        Catch::EndsWith(", got 'no such kind'"));
}

// Sets key to each of E's names through the config reader, then reads the effective config
// back: the value survives, printed by its canonical name.
template <NamedEnum E>
void check_reader(const std::string& section, const std::string& key, const std::string& extra) {
  for (const EnumName<E>& n : names_table<E>()) {
    INFO(section << "." << key << " = " << n.name);
    const std::string text =
        extra + "[" + section + "]\n" + key + " = \"" + std::string(n.name) + "\"\n";
    RunConfig c;
    try {
      c = config_from_toml(parse_config(text, "kinds.toml"));
    } catch (const Error& e) {
      // a kind that needs other keys (validation) is still parsed: the error is not about it
      CHECK_THAT(std::string(e.what()), !Catch::Contains(section + "." + key + ": must be"));
      continue;
    }
    const std::string written = effective_toml(c);
    CHECK_THAT(written, Catch::Contains(key + " = \"" + std::string(name_of(n.value)) + "\""));
    CHECK(effective_toml(config_from_toml(parse_config(written, ""))) == written);
  }
}

}  // namespace

TEST_CASE("kinds: every names table reads back what it writes") {
  check_table<nn::ModelKind>("model.kind");
  check_table<nn::PositionKind>("model.position");
  check_table<nn::AttentionKind>("model.attention");
  check_table<nn::Activation>("model.activation");
  check_table<nn::NormKind>("model.norm");
  check_table<nn::EncoderKind>("model.encoder");
  check_table<data::TaskKind>("data.task");
  check_table<data::TokenizerKind>("data.tokenizer");
  check_table<optim::OptimizerKind>("optim.name");
  check_table<optim::ScheduleKind>("optim.schedule");
  check_table<BestMetric>("train.best_metric");
  check_table<Precision>("precision");
  check_table<DType>("dtype");
  CHECK(std::string(dtype_name(DType::b8)) == "bool");
  CHECK(std::string(precision_name(Precision::auto_)) == "auto");
  CHECK_THROWS_WITH(parse_name<DType>("flaot32", "dtype"),
                    "dtype: must be float32, float64, int64 or bool, got 'flaot32'; did you mean "
                    "'float32'?");
  CHECK(names_list<data::TokenizerKind>() == "char, word or sentencepiece");  // no aliases
}

TEST_CASE("kinds: the config reader parses each name once and prints it back") {
  check_reader<nn::PositionKind>("model", "position", "");
  check_reader<nn::AttentionKind>("model", "attention", "");
  check_reader<nn::Activation>("model", "activation", "");
  check_reader<nn::NormKind>("model", "norm", "");
  check_reader<data::TokenizerKind>("data", "tokenizer", "");
  check_reader<BestMetric>("train", "best_metric", "");
  check_reader<optim::ScheduleKind>("optim", "schedule", "");
  check_reader<optim::OptimizerKind>("optim", "name", "");
  CHECK_THROWS_WITH(config_from_toml(parse_config("[model]\nposition = \"rotary\"\n", "k.toml")),
                    Catch::StartsWith("k.toml:2: model.position: must be sinusoidal, learned, "
                                      "relative, rope or none, got 'rotary'"));
  CHECK_THROWS_WITH(config_from_toml(parse_config("[model]\nposition = 3\n", "k.toml")),
                    Catch::Contains("model.position: expected a string"));
  // precision, the one top-level kind: parsed by its table, printed back by name
  for (const EnumName<Precision>& n : names_table<Precision>()) {
    const RunConfig c =
        config_from_toml(parse_config("precision = \"" + std::string(n.name) + "\"\n", "k.toml"));
    CHECK(c.precision == n.value);
    CHECK_THAT(effective_toml(c), Catch::Contains("precision = \"" + std::string(n.name) + "\""));
  }
  CHECK_THROWS_WITH(config_from_toml(parse_config("precision = \"bf61\"\n", "k.toml")),
                    "k.toml:1: precision: must be fp32, bf16 or auto, got 'bf61'; did you mean "
                    "'bf16'?");
}

// model.kind and data.task's family go together by one table: every task with every kind, a
// config read when they fit, else one error naming both and the kind's own tasks.
TEST_CASE("kinds: model.kind fits data.task's family, and a misfit names the kind it needs") {
  const auto kind_for = [](data::TaskKind t) {
    switch (data::family_of(t)) {
      case data::TaskFamily::pairs:
        return nn::ModelKind::encoder_decoder;
      case data::TaskFamily::lm:
        return nn::ModelKind::decoder;
      case data::TaskFamily::classify:
        return nn::ModelKind::encoder;
    }
    return nn::ModelKind::encoder_decoder;
  };
  for (const EnumName<data::TaskKind>& t : names_table<data::TaskKind>())
    for (const EnumName<nn::ModelKind>& k : names_table<nn::ModelKind>()) {
      const std::string text =
          "[model]\nkind = \"" + std::string(k.name) + "\"\n[data]\ntask = \"" +
          std::string(t.name) +
          "\"\npath = \"p\"\nsrc_lang = \"a\"\ntgt_lang = \"b\"\n";  // some need them
      INFO(text);
      if (kind_for(t.value) == k.value) {
        try {
          config_from_toml(parse_config(text, "k.toml"));
        } catch (const Error& e) {  // a task that needs other keys (a path): not about the kind
          CHECK_THAT(std::string(e.what()), !Catch::Contains("model.kind"));
        }
        continue;
      }
      CHECK_THROWS_WITH(
          config_from_toml(parse_config(text, "k.toml")),
          Catch::Contains("model.kind: data.task = \"" + std::string(t.name) +
                          "\" needs model.kind = \"" + std::string(name_of(kind_for(t.value))) +
                          "\", got \"" + std::string(k.name) + "\" (which trains "));
    }
  CHECK_THROWS_WITH(
      config_from_toml(parse_config("[model]\nkind = \"encoder\"\n[data]\ntask = \"copy\"\n", "")),
      Catch::EndsWith("(which trains dyck, parity, majority)"));
}

TEST_CASE("kinds: model.pool is read by its names table") {
  check_reader<nn::Pooling>("model", "pool", "[data]\ntask = \"dyck\"\n");
  const RunConfig c = config_from_toml(parse_config(
      "[model]\nkind = \"encoder\"\npool = \"mean\"\n[data]\ntask = \"parity\"\n", ""));
  CHECK(c.model.pool == nn::Pooling::mean);
  CHECK(c.model.kind == nn::ModelKind::encoder);
}

TEST_CASE("kinds: model.encoder is read by its names table, for an encoder-decoder only") {
  check_reader<nn::EncoderKind>("model", "encoder", "");
  CHECK(config_from_toml(parse_config("[model]\nencoder = \"lstm\"\n", "")).model.encoder ==
        nn::EncoderKind::lstm);
  CHECK_THROWS_WITH(
      config_from_toml(parse_config(
          "[model]\nkind = \"encoder\"\nencoder = \"gru\"\n[data]\ntask = \"dyck\"\n", "")),
      Catch::Contains("model.encoder: \"gru\" is an encoder-decoder's encoder"));
  CHECK_THROWS_WITH(
      config_from_toml(parse_config("[model]\nencoder = \"gru\"\nd_model = 5\nheads = 1\n", "")),
      Catch::Contains("model.d_model: a bidirectional gru encoder"));
  CHECK_THROWS_WITH(
      config_from_toml(parse_config("[model]\nencoder = \"conv\"\nencoder_layers = 0\n", "")),
      Catch::Contains("model.encoder_layers: a conv encoder needs at least 1 layer"));
}
