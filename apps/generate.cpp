// qkv generate RUN [--prompt TEXT] [--tokens N] [--temperature T] [--top-k K] [--top-p P]
//                  [--seed S] [--no-cache]
// Samples text from a trained language model (model.kind = "decoder"), streaming each token to
// stdout as it is made; a summary line (tokens per second) goes to stderr.
#include <chrono>
#include <cstdio>
#include <string>

#include "apps/commands.hpp"
#include "core/parallel.hpp"
#include "data/lm.hpp"
#include "inspect/heads.hpp"
#include "run/inference.hpp"

namespace qkv::app {

int cmd_generate(const GenerateArgs& a) {
  // Bad options first: they need no run folder.
  QKV_CHECK(a.tokens >= 1, "generate", "--tokens must be >= 1, got ", a.tokens);
  run::SampleOptions o{a.temperature, a.top_k, a.top_p};
  run::validate(o);
  const auto inf = run::open_inference(a.run_dir, {.checkpoint = a.checkpoint,
                                                   .precision = a.precision,
                                                   .threads = a.threads,
                                                   .op = "generate"});
  // --ablate: the heads removed in every call below (a HookScope on this thread)
  const inspect::Ablation ablation(*inf, a.ablate, "generate");
  inf->require(run::Capability::generate, "generate");
  const data::Ids prompt = inf->encode(a.prompt, "generate: --prompt");
  const data::Vocab& vocab = inf->run().data.tgt_vocab;
  const bool pieces = inf->run().data.tgt_spm != nullptr;

  std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
  std::fflush(stdout);
  Generator gen(a.seed);
  int64_t made = 0;
  const auto t0 = std::chrono::steady_clock::now();
  data::LmDetokenizer text(vocab, pieces, a.prompt.empty() || a.prompt.back() == '\n');
  inf->generate(prompt, a.tokens, o, gen, !a.no_cache, [&](int64_t id) {
    const std::string s = text.next(id);
    std::fwrite(s.data(), 1, s.size(), stdout);
    std::fflush(stdout);  // streamed: each token as soon as it is made
    ++made;
  });
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("\n");
  std::fflush(stdout);
  if (!a.quiet)
    std::fprintf(stderr, "[generate] %lld tokens in %.3f s: %.1f tokens/s (%s, %d threads)\n",
                 static_cast<long long>(made), secs, secs > 0 ? made / secs : 0.0,
                 a.no_cache ? "no cache: the whole context every token" : "key/value cache",
                 get_num_threads());
  return 0;
}

}  // namespace qkv::app
