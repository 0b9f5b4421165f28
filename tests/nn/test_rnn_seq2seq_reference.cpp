// nn::RecurrentSeq2Seq against a torch re-implementation of the papers' equations on the same
// weights (tests/nn/reference_rnn_seq2seq.py, /usr/bin/python3): the teacher-forced logits,
// Bahdanau's alignment weights, the parameters' gradients and a greedy decode (each argmax fed
// back through decode_step), with and without attention, in float32. Widths no multiple of 16,
// two encoder layers, padded sources; error per tensor max|ours - torch| / max|torch|.
#include <catch2/catch.hpp>

#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "nn/rnn_seq2seq.hpp"
#include "nn/safetensors.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

constexpr int64_t kSteps = 7, kBos = 1;

struct Case {
  std::string name;
  nlohmann::json config;
  NamedTensors files;
  std::map<std::string, Tensor> ours;
};

Case make_case(const std::string& name, bool attend, int64_t d, int64_t layers,
               const std::vector<int64_t>& lengths, int64_t T, uint64_t seed) {
  Generator g(seed);
  ModelConfig c;
  c.src_vocab = 23;
  c.tgt_vocab = 29;
  c.d_model = d;
  c.heads = 1;
  c.encoder = EncoderKind::gru;
  c.decoder = DecoderKind::gru;
  c.encoder_layers = layers;
  c.decoder_layers = 1;
  c.position = PositionKind::none;
  c.attention = AttentionKind::additive;
  c.cross_attention = attend;
  c.scale_embedding = false;
  c.dropout = 0.1;  // off in eval
  RecurrentSeq2Seq m(c, g);
  m.eval();
  const int64_t B = static_cast<int64_t>(lengths.size()), S = lengths[0];
  Tensor src = zeros({B, S}, DType::i64), tgt = zeros({B, T}, DType::i64);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t j = 0; j < lengths[b]; ++j)
      src.data<int64_t>()[b * S + j] = static_cast<int64_t>(g.next_u64() % 21) + 2;
    for (int64_t t = 0; t < T; ++t)
      tgt.data<int64_t>()[b * T + t] = t == 0 ? kBos : static_cast<int64_t>(g.next_u64() % 27) + 2;
  }
  const Tensor sv = valid_mask(lengths, S), tv = ones({B, T}, DType::b8);
  Case k{name,
         {{"d", d},
          {"encoder_layers", layers},
          {"cross_attention", attend},
          {"scale_embedding", false},
          {"bos", kBos},
          {"steps", kSteps}},
         {{"src", src}, {"src_valid", sv}, {"tgt_in", tgt}},
         {}};
  Hooks h;
  h.capture = names_matching({"decoder.rnn.0.cross.pattern"});
  Var logits;
  {
    HookScope scope(h);
    logits = m.forward(src, tgt, sv, tv);
  }
  k.ours["logits"] = logits.data();
  if (attend) k.ours["pattern"] = h.cache.at("decoder.rnn.0.cross.pattern").data().select(1, 0);
  const Tensor R = randn(logits.shape(), g);
  k.files.push_back({"R", R});
  std::vector<Var> wrt;
  for (const auto& [pname, p] : m.named_parameters()) {
    wrt.push_back(p);
    k.files.push_back({"param." + pname, p.data()});
  }
  const std::vector<Tensor> grads = ag::grad({logits}, {R}, wrt);
  for (size_t i = 0; i < wrt.size(); ++i)
    k.ours["grad.param." + m.named_parameters()[i].first] = grads[i];
  // greedy: argmax fed back from <bos>, kSteps steps
  ag::NoGrad no_grad;
  DecodeState st = m.start_decoding(m.encode(src, sv), sv);
  Tensor tok = full({B}, static_cast<double>(kBos), DType::i64);
  std::vector<Tensor> toks, outs;
  for (int64_t t = 0; t < kSteps; ++t) {
    const Tensor out = m.decode_step(st, tok).data();
    tok = argmax(out, -1);
    toks.push_back(tok.unsqueeze(1));
    outs.push_back(out.unsqueeze(1));
  }
  k.ours["greedy"] = concat(toks, 1);
  k.ours["greedy_logits"] = concat(outs, 1);
  return k;
}

}  // namespace

TEST_CASE("reference: the GRU encoder-decoders with and without attention match torch",
          "[reference]") {
  TempDir dir("rnn_seq2seq_ref");
  const std::vector<Case> cases = {
      make_case("additive_d36_2layers", true, 36, 2, {23, 17, 1}, 9, 1),
      make_case("fixed_d36_2layers", false, 36, 2, {23, 17, 1}, 9, 2),
      make_case("additive_d18", true, 18, 1, {5, 5}, 3, 3),
      make_case("fixed_d50", false, 50, 1, {19, 4, 11}, 6, 4),
  };
  for (const Case& c : cases)
    save_safetensors(dir.file(c.name + ".in.safetensors"), c.files, {{"config", c.config.dump()}});
  const ReferenceRun ref = run_reference(source_path("tests/nn/reference_rnn_seq2seq.py"), dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  for (const Case& c : cases) {
    const SafetensorsFile theirs = load_safetensors(dir.file(c.name + ".out.safetensors"));
    for (const auto& [name, t] : c.ours) {
      INFO(c.name << " " << name);
      const Tensor want = theirs.get(name);
      if (name == "greedy") {
        CHECK(same_bits(t, want.to(DType::i64)));
        continue;
      }
      const double err = rel_err(t, want), size = max(abs(want)).item();
      std::printf("rnn seq2seq reference %-22s %-36s max|torch| %8.3g rel err %.3g\n",
                  c.name.c_str(), name.c_str(), size, err);
      CHECK(err < 1e-5);
      CHECK(size > 0);
    }
  }
}
