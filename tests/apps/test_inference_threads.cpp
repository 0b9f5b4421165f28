// One loaded run asked from many threads at once, as qkv serve asks it: every answer (decodes,
// samples, an inspection's logits and maps, a head table with its recording pass) equals the one
// the same call gives alone, bit for bit, each thread with its own ablation; and a cancelled
// call stops at its next pass and leaves nothing behind. Tiny runs trained through the binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <latch>
#include <thread>

#include "autograd/var.hpp"
#include "core/cancel.hpp"
#include "inspect/head_table.hpp"
#include "inspect/heads.hpp"
#include "run/inference.hpp"
#include "support/process.hpp"
#include "support/tiny_runs.hpp"

using namespace qkv;
using namespace qkv::testing;

namespace {

// The tiny GPT and copy runs (tests/support/tiny_runs.hpp).
const TempDir& runs() { return tiny_runs("inference_threads", 30); }

std::unique_ptr<run::Inference> open(const std::string& run, const char* precision) {
  return run::open_inference(runs().file(run),
                             {.precision = parse_precision(precision), .threads = 1, .op = "test"});
}

std::vector<float> floats(const Tensor& t) { return to_vector<float>(t.to(DType::f32)); }

// What one question gets, in values that compare bit for bit.
struct Answers {
  std::vector<data::Ids> decoded;  // an encoder-decoder: greedy, beam 3
  data::Ids sampled;               // a language model: 24 tokens
  std::vector<float> logits, map;  // an inspection's logits and first map
  std::string heads;               // the head table, as JSON
  bool operator==(const Answers&) const = default;
};

// Question i of a run: its own input, seed and ablation (every third none).
Answers ask(run::Inference& inf, bool lm, int i) {
  const std::string spec = i % 3 == 0 ? "" : lm ? (i % 3 == 1 ? "0.1" : "1.0,1.3") : "cross.0.1";
  const inspect::Ablation ablation(inf, spec, "test");  // this thread's passes only
  Answers a;
  const std::string text = lm ? std::string("First Citizen").substr(0, 4 + i % 8)
                              : "1 2 3 " + std::to_string(1 + i % 9) + " 5";
  const data::Ids in = inf.encode(text, "test");
  if (lm) {
    Generator gen(static_cast<uint64_t>(i));
    inf.generate(in, 24, {.temperature = 0.8}, gen, true,
                 [&](int64_t id) { a.sampled.push_back(id); });
  } else {
    a.decoded.push_back(inf.decode({in}, {})[0]);
    a.decoded.push_back(inf.decode({in}, {.beam = 3})[0]);
  }
  const run::Inspection seen = inf.inspect(in);
  a.logits = floats(seen.logits);
  a.map = floats(seen.views.front().layers.front());
  if (i % 2 == 0)  // a recording pass (importance) beside the others
    a.heads = inspect::head_table_json(
                  inspect::head_table(inf, {.max_batches = 1, .probes = 2, .seed = 7}))
                  .dump();
  return a;
}

}  // namespace

TEST_CASE("inference: many threads on one run get the answers each gets alone, ablations apart") {
  constexpr int kThreads = 6;
  for (const char* precision : {"fp32", "bf16"}) {
    for (const bool lm : {true, false}) {
      INFO(precision << (lm ? " lm" : " copy"));
      const auto inf = open(lm ? "lm" : "copy", precision);
      std::vector<Answers> alone;
      for (int i = 0; i < kThreads; ++i) alone.push_back(ask(*inf, lm, i));
      CHECK_FALSE(alone[1] == alone[0]);  // an ablation changes the answer: the test can fail
      for (int round = 0; round < 2; ++round) {
        std::vector<Answers> together(kThreads);
        std::vector<std::string> errors(kThreads);
        std::latch start(kThreads);
        std::vector<std::thread> threads;
        for (int i = 0; i < kThreads; ++i)
          threads.emplace_back([&, i] {
            start.arrive_and_wait();
            try {
              together[i] = ask(*inf, lm, i);
            } catch (const std::exception& e) {
              errors[i] = e.what();
            }
          });
        for (std::thread& t : threads) t.join();
        for (int i = 0; i < kThreads; ++i) {
          INFO("question " << i << " round " << round << ": " << errors[i]);
          CHECK(errors[i].empty());
          CHECK(together[i] == alone[i]);
        }
      }
      CHECK_FALSE(inf->model().is_training());
    }
  }
}

TEST_CASE("inference: a cancelled call stops at its next pass and leaves nothing behind") {
  const auto inf = open("lm", "bf16");
  const data::Ids prompt = inf->encode("First", "test");
  auto sample = [&] {
    data::Ids out;
    Generator gen(3);
    inf->generate(prompt, 24, {.temperature = 0.8}, gen, true,
                  [&](int64_t id) { out.push_back(id); });
    return out;
  };
  const inspect::HeadTableOptions table{.max_batches = 1, .probes = 2, .seed = 7};
  const data::Ids reference = sample();
  const std::string heads = inspect::head_table_json(inspect::head_table(*inf, table)).dump();
  for (const int at : {1, 5, 9}) {  // the first check (a call's start), within, later
    INFO("cancelled at check " << at);
    int checks = 0;
    CancelToken token([&](CancelToken& t) {
      if (++checks == at) t.cancel("asked to stop");
    });
    data::Ids partial;
    {
      const CancelScope scope(token);
      Generator gen(3);
      CHECK_THROWS_WITH(inf->generate(prompt, 24, {.temperature = 0.8}, gen, true,
                                      [&](int64_t id) { partial.push_back(id); }),
                        "asked to stop");
      CHECK(partial.size() < 24);
      CHECK_THROWS_AS(inspect::head_table(*inf, table), Cancelled);  // still cancelled
    }
    checks = 0;
    {
      CancelToken later([&](CancelToken& t) {
        if (++checks == 4 * at) t.cancel("asked to stop");
      });
      const CancelScope scope(later);
      CHECK_THROWS_AS(inspect::head_table(*inf, table), Cancelled);
    }
    // Nothing left behind: the same answers, the model in eval mode, this thread's state back.
    CHECK(sample() == reference);
    CHECK(inspect::head_table_json(inspect::head_table(*inf, table)).dump() == heads);
    CHECK_FALSE(inf->model().is_training());
    CHECK_FALSE(nn::hooks_active());  // no hook layer left on this thread
    CHECK(current_precision() == Precision::fp32);
    CHECK(ag::is_recording());
    // The tape lock was released: another thread's recording pass runs.
    std::string other;
    std::thread([&] {
      other = inspect::head_table_json(inspect::head_table(*inf, table)).dump();
    }).join();
    CHECK(other == heads);
  }
}
