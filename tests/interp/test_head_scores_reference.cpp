// The head scores (interp/head_scores.hpp) against TransformerLens's definitions written out in
// torch (tests/interp/reference_head_scores.py, run with /usr/bin/python3) on the same
// attention weights: random masked softmaxes, float32 and float64, causal and bidirectional
// self-attention on repeated random tokens (repeats inside r included) and on padded batches,
// and cross-attention with padding on both sides. Every score, every exclusion option and two
// alignment windows; agreement to 1e-6 per head.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>

#include "interp/head_scores.hpp"
#include "interp/repeated_tokens.hpp"
#include "support/tensors.hpp"

using namespace qkv;
using namespace qkv::interp;
using namespace qkv::testing;
using nlohmann::json;

namespace {

using Allowed = std::function<bool(int64_t b, int64_t i, int64_t j)>;

json flat(const Tensor& t) {
  return {{"shape", t.shape()}, {"data", to_vector<double>(t.to(DType::f64).contiguous())}};
}

// Row-wise softmax of random logits over the keys allowed(b, i, j) lets query i see (a row
// with none is all zeros): (B, h, n, m) in dt.
Tensor random_pattern(const Shape& s, Generator& g, DType dt, const Allowed& allowed) {
  const Tensor logits = mul(randn(s, g, DType::f64), 2.0);
  const Tensor mask = build({s[0], 1, s[2], s[3]},
                            [&](const Shape& x) { return allowed(x[0], x[2], x[3]) ? 1.0 : 0.0; });
  const double ninf = -std::numeric_limits<double>::infinity();
  return softmax(where(gt(mask, 0.5), logits, full({}, ninf, DType::f64)), -1).to(dt);
}

// (B, n) int64: row b is lengths[b] tokens drawn from 4..vocab-1, then padding (0).
Tensor padded_tokens(const std::vector<int64_t>& lengths, int64_t n, int64_t vocab, Generator& g) {
  Tensor t = randint({static_cast<int64_t>(lengths.size()), n}, 4, vocab, g);
  for (size_t b = 0; b < lengths.size(); ++b)
    for (int64_t i = lengths[b]; i < n; ++i) t.data<int64_t>()[static_cast<int64_t>(b) * n + i] = 0;
  return t;
}

struct Case {
  std::string name;
  AttentionProbe probe;
  std::vector<HeadScore> scores;
  std::vector<ScoreOptions> options;
};

std::string run_key(HeadScore s, const ScoreOptions& o) {
  return std::string(name_of(s)) + "/" + std::to_string(o.exclude_bos) + "/" +
         std::to_string(o.exclude_current_token) + "/" + std::to_string(o.alignment_window);
}

// Self-attention cases: repeated random tokens (a vocabulary of 6 drawable ids, so r repeats
// tokens) and a padded batch; causal and bidirectional; both float dtypes.
std::vector<Case> self_cases(Generator& g) {
  const std::vector<HeadScore> scores = {HeadScore::previous_token, HeadScore::duplicate_token,
                                         HeadScore::induction, HeadScore::entropy};
  std::vector<ScoreOptions> options;
  for (bool bos : {false, true})
    for (bool current : {false, true})
      options.push_back({.exclude_bos = bos, .exclude_current_token = current});
  const Allowed causal = [](int64_t, int64_t i, int64_t j) { return j <= i; };
  const Tensor repeated = repeated_tokens(
      {.batch = 4, .length = 8, .vocab = 10, .specials = {0, 1, 2, 3}, .bos = 1}, g);
  const std::vector<int64_t> lengths = {13, 9, 4};
  const Tensor padded = padded_tokens(lengths, 13, 9, g);
  const Allowed causal_padded = [&](int64_t b, int64_t i, int64_t j) {
    return j <= i && j < lengths[b];
  };
  const Allowed padded_keys = [&](int64_t b, int64_t, int64_t j) { return j < lengths[b]; };
  std::vector<Case> out;
  for (DType dt : {DType::f32, DType::f64}) {
    const std::string suffix = dt == DType::f32 ? "_f32" : "_f64";
    out.push_back({"repeated_causal" + suffix,
                   {.pattern = random_pattern({4, 3, 17, 17}, g, dt, causal), .ids = repeated},
                   scores,
                   options});
    out.push_back({"padded_causal" + suffix,
                   {.pattern = random_pattern({3, 2, 13, 13}, g, dt, causal_padded),
                    .ids = padded,
                    .pad_id = 0},
                   scores,
                   options});
    out.push_back({"padded_bidirectional" + suffix,
                   {.pattern = random_pattern({3, 2, 13, 13}, g, dt, padded_keys),
                    .ids = padded,
                    .pad_id = 0},
                   scores,
                   options});
  }
  return out;
}

// Cross-attention: target lengths 7, 5, 1 over source lengths 10, 4, 6, padded with 0.
std::vector<Case> cross_cases(Generator& g) {
  const std::vector<int64_t> tgt = {7, 5, 1}, src = {10, 4, 6};
  const Tensor ids = padded_tokens(tgt, 7, 30, g), key_ids = padded_tokens(src, 10, 30, g);
  const Allowed keys = [&](int64_t b, int64_t, int64_t j) { return j < src[b]; };
  std::vector<Case> out;
  for (DType dt : {DType::f32, DType::f64})
    out.push_back({std::string("cross") + (dt == DType::f32 ? "_f32" : "_f64"),
                   {.pattern = random_pattern({3, 2, 7, 10}, g, dt, keys),
                    .ids = ids,
                    .key_ids = key_ids,
                    .pad_id = 0},
                   {HeadScore::alignment, HeadScore::entropy},
                   {{.alignment_window = 0}, {.alignment_window = 1}}});
  return out;
}

json to_torch(const Case& c) {
  json runs = json::array();
  for (HeadScore s : c.scores)
    for (const ScoreOptions& o : c.options)
      runs.push_back({{"key", run_key(s, o)},
                      {"score", name_of(s)},
                      {"exclude_bos", o.exclude_bos},
                      {"exclude_current_token", o.exclude_current_token},
                      {"window", o.alignment_window}});
  json j = {{"name", c.name},
            {"pattern", flat(c.probe.pattern)},
            {"ids", flat(c.probe.ids)},
            {"pad_id", c.probe.pad_id},
            {"runs", runs}};
  if (c.probe.key_ids.defined()) j["key_ids"] = flat(c.probe.key_ids);
  return j;
}

}  // namespace

