// Real-data smoke test: a tiny model trained for 150 steps on a 600-pair slice of Multi30k
// (SentencePiece trained on that slice), through the real binary: the loss falls, validation
// reports BLEU and chrF, eval --beam writes hypotheses that qkv score rescores to the same BLEU,
// and translate / attention run on the subword model.
#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "data/parallel.hpp"
#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;
using nlohmann::json;

TEST_CASE("multi30k: a short real-data run learns and reports BLEU", "[e2e]") {
  TempDir t("multi30k");
  const std::string run = t.file("run");
  // fp32 in place of the config's precision = "auto": this test reads the commands' stdout and
  // stderr as one text, and "auto" has each command say on stderr what it picked (test_precision).
  const RunResult r = run_qkv(
      "train '" + source_dir() + "/configs/multi30k.toml' --run-dir " + run +
      " --precision fp32 --threads 1 --quiet"
      " --data.train_size 600 --data.valid_size 30 --data.test_size 30"
      " --data.spm_vocab_size 300 --data.batch_size 32 --model.d_model 32 --model.heads 2"
      " --model.d_ff 64 --model.encoder_layers 1 --model.decoder_layers 1 --train.max_steps 150"
      " --train.eval_every 75 --train.log_every 25 --optim.warmup 20 --optim.lr 3e-3");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(fs::exists(fs::path(run) / "spm.model"));

  std::vector<double> train_loss;
  int valid_with_bleu = 0;
  bool test_bleu = false;
  std::ifstream m(fs::path(run) / "metrics.jsonl");
  for (std::string line; std::getline(m, line);) {
    const json j = json::parse(line);
    if (!j.contains("split"))
      train_loss.push_back(j["loss"].get<double>());
    else if (j["split"] == "valid" && j.contains("bleu") && j.contains("chrf"))
      ++valid_with_bleu;
    else if (j["split"] == "test" && j.contains("bleu"))
      test_bleu = true;
  }
  REQUIRE(train_loss.size() == 6);
  CHECK(train_loss.back() < train_loss.front() - 1.0);  // about 5.7 -> 4 nats
  CHECK(valid_with_bleu == 2);
  CHECK(test_bleu);

  const std::string hyp = t.file("hyp.txt");
  const RunResult e =
      run_qkv("eval " + run + " --split test --beam 2 --json --threads 1 --hyp-out " + hyp);
  INFO(e.output);
  REQUIRE(e.status == 0);
  const json j = json::parse(e.output);
  CHECK(j["bleu_signature"] == "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.x.x");
  CHECK(j["chrf"].get<double>() > 0);
  CHECK(j["decode"]["beam"] == 2);
  // The hypotheses file, rescored against the references, gives eval's numbers.
  const auto refs =
      qkv::data::read_lines(source_dir() + "/configs/data/multi30k/test_2016_flickr.en.gz");
  {
    std::ofstream f(t.file("ref.txt"));
    for (int i = 0; i < 30; ++i) f << refs[static_cast<size_t>(i)] << '\n';
  }
  const RunResult s = run_qkv("score " + t.file("ref.txt") + " " + hyp + " --json");
  INFO(s.output);
  REQUIRE(s.status == 0);
  const json sj = json::parse(s.output);
  CHECK(sj["sentences"] == 30);
  CHECK(sj["bleu"].get<double>() == j["bleu"].get<double>());
  CHECK(sj["chrf"].get<double>() == j["chrf"].get<double>());

  // Batched beam search (eval) against one-sentence beam search (translate): the same outputs.
  const auto src =
      qkv::data::read_lines(source_dir() + "/configs/data/multi30k/test_2016_flickr.de.gz");
  {
    std::ofstream f(t.file("src.txt"));
    for (int i = 0; i < 8; ++i) f << src[static_cast<size_t>(i)] << '\n';
  }
  const RunResult one =
      run_qkv("translate " + run + " --beam 2 --threads 1 < " + t.file("src.txt"));
  REQUIRE(one.status == 0);
  const auto batched = qkv::data::read_lines(hyp);
  std::string first8;
  for (int i = 0; i < 8; ++i) first8 += batched[static_cast<size_t>(i)] + "\n";
  CHECK(one.output == first8);

  const RunResult x = run_qkv("translate " + run + " 'Ein Mann fährt Fahrrad.' --threads 1");
  CHECK(x.status == 0);
  CHECK(!x.output.empty());
  CHECK(x.output.find("\xE2\x96\x81") == std::string::npos);  // detokenized: no "▁"
  const RunResult a = run_qkv("attention " + run + " 'Ein Mann fährt Fahrrad.' --out " +
                              t.file("map.png") + " --threads 1");
  INFO(a.output);
  CHECK(a.status == 0);
  CHECK(fs::exists(t.file("map.png")));
}

TEST_CASE("multi30k: subword sampling gives the same numbers from whichever thread draws",
          "[e2e]") {
  TempDir t("multi30k-sampling");
  auto train = [&](const std::string& name, double alpha, int prefetch) {
    const std::string run = t.file(name);
    const RunResult r = run_qkv(
        "train '" + source_dir() + "/configs/multi30k.toml' --run-dir " + run +
        " --precision fp32 --quiet --threads 2 --data.spm_alpha " + std::to_string(alpha) +
        " --data.prefetch " + std::to_string(prefetch) +
        " --data.train_size 300 --data.valid_size 10 --data.test_size 10"
        " --data.spm_vocab_size 300 --data.batch_size 32 --model.d_model 32 --model.heads 2"
        " --model.d_ff 64 --model.encoder_layers 1 --model.decoder_layers 1 --train.max_steps 40"
        " --train.eval_every 40 --train.log_every 10 --optim.warmup 10");
    INFO(r.output);
    REQUIRE(r.status == 0);
    return read_file(run + "/metrics.jsonl");
  };
  // 40 steps of about 10 batches an epoch: four epochs, four draws of the segmentations, made
  // on the prefetch thread in one run and on the training thread in the other.
  const std::string ahead = train("ahead", 0.2, 2), inline_ = train("inline", 0.2, 0);
  CHECK(ahead == inline_);
  CHECK(train("again", 0.2, 2) == ahead);
  CHECK(train("best", 0.0, 2) != ahead);  // the draws change what the model sees
}
