// The run config: TOML reading, precedence (defaults < file < command line), errors that name
// the key and where it was set, and the effective config reading back to the same config.
#include <catch2/catch.hpp>

#include "config/config.hpp"
#include "support/config.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::config;

using qkv::test::config_from;

TEST_CASE("config: defaults, file, then command line") {
  const RunConfig def = config_from("");
  CHECK(def.model.d_model == nn::ModelConfig{}.d_model);
  const RunConfig f = config_from("[model]\nd_model = 96\nheads = 4\n");
  CHECK(f.model.d_model == 96);
  const RunConfig c =
      config_from("[model]\nd_model = 96\nheads = 4\n", {{"model.d_model", "32"}, {"seed", "9"}});
  CHECK(c.model.d_model == 32);
  CHECK(c.seed == 9);
  const RunConfig s = config_from("", {{"optim.name", "sgd"}, {"data.task", "reverse"}});
  CHECK(qkv::name_of(s.optim.optim.name) == "sgd");
  CHECK(qkv::name_of(s.data.task) == "reverse");
}

TEST_CASE("config: unknown keys and wrong types name the key and where it was set") {
  CHECK_THROWS_WITH(config_from("[model]\nd_modle = 64\n"), Catch::Contains("test.toml:2") &&
                                                                Catch::Contains("model.d_modle") &&
                                                                Catch::Contains("unknown key"));
  CHECK_THROWS_WITH(config_from("[model]\nd_model = \"big\"\n"),
                    Catch::Contains("test.toml:2") && Catch::Contains("model.d_model") &&
                        Catch::Contains("integer"));
  CHECK_THROWS_WITH(config_from("[modl]\nd_model = 1\n"), Catch::Contains("unknown section"));
  CHECK_THROWS_WITH(config_from("", {{"train.epochs", "many"}}),
                    Catch::Contains("command line") && Catch::Contains("train.epochs"));
  CHECK_THROWS_WITH(config_from("[optim]\nlr = \"fast\"\n"), Catch::Contains("optim.lr"));
}

TEST_CASE("config: out-of-range and inconsistent values") {
  CHECK_THROWS_WITH(config_from("[model]\nd_model = 100\nheads = 3\n"),
                    Catch::Contains("model.heads") && Catch::Contains("not divisible"));
  CHECK_THROWS_WITH(config_from("[optim]\nlr = -1.0\n"), Catch::Contains("optim.lr"));
  CHECK_THROWS_WITH(config_from("[data]\nbatch_size = 0\n"), Catch::Contains("data.batch_size"));
  CHECK_THROWS_WITH(config_from("[model]\ndropout = 1.5\n"), Catch::Contains("model.dropout"));
  CHECK_THROWS_WITH(config_from("threads = -2\n"), Catch::Contains("threads"));
}

TEST_CASE("config: the effective config reads back to the same config") {
  const RunConfig c = config_from(
      "seed = 3\n[model]\nd_model = 48\nheads = 6\nnorm_first = true\n[data]\ntask = \"sort\"\n"
      "[optim]\nname = \"adamw\"\nweight_decay = 0.01\nschedule = \"noam\"\nwarmup = 100\n",
      {{"train.label_smoothing", "0.1"}});
  const std::string text = effective_toml(c);
  const RunConfig back = config_from_toml(parse_config(text, "effective.toml"));
  CHECK(effective_toml(back) == text);
  CHECK(back.model.d_model == 48);
  CHECK(back.optim.schedule.d_model == 48);  // noam's d_model filled from the model
  CHECK(back.train.label_smoothing == Approx(0.1));
}

TEST_CASE("overrides are taken out of the argument list") {
  std::vector<std::string> args = {"train",   "c.toml",          "--model.d_model", "64",
                                   "--quiet", "--optim.lr=0.01", "--seed",          "5"};
  const auto ov = take_overrides(args);
  REQUIRE(ov.size() == 3);
  CHECK(ov[0] == std::make_pair(std::string("model.d_model"), std::string("64")));
  CHECK(ov[1] == std::make_pair(std::string("optim.lr"), std::string("0.01")));
  CHECK(ov[2] == std::make_pair(std::string("seed"), std::string("5")));
  CHECK(args == std::vector<std::string>{"train", "c.toml", "--quiet"});
  std::vector<std::string> bad = {"train", "--model.d_model"};
  CHECK_THROWS_WITH(take_overrides(bad), Catch::Contains("needs a value"));
}