TEST_CASE("reference: head scores match TransformerLens's definitions in torch", "[reference]") {
  if (std::system("/usr/bin/python3 -c 'import torch' > /dev/null 2>&1") != 0)
    QKV_SKIP("/usr/bin/python3 has no torch (Debian's python3-torch)");
  Generator g(45);
  std::vector<Case> cases = self_cases(g);
  for (Case& c : cross_cases(g)) cases.push_back(std::move(c));
  json in = json::array();
  for (const Case& c : cases) in.push_back(to_torch(c));
  TempDir dir("head_scores_ref");
  const std::string in_path = dir.file("in.json"), out_path = dir.file("out.json");
  std::ofstream(in_path) << in.dump();
  const std::string script = source_dir() + "/tests/interp/reference_head_scores.py";
  const std::string log = dir.file("log");
  const std::string cmd =
      "/usr/bin/python3 '" + script + "' '" + in_path + "' '" + out_path + "' > '" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO("command: " << cmd << "\nexit status " << rc << "\noutput:\n" << read_file(log));
  REQUIRE(rc == 0);
  const json out = json::parse(std::ifstream(out_path));
  double worst = 0;
  for (const Case& c : cases)
    for (HeadScore s : c.scores)
      for (const ScoreOptions& o : c.options) {
        const std::string key = run_key(s, o);
        INFO(c.name << " " << key);
        REQUIRE(out.at(c.name).contains(key));
        const std::vector<double> theirs = out[c.name][key].get<std::vector<double>>();
        const std::vector<double> ours = head_score(s, c.probe, o);
        REQUIRE(ours.size() == theirs.size());
        for (size_t h = 0; h < ours.size(); ++h) {
          INFO("head " << h << ": ours " << ours[h] << ", torch " << theirs[h]);
          CHECK(std::abs(ours[h] - theirs[h]) < 1e-6);
          worst = std::max(worst, std::abs(ours[h] - theirs[h]));
        }
      }
  std::printf("head scores reference: %zu cases, largest difference %.3g\n", cases.size(), worst);
}
