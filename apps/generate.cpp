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
#include "run/limits.hpp"
#include "run/lm.hpp"
#include "run/run.hpp"

namespace qkv::app {

int cmd_generate(const GenerateArgs& a) {
  // Bad options first: they need no run folder.
  QKV_CHECK(a.tokens >= 1, "generate", "--tokens must be >= 1, got ", a.tokens);
  run::SampleOptions o{a.temperature, a.top_k, a.top_p};
  run::validate(o);
  run::LoadedRun r = run::load_run(a.run_dir, a.checkpoint);
  QKV_CHECK(r.task().language_model(), "generate", a.run_dir,
            " is not a language model (model.kind = \"decoder\"); use qkv translate");
  set_num_threads(a.threads > 0 ? a.threads : static_cast<int>(r.config.threads));
  // The products' precision for all the decoding below (the weights stay fixed in it).
  const PrecisionScope precision(
      run::choose_precision(a.precision, r.config.precision, "precision"));
  const data::Vocab& vocab = r.data.tgt_vocab;
  const data::SentencePiece* spm = r.data.tgt_spm.get();  // null: characters
  const data::Ids prompt = data::encode_lm_text(a.prompt, vocab, spm, "generate: --prompt");
  QKV_CHECK(!prompt.empty(), "generate", "--prompt is empty (the default is a newline)");
  const int64_t block = r.config.data.block_size, positions = r.lm("generate").max_positions();
  const int64_t context = std::min(block, positions);
  QKV_CHECK(static_cast<int64_t>(prompt.size()) <= context, "generate", "--prompt has ",
            prompt.size(), spm ? " pieces" : " characters", ", more than the model's context of ",
            context, " (",
            positions < block ? "learned positions, model.max_len" : "data.block_size", " = ",
            context, ")");

  std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
  std::fflush(stdout);
  Generator gen(a.seed);
  int64_t made = 0;
  const auto t0 = std::chrono::steady_clock::now();
  data::LmDetokenizer text(vocab, spm != nullptr, a.prompt.empty() || a.prompt.back() == '\n');
  run::generate(r.lm("generate"), prompt, a.tokens, context, o, gen, !a.no_cache, [&](int64_t id) {
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
