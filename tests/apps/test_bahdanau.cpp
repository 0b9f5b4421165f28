// The recurrent encoder-decoders through the real binary (model.decoder = "gru",
// nn/rnn_seq2seq.hpp): Bahdanau's attention learns to copy, decodes greedily and with a beam,
// and shows its alignment as a cross-attention map; the fixed-context model trains and
// decodes; a config whose keys cannot go together is one line.
#include <catch2/catch.hpp>

#include <algorithm>

#include "support/copy_runs.hpp"
#include "support/process.hpp"

using namespace qkv::testing;

namespace {

// configs/bahdanau-copy.toml at d_model 32 on 3000 examples, one thread.
RunResult train_copy(const TempDir& t, const std::string& name, const std::string& more) {
  return train_small_copy(t, "bahdanau-copy.toml", name,
                          "--optim.lr 1e-2 --optim.warmup 10 " + more);
}

}  // namespace

TEST_CASE("train: Bahdanau's GRU encoder-decoder learns to copy and shows its alignment", "[e2e]") {
  TempDir t("bahdanau_copy");
  const RunResult r = train_copy(t, "additive", "--train.epochs 12");
  INFO(r.output);
  REQUIRE(r.status == 0);
  // exact match 0.95 on a 2-core AMD EPYC (10 s under load); fixed seed, 1 thread
  check_copies(t, "additive");
  const RunResult b = run_qkv("translate " + t.file("additive") + " --beam 3 '3 1 4 1 5'");
  CHECK(b.status == 0);
  CHECK(b.output == "3 1 4 1 5\n");
  const RunResult a =
      run_qkv("attention " + t.file("additive") + " '3 1 4' --out " + t.file("map.svg"));
  INFO(a.output);
  CHECK(a.status == 0);
  CHECK(a.output.find("additive cross-attention, layer 1/1, 1 head") != std::string::npos);
  // heads: the one cross head's row; the logit lens reads a residual stream between blocks,
  // which a recurrent decoder has not: one line
  const RunResult h = run_qkv("heads " + t.file("additive") + " --batches 1");
  INFO(h.output);
  CHECK(h.status == 0);
  CHECK(h.output.find("cross.0.0") != std::string::npos);
  const RunResult l = run_qkv("lens " + t.file("additive") + " '3 1 4' --target 4");
  INFO(l.output);
  CHECK(l.status == 1);
  CHECK(l.output.find("lens: the logit lens reads the residual stream between blocks") !=
        std::string::npos);
  CHECK(std::count(l.output.begin(), l.output.end(), '\n') == 1);
}

TEST_CASE("train: the fixed-context GRU encoder-decoder trains and decodes", "[e2e]") {
  TempDir t("rnnencdec_copy");
  const RunResult r = train_copy(
      t, "fixed", "--model.cross_attention false --train.max_steps 40 --train.eval_every 40");
  INFO(r.output);
  REQUIRE(r.status == 0);
  check_evaluates_and_decodes(t, "fixed");
  const RunResult a =
      run_qkv("attention " + t.file("fixed") + " '3 1 4' --out " + t.file("map.svg"));
  CHECK(a.status != 0);
  CHECK(a.output.find("no attention") != std::string::npos);
}

TEST_CASE("train: a gru decoder under a Transformer encoder is one line naming model.encoder",
          "[e2e]") {
  TempDir t("bahdanau_bad");
  const RunResult r = run_qkv("train " + shipped_config("copy.toml") + " --run-dir " +
                              t.file("bad") + " --model.decoder gru");
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("model.encoder") != std::string::npos);
  CHECK(r.output.find("\"gru\" or \"lstm\"") != std::string::npos);
}
