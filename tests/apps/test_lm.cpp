// Language models through the real binary: a short character-level GPT run on tiny
// Shakespeare (configs/shakespeare-char.toml, shrunk), then qkv generate: the key/value cache
// gives the same tokens as re-reading the context, a seed gives the same text, and bad input
// gets one clear line and exit 1.
#include <catch2/catch.hpp>
#include <cmath>
#include <nlohmann/json.hpp>

#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

// The shipped CPU recipe, shrunk to about a second of work: d 32, 2 layers, context 16.
std::string small_run(const std::string& dir) {
  std::string cfg(1, '\'');
  cfg += source_dir();
  cfg += "/configs/shakespeare-char.toml'";
  return "train " + cfg + " --run-dir '" + dir +
         "' --threads 1 --quiet --model.d_model 32 --model.d_ff 64 --model.decoder_layers 2"
         " --data.block_size 16 --model.max_len 16 --data.batch_size 32 --train.max_steps 100"
         " --train.log_every 10 --train.eval_every 50 --train.eval_iters 4 --optim.warmup 10"
         " --optim.lr 1e-2";
}

std::vector<nlohmann::json> metrics(const std::string& run) {
  std::vector<nlohmann::json> out;
  std::istringstream in(read_file(run + "/metrics.jsonl"));
  std::string line;
  while (std::getline(in, line)) out.push_back(nlohmann::json::parse(line));
  return out;
}

// The generated text alone (stdout, without the [generate] line on stderr).
RunResult generate(const std::string& args) { return run_qkv("generate " + args + " --quiet"); }

}  // namespace

TEST_CASE(
    "lm: a short GPT run on tiny Shakespeare learns, then generates with and without the cache",
    "[e2e]") {
  TempDir t("lm");
  const std::string run = t.file("run");
  const RunResult r = run_qkv(small_run(run));
  INFO(r.output);
  REQUIRE(r.status == 0);
  for (const char* f : {"config.toml", "tgt_vocab.txt", "metrics.jsonl", "loss.svg"})
    CHECK(fs::exists(fs::path(run) / f));
  const auto m = metrics(run);
  std::vector<double> valid;
  double first_train = 0;
  for (const auto& j : m) {
    if (j.value("split", "") == "valid") {
      CHECK(j.contains("train_loss"));
      valid.push_back(j["loss"].get<double>());
    } else if (first_train == 0) {
      first_train = j["loss"].get<double>();
    }
  }
  REQUIRE(valid.size() == 2);  // steps 50 and 100
  CHECK(first_train > 3.7);    // steps 1-10, from ln 65 = 4.17
  CHECK(valid.back() < 3.4);   // it learned at least the characters' frequencies
  CHECK(valid.back() < first_train - 0.5);

  // the cache changes the speed, not the tokens: sampled and greedy
  for (const std::string opts :
       {"--temperature 1 --top-k 0", "--temperature 0.8 --top-p 0.9", "--temperature 0"}) {
    INFO(opts);
    const std::string args =
        "'" + run + "' --prompt 'KING:' --tokens 40 --seed 5 --threads 1 " + opts;
    const RunResult cached = generate(args), uncached = generate(args + " --no-cache");
    REQUIRE(cached.status == 0);
    CHECK(cached.output.rfind("KING:", 0) == 0);
    CHECK(cached.output.size() >= 5 + 40);  // the prompt, then 40 single-byte characters
    CHECK(cached.output == uncached.output);
    CHECK(generate(args).output == cached.output);  // deterministic for a seed
  }
  CHECK(generate("'" + run + "' --tokens 40 --seed 5 --threads 1").output !=
        generate("'" + run + "' --tokens 40 --seed 6 --threads 1").output);

  // bad input: one line each, exit 1
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--prompt 'a#b~'", "characters '#', '~' are not in the model's vocabulary"},
      {"--prompt 'abcdefghijklmnopq'", "more than the model's context of 16"},
      {"--tokens 0", "--tokens must be >= 1"},
      {"--top-p 0", "--top-p must be in (0, 1]"},
      {"--top-p 1.5", "--top-p must be in (0, 1]"},
      {"--temperature -0.5", "--temperature must be >= 0"}};
  for (const auto& [args, says] : bad) {
    INFO(args);
    const RunResult e = generate("'" + run + "' " + args);
    CHECK(e.status == 1);
    CHECK(e.output.find(says) != std::string::npos);
    CHECK(std::count(e.output.begin(), e.output.end(), '\n') == 1);
  }
  const RunResult tr = run_qkv("translate '" + run + "' hello");
  CHECK(tr.status == 1);
  CHECK(tr.output.find("qkv generate") != std::string::npos);

  // qkv attention: the causal self-attention over the text itself, by default
  const std::string png = t.file("lm_attention.png");
  const RunResult at =
      run_qkv("attention '" + run + "' 'KING RICHARD' --threads 1 --out '" + png + "'");
  INFO(at.output);
  REQUIRE(at.status == 0);
  CHECK(at.output.find("causal self-attention, layer 2/2, mean of") != std::string::npos);
  CHECK(at.output.find("12 x 12") != std::string::npos);  // one row and column per character
  CHECK(read_file(png).rfind("\x89PNG", 0) == 0);
  const RunResult cross =
      run_qkv("attention '" + run + "' 'KING' --kind cross --out '" + t.file("x.png") + "'");
  CHECK(cross.status == 1);
  CHECK(cross.output.find("has only causal self-attention") != std::string::npos);
  const RunResult longer =
      run_qkv("attention '" + run + "' 'abcdefghijklmnopq' --out '" + t.file("y.png") + "'");
  CHECK(longer.status == 1);
  CHECK(longer.output.find("more than the model's context of 16") != std::string::npos);
}

