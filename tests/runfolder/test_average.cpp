// Checkpoint averaging (runfolder/average.hpp) in process: N identical checkpoints average to
// themselves bit for bit, two known ones to their mean, the result loads as a checkpoint, and
// bad counts, runs and mismatched checkpoints are one clear error.
#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "run/run.hpp"
#include "runfolder/average.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::run;
using qkv::testing::TempDir;
namespace fs = std::filesystem;

namespace {

nn::ModelConfig tiny(int64_t d_model = 16) {
  nn::ModelConfig c;
  c.src_vocab = c.tgt_vocab = 9;
  c.d_model = d_model, c.heads = 2, c.d_ff = 24, c.encoder_layers = c.decoder_layers = 1;
  return c;
}

// A run folder (a config.toml is all last_checkpoints asks of it) with checkpoints of the
// given models at steps 1, 2, ...
struct Run {
  TempDir t;
  std::string dir = t.file("run");
  std::vector<std::string> names;
  explicit Run(const std::vector<const nn::Seq2Seq*>& models, const std::string& tag = "average",
               int64_t keep = 10)
      : t(tag) {
    fs::create_directories(dir);
    std::ofstream(fs::path(dir) / "config.toml") << "seed = 1\n";
    for (size_t i = 0; i < models.size(); ++i) {
      optim::OptimConfig oc;
      auto opt = optim::make_optimizer(oc, models[i]->named_parameters());
      TrainState st;
      st.step = static_cast<int64_t>(i) + 1;
      names.push_back(save_checkpoint(dir, *models[i], *opt, st, keep, false));
    }
  }
};

std::vector<float> weights(const nn::Seq2Seq& m, size_t i) {
  return to_vector<float>(m.state_dict()[i].second);
}

}  // namespace

TEST_CASE("average: N identical checkpoints average to the same weights, bit for bit", "[run]") {
  Generator g(5);
  const nn::Seq2Seq m(tiny(), g);
  Run run({&m, &m, &m});
  const std::vector<std::string> last = last_checkpoints(run.dir, 3);
  REQUIRE(last.size() == 3);
  const std::string out = run.t.file("avg");
  average_checkpoints(last, out);
  Generator g2(99);
  nn::Seq2Seq loaded(tiny(), g2);
  load_checkpoint(out, loaded, nullptr);  // verified against its manifest
  const auto a = m.state_dict(), b = loaded.state_dict();
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i)
    CHECK(to_vector<float>(a[i].second) == to_vector<float>(b[i].second));
}

TEST_CASE("average: two known checkpoints average to their element-wise mean", "[run]") {
  Generator g1(1), g2(2), g3(3);
  const nn::Seq2Seq old(tiny(), g1), a(tiny(), g2), b(tiny(), g3);
  Run run({&old, &a, &b});
  const std::vector<std::string> last = last_checkpoints(run.dir, 2);  // the newest two
  REQUIRE(last.size() == 2);
  CHECK(fs::path(last[0]).filename() == "step-00000002");
  CHECK(fs::path(last[1]).filename() == "step-00000003");
  // the run's own folder, loaded by name (eval --checkpoint average)
  average_checkpoints(last, (fs::path(run.dir) / "checkpoints" / kAverageCheckpoint).string());
  const std::string ckpt = resolve_checkpoint(run.dir, "average");
  Generator g4(4);
  nn::Seq2Seq mean(tiny(), g4);
  const TrainState st = load_checkpoint(ckpt, mean, nullptr);
  CHECK(st.step == 3);  // the newest checkpoint's state
  for (size_t i = 0; i < a.state_dict().size(); ++i) {
    const std::vector<float> x = weights(a, i), y = weights(b, i), z = weights(mean, i);
    for (size_t j = 0; j < x.size(); ++j)
      REQUIRE(z[j] == static_cast<float>((double(x[j]) + double(y[j])) / 2));
  }
  CHECK(weights(mean, 0) != weights(a, 0));
  // the average is no step-* checkpoint: latest still names the newest
  CHECK(fs::path(find_checkpoint(run.dir, "latest")).filename() == "step-00000003");
}

TEST_CASE("average: bad counts, runs and checkpoints of other models are clear errors", "[run]") {
  Generator g(1);
  const nn::Seq2Seq m(tiny(), g);
  Run run({&m, &m});
  CHECK_THROWS_WITH(last_checkpoints(run.dir, 0), "average: --last must be >= 1, got 0");
  CHECK_THROWS_WITH(last_checkpoints(run.dir, 3),
                    Catch::Contains("keeps 2 checkpoints, fewer than the last 3 asked"));
  CHECK(last_checkpoints(run.dir, 3, false).size() == 2);  // training's average: what there is
  CHECK_THROWS_WITH(last_checkpoints(run.t.file("nope"), 2),
                    Catch::Contains("not a run folder (no config.toml)"));
  TempDir empty("average-empty");
  std::ofstream(empty.path / "config.toml") << "seed = 1\n";
  CHECK_THROWS_WITH(last_checkpoints(empty.path.string(), 1),
                    Catch::Contains("no checkpoint in this run folder"));
  // a checkpoint of a wider model does not average with these
  Generator g2(2);
  const nn::Seq2Seq wide(tiny(32), g2);
  Run other({&wide}, "average-wide");
  const std::vector<std::string> mixed = {last_checkpoints(run.dir, 1)[0],
                                          last_checkpoints(other.dir, 1)[0]};
  CHECK_THROWS_WITH(average_checkpoints(mixed, run.t.file("bad")),
                    Catch::Contains("does not match"));
  CHECK_FALSE(fs::exists(run.t.file("bad")));
  CHECK_THROWS_WITH(resolve_checkpoint(run.dir, run.t.file("nothing-here")),
                    Catch::Contains("is not a checkpoint folder"));
}