TEST_CASE("config: [model] attention and window, with errors that name the key and line") {
  const RunConfig c = config_from("[model]\nattention = \"linear\"\n");
  CHECK(qkv::name_of(c.model.attention) == "linear");
  CHECK(c.model.window == 0);
  CHECK(config_from("", {{"model.window", "4"}}).model.window == 4);
  CHECK_THROWS_WITH(
      config_from("[model]\nattention = \"cosine\"\n"),
      Catch::StartsWith("test.toml:2: model.attention:") && Catch::Contains("cosine"));
  CHECK_THROWS_WITH(config_from("[model]\nattention = \"additive\"\nwindow = 3\n"),
                    Catch::StartsWith("test.toml:3: model.window:") && Catch::Contains("dot"));
  CHECK_THROWS_WITH(config_from("", {{"model.window", "-2"}}),
                    Catch::StartsWith("command line: --model.window"));
  CHECK_THROWS_WITH(config_from("[model]\nwindow = \"wide\"\n"),
                    Catch::Contains("model.window: expected an integer"));
  // the effective config carries both keys
  const RunConfig back = config_from_toml(
      parse_config(effective_toml(config_from("[model]\nwindow = 5\n")), "e.toml"));
  CHECK(back.model.window == 5);
  CHECK(qkv::name_of(back.model.attention) == "dot");
  CHECK_THROWS_WITH(config_from("[model]\nattention = \"linear\"\nposition = \"relative\"\n"),
                    Catch::Contains("model.position") && Catch::Contains("dot"));
}

// [model] attention_scale is one nn::AttentionScale from the reader to the kernel: an encoder
// layer built from the config attends (fused kernel) exactly as the formula with that number.
TEST_CASE("config: attention_scale reaches the dot kernel, additive and linear refuse one") {
  CHECK(config_from("").model.attention_scale.is_default());
  CHECK(config_from("[model]\nattention_scale = 0\n").model.attention_scale.is_default());
  const RunConfig c = config_from(
      "[model]\nattention_scale = 0.3\nd_model = 8\nheads = 2\nencoder_layers = 1\n"
      "decoder_layers = 1\ndropout = 0.0\n");
  CHECK(c.model.attention_scale == nn::AttentionScale(0.3));
  CHECK(config_from_toml(parse_config(effective_toml(c), "e.toml")).model.attention_scale ==
        c.model.attention_scale);
  CHECK_THAT(effective_toml(config_from("")), Catch::Contains("attention_scale = 0.0"));

  nn::ModelConfig m = c.model;
  m.src_vocab = m.tgt_vocab = 5;
  Generator g(3);
  nn::Seq2Seq model(m, g);
  model.to(DType::f64);
  model.eval();
  const nn::MultiHeadAttention& a = *model.encoder->layers[0]->self_attn;
  const ag::Var x(randn({2, 5, 8}, g, DType::f64));
  const Tensor out = a.forward(x, x, x).data();  // no weights asked for: the fused kernel
  // softmax(q k^T s) v per head, written out
  auto formula = [&](double s) {
    const ag::Var q = a.split_heads(a.w_q->forward(x)), k = a.split_heads(a.w_k->forward(x)),
                  v = a.split_heads(a.w_v->forward(x));
    const ag::Var w = ag::softmax(ag::mul(ag::matmul(q, ag::transpose(k, -2, -1)), s), -1);
    return a.w_o->forward(a.merge_heads(ag::matmul(w, v))).data();
  };
  CHECK(qkv::testing::rel_err(out, formula(0.3)) < 1e-12);
  CHECK(qkv::testing::rel_err(out, formula(0.5)) >
        1e-3);  // 1 / sqrt(d_head 4): the default differs

  // additive and linear form no q . k: the attention registry's error, naming the key
  for (const std::string kind : {"additive", "linear"}) {
    INFO(kind);
    const std::string head = "[model]\nattention = \"" + kind + "\"\n";
    CHECK_THROWS_WITH(config_from(head + "attention_scale = 2\n"),
                      Catch::StartsWith("test.toml:3: model.attention_scale: a scale on q . k "
                                        "needs attention = \"dot\", got attention = \"" +
                                        kind + "\""));
    CHECK(config_from(head + "attention_scale = 0\n").model.attention_scale.is_default());
    nn::AttentionKind k = parse_name<nn::AttentionKind>(kind, "attention");
    CHECK_THROWS_WITH(nn::MultiHeadAttention(8, 2, g, true, 2.0, 0.0, nullptr, k),
                      Catch::Contains("attention_scale: a scale on q . k needs"));
  }
  CHECK_THROWS_WITH(config_from("[model]\nattention_scale = -1\n"),
                    Catch::StartsWith("test.toml:2: model.attention_scale: must be >= 0"));
  CHECK_THROWS_WITH(config_from("", {{"model.attention_scale", "-1"}}),
                    Catch::StartsWith("command line: --model.attention_scale"));
}