TEST_CASE("lm: a SentencePiece GPT keeps its model in the run and generates whole words", "[e2e]") {
  TempDir t("lm_spm");
  const std::string run = t.file("run");
  const RunResult r =
      run_qkv(small_run(run) + " --data.tokenizer sentencepiece --data.spm_vocab_size 300");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(fs::exists(fs::path(run) / "spm.model"));
  const auto m = metrics(run);
  REQUIRE(m.back().value("split", "") == "valid");
  CHECK(m.back()["loss"].get<double>() < std::log(300.0) - 0.5);  // learned something

  const std::string args =
      "'" + run + "' --prompt 'KING RICHARD:' --tokens 30 --seed 3 --threads 1";
  const RunResult cached = generate(args), uncached = generate(args + " --no-cache");
  REQUIRE(cached.status == 0);
  CHECK(cached.output == uncached.output);
  CHECK(cached.output.rfind("KING RICHARD:", 0) == 0);
  CHECK(cached.output.find("\xE2\x96\x81") == std::string::npos);  // no word-start marks
  const RunResult ev = run_qkv("eval '" + run + "' --threads 1");
  CHECK(ev.status == 0);
  CHECK(ev.output.find("perplexity") != std::string::npos);  // per piece: no bits per char
  CHECK(ev.output.find("per piece") != std::string::npos);
  CHECK(ev.output.find("bits per char") == std::string::npos);
  const RunResult at =
      run_qkv("attention '" + run + "' 'KING RICHARD' --threads 1 --out '" + t.file("a.png") + "'");
  INFO(at.output);
  CHECK(at.status == 0);
  CHECK(at.output.find("next-piece guesses") != std::string::npos);
}

TEST_CASE("lm: optim.name = muon trains the small GPT and checkpoints both kinds of state",
          "[e2e]") {
  TempDir t("lm_muon");
  const std::string run = t.file("run");
  const RunResult r = run_qkv(small_run(run) + " --optim.name muon --optim.muon_lr 0.02");
  INFO(r.output);
  REQUIRE(r.status == 0);
  double first_train = 0, last_valid = 0;
  for (const auto& j : metrics(run)) {
    if (j.value("split", "") == "valid") last_valid = j["loss"].get<double>();
    if (!j.contains("split") && first_train == 0) first_train = j["loss"].get<double>();
  }
  // adamw reaches 3.15 here; muon 2.55 on the development machine
  CHECK(first_train > 3.7);
  CHECK(last_valid < 2.9);
  CHECK(read_file(run + "/config.toml").find("name = \"muon\"") != std::string::npos);
  // the block matrices keep a momentum buffer, the embedding and the norms Adam's moments
  const std::string optim = read_file(run + "/checkpoints/step-00000100/optim.safetensors");
  for (const char* key :
       {"\"lm.blocks.layers.1.self_attn.w_q.weight.momentum_buffer\"",
        "\"lm.blocks.layers.0.ffn.linear2.weight.momentum_buffer\"", "\"lm.embed.weight.exp_avg\"",
        "\"lm.blocks.layers.0.norm1.weight.exp_avg\""}) {
    INFO(key);
    CHECK(optim.find(key) != std::string::npos);
  }
  CHECK(optim.find("\"lm.embed.weight.momentum_buffer\"") == std::string::npos);
}

TEST_CASE("lm: config errors name the key", "[e2e]") {
  TempDir t("lm_config");
  std::string cfg(1, '\'');
  cfg += source_dir();
  cfg += "/configs/shakespeare-char.toml'";
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"--model.kind encoder_decoder", "model.kind: data.task = \"lm\" needs model.kind"},
      {"--model.kind gpt", "model.kind: must be encoder_decoder, decoder or encoder"},
      {"--data.tokenizer word", "data.tokenizer: task lm takes \"char\" or \"sentencepiece\""},
      {"--data.block_size 65", "model.max_len: learned positions cover 64 tokens"},
      {"--train.eval_iters 0", "train.eval_iters: must be >= 1"},
      {"--data.path nowhere.txt", "nowhere.txt"}};
  for (const auto& [args, says] : bad) {
    INFO(args);
    const RunResult e = run_qkv("train " + cfg + " --run-dir '" + t.file("run") + "' " + args);
    CHECK(e.status == 1);
    CHECK(e.output.find(says) != std::string::npos);
    CHECK(std::count(e.output.begin(), e.output.end(), '\n') == 1);
    CHECK(!fs::exists(t.path / "run"));
  }
}
