// What each family answers so that no consumer asks which family it holds: the length rules
// (run/family.hpp), the named metrics `qkv eval` prints as given (run/scores.hpp), the
// capabilities a run lists and its model's attention sites, known from its config alone.
#include <catch2/catch.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "run/family.hpp"
#include "run/scores.hpp"

using namespace qkv;

namespace {

config::RunConfig config_of(data::TaskKind task, int64_t extra) {
  config::RunConfig c;
  c.data.task = task;
  c.train.max_decode_extra = extra;
  return c;
}

data::Framing framing(bool eos) {
  data::Framing f;
  f.eos = eos ? 2 : -1;
  return f;
}

}  // namespace

TEST_CASE("family rules: an encoder-decoder decodes input + extra, and exact match by its task") {
  const config::RunConfig copy = config_of(data::TaskKind::copy, 10);
  const run::Family& pairs = run::family_for(copy.data.task);
  CHECK(pairs.max_output_tokens(copy, 5) == 15);
  // a synthetic task's decode runs to the longer side + extra: an overrun is seen wrong
  CHECK(pairs.scored_output_tokens(copy, framing(true), 5, 8) == 18);
  CHECK(pairs.scored_output_tokens(copy, framing(true), 8, 5) == 18);
  // without <eos> a decode always runs to its limit: the target's length
  CHECK(pairs.scored_output_tokens(copy, framing(false), 5, 8) == 8);
  // a text task's decodes are its translations (BLEU's too): they never see the reference
  const config::RunConfig tsv = config_of(data::TaskKind::tsv, 10);
  CHECK(pairs.scored_output_tokens(tsv, framing(true), 5, 30) == 15);
  CHECK(pairs.inspection_tokens(copy, 5) == 5 + 15 + 1);  // the source, <bos> and the decode
}

TEST_CASE("family rules: a language model decodes nothing and reads its text alone") {
  const config::RunConfig lm = config_of(data::TaskKind::lm, 10);
  const run::Family& stream = run::family_for(lm.data.task);
  CHECK(stream.inspection_tokens(lm, 7) == 7);
  CHECK(stream.scored_output_tokens(lm, framing(false), 7, 3) == stream.max_output_tokens(lm, 7));
  CHECK(stream.probe_sources(data::DataSplits{}, "valid", 4).empty());
  CHECK_FALSE(stream.reads_source());
}

TEST_CASE("family rules: each family lists its capabilities and its page facts name them") {
  const config::RunConfig copy = config_of(data::TaskKind::copy, 10);
  const config::RunConfig lm = config_of(data::TaskKind::lm, 10);
  nlohmann::json pairs, stream;
  run::family_for(copy.data.task).describe(copy, pairs);
  run::family_for(lm.data.task).describe(lm, stream);
  CHECK(pairs["capabilities"] == nlohmann::json::array({"decode"}));
  CHECK(stream["capabilities"] == nlohmann::json::array({"generate"}));
}

TEST_CASE("scores: a metric's line and the JSON are what the family wrote, in its format") {
  run::Scores s;
  s.metrics = run::loss_metrics(0.5, "target token");
  s.metrics.push_back({.key = "exact_match", .label = "exact match", .value = 0.25});
  s.metrics.push_back({.key = "bleu", .label = "BLEU", .value = 31.5, .decimals = 2});
  s.json["examples"] = 4;
  CHECK(run::metric_line(s.metrics[0]) == "loss            0.5000");
  CHECK(run::metric_line(s.metrics[1]) == "perplexity      1.6487 (per target token)");
  CHECK(run::metric_line(s.metrics[3]) == "BLEU            31.50");
  const nlohmann::json j = run::scores_json(s);
  CHECK(j["exact_match"] == 0.25);
  CHECK(j["examples"].is_number_integer());  // counts stay integers
  CHECK(j.size() == 5);
  CHECK(run::fixed(2.5, 0) == "2");  // printf's rounding: a tie to even
}

namespace {

// Each site's fields, in order: what a comparison of two site lists reads.
std::vector<std::string> described(const std::vector<nn::AttentionSite>& sites) {
  std::vector<std::string> out;
  for (const nn::AttentionSite& s : sites)
    out.push_back(cat(s.name, "|", s.title, "|", s.hook(), "|", s.queries == nn::Side::input, "|",
                      s.keys == nn::Side::input, "|", s.causal, "|", s.layers, "|", s.heads, "|",
                      s.query_axis, "|", s.key_axis, "|", s.key));
  return out;
}

}  // namespace

TEST_CASE("family rules: a model's attention sites are known from its config, without weights") {
  struct Case {
    const char* what;
    data::TaskKind task;
    std::function<void(nn::ModelConfig&)> set;
  };
  const std::vector<Case> cases = {
      {"transformer encoder-decoder", data::TaskKind::copy,
       [](nn::ModelConfig& m) { m.encoder_layers = 3, m.decoder_layers = 1; }},
      {"gru encoder, transformer decoder", data::TaskKind::copy,
       [](nn::ModelConfig& m) { m.encoder = nn::EncoderKind::gru; }},
      {"gru decoder with cross-attention", data::TaskKind::copy,
       [](nn::ModelConfig& m) {
         m.decoder = nn::DecoderKind::gru, m.encoder = nn::EncoderKind::gru, m.decoder_layers = 1;
         m.position = nn::PositionKind::none;
         m.cross_attention = true, m.attention = nn::AttentionKind::additive;
       }},
      {"gru decoder without attention", data::TaskKind::copy,
       [](nn::ModelConfig& m) {
         m.decoder = nn::DecoderKind::gru, m.encoder = nn::EncoderKind::gru, m.decoder_layers = 1;
         m.position = nn::PositionKind::none;
         m.cross_attention = false;
       }},
      {"language model", data::TaskKind::lm,
       [](nn::ModelConfig& m) {
         const nn::ModelConfig small = m;  // the sizes set below, kept
         m = nn::ModelConfig::decoder_defaults();
         m.d_model = small.d_model, m.d_ff = small.d_ff, m.max_len = small.max_len;
         m.decoder_layers = 3, m.heads = 2;
       }},
      {"encoder classifier", data::TaskKind::dyck, [](nn::ModelConfig& m) {
         m.kind = nn::ModelKind::encoder, m.encoder_layers = 2, m.heads = 2;
       }}};
  for (const Case& k : cases) {
    INFO(k.what);
    nn::ModelConfig m;
    m.d_model = 16, m.d_ff = 32, m.heads = 4, m.max_len = 32;
    k.set(m);
    m.src_vocab = m.tgt_vocab = 12;
    const run::Family& family = run::family_for(k.task);
    Generator gen(1);
    const std::unique_ptr<nn::Model> model = family.make_model(m, gen);
    CHECK(described(family.attention_sites(m)) == described(model->attention_sites()));
  }
}