TEST_CASE("config: position kinds and relative_clip, errors naming the key") {
  CHECK(config_from("[model]\nposition = \"rope\"\n").model.position ==
        qkv::nn::PositionKind::rope);
  const RunConfig r = config_from("[model]\nposition = \"relative\"\nrelative_clip = 4\n");
  CHECK(qkv::name_of(r.model.position) == "relative");
  CHECK(r.model.relative_clip == 4);
  CHECK(config_from("").model.relative_clip == 16);
  CHECK_THROWS_WITH(config_from("[model]\nposition = \"rotary\"\n"),
                    Catch::Contains("test.toml:2") && Catch::Contains("model.position") &&
                        Catch::Contains("rope") && Catch::Contains("'rotary'"));
  CHECK_THROWS_WITH(config_from("[model]\nrelative_clip = 0\n"),
                    Catch::Contains("model.relative_clip"));
  CHECK_THROWS_WITH(config_from("", {{"model.relative_clip", "-3"}}),
                    Catch::Contains("--model.relative_clip"));
  // rope turns pairs of each head's coordinates: the head width must be even
  CHECK_THROWS_WITH(config_from("[model]\nposition = \"rope\"\nd_model = 12\nheads = 4\n"),
                    Catch::Contains("model.position") && Catch::Contains("even"));
  CHECK_NOTHROW(config_from("[model]\nposition = \"relative\"\nd_model = 12\nheads = 4\n"));
  // the effective config keeps the new key
  CHECK(effective_toml(r).find("relative_clip = 4") != std::string::npos);
}

TEST_CASE("config: train.best_metric and the parallel corpus keys") {
  CHECK(config_from("").train.best_metric ==
        BestMetric::exact_match);  // today's behaviour by default
  CHECK_THROWS_WITH(config_from("[train]\nbest_metric = \"accuracy\"\n"),
                    Catch::Contains("test.toml:2") && Catch::Contains("train.best_metric") &&
                        Catch::Contains("exact_match, bleu or loss"));
  CHECK_THROWS_WITH(config_from("[train]\nbest_metric = \"bleu\"\n"),
                    Catch::Contains("bleu needs a text task") && Catch::Contains("copy"));
  const RunConfig c = config_from(
      "[data]\ntask = \"parallel\"\npath = \"/corpus\"\nsrc_lang = \"de\"\ntgt_lang = \"en\"\n"
      "tokenizer = \"sentencepiece\"\nspm_vocab_size = 500\nspm_type = \"bpe\"\n"
      "[train]\nbest_metric = \"bleu\"\n");
  CHECK(c.data.spm_type == data::SpmType::bpe);
  CHECK(c.data.valid_split == "valid");
  // The effective config reads back to the same keys.
  const RunConfig back = config_from_toml(parse_config(effective_toml(c), "eff.toml"));
  CHECK(back.data.spm_vocab_size == 500);
  CHECK(back.data.src_lang == "de");
  CHECK(qkv::name_of(back.train.best_metric) == "bleu");
  CHECK_THROWS_WITH(config_from("[data]\ntask = \"parallel\"\npath = \"/c\"\nsrc_lang = \"de\"\n"),
                    Catch::Contains("data.tgt_lang"));
  CHECK_THROWS_WITH(
      config_from("[data]\ntokenizer = \"sentencepiece\"\nspm_type = \"wordpiece\"\n"),
      Catch::Contains("data.spm_type"));
}
