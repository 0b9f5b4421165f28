// qkv patch --approx (inspect/attribution_patching.hpp) on tiny trained runs of each family: the
// estimate against exact patching where hooks make the metric linear in the patched activation,
// --check's exact values against qkv patch's, the estimates against torch autograd on the tiny
// GPT's weights, and the command's output and errors through the binary.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "inspect/attribution_patching.hpp"
#include "inspect/heads.hpp"
#include "inspect/patch.hpp"
#include "nn/model.hpp"
#include "nn/safetensors.hpp"
#include "run/inference.hpp"
#include "support/inspect_runs.hpp"
#include "support/nn.hpp"
#include "support/process.hpp"

using namespace qkv;
using namespace qkv::testing;
using nlohmann::json;

namespace {

// The tiny GPT ("lm"), copy translator ("copy") and majority classifier ("majority").
const TempDir& runs() { return inspect_runs("attribution_patching"); }

std::unique_ptr<run::Inference> open(const std::string& name) { return open_tiny(runs(), name); }

// Each run's pair of inputs: of one length, with different answers.
struct Pair {
  std::string run, clean, corrupt;
};
const std::vector<Pair>& pairs() {
  static const std::vector<Pair> p{{"lm", "First Citizen", "KING HENRY: M"},
                                   {"copy", "5 6 7 8", "1 2 3 4"},
                                   {"majority", "0110111", "0000100"}};
  return p;
}

// Hooks under which the logits are linear in the activation at `from` (1, n, d): the stream the
// output layer reads is replaced, at every position, by from's last position minus its first
// (a constant part, as a bias, cancels: the answers move with the input; of one position, that
// one less `bias` when defined), read from this
// layer's own capture (the value after every layer's replacements, a patch's too).
void read_only(nn::Hooks& h, const nn::Model& m, const std::string& from,
               const ag::Var& bias = {}) {
  h.capture = nn::names_matching({from});
  h.add(read_point(m), [&h, from, bias](const ag::Var& x) {
    const ag::Var& f = h.cache.at(from);
    const ag::Var last = ag::narrow(f, 1, f.size(1) - 1, 1);
    const ag::Var read = f.size(1) > 1    ? ag::sub(last, ag::narrow(f, 1, 0, 1))
                         : bias.defined() ? ag::sub(last, ag::Var(bias.data()))
                                          : last;
    return ag::add(ag::mul(x, 0.0), read);
  });
}

const inspect::HeadEstimate& estimate_of(const inspect::AttributionPatching& r,
                                         const std::string& head, double* total) {
  for (size_t i = 0; i < r.heads.size(); ++i)
    if (r.estimate.heads[i].name == head) {
      *total = r.estimate.heads[i].restored;
      return r.heads[i];
    }
  FAIL("no head " << head);
  return r.heads.front();
}

// Inputs of one length for each run, to find a pair whose answers differ under some hooks.
std::vector<std::pair<std::string, std::string>> candidates(const std::string& run) {
  if (run == "lm")
    return {{"First Citizen", "KING HENRY: M"}, {"ROMEO: O, she", "JULIET: Ay me"},
            {"First Citizen", "Second Lady!!"}, {"What, ho! Boy", "Nay, my lord."},
            {"the king is d", "the queen is "}, {"MENENIUS: Why", "CORIOLANUS: H"}};
  if (run == "copy")
    return {{"5 6 7 8", "1 2 3 4"},
            {"1 2 3 4 5", "7 2 3 4 5"},
            {"3 1 4 1 5", "3 1 4 1 9"},
            {"8 8 2", "8 8 6"},
            {"5 6", "1 2"}};
  return {{"0110111", "0000100"}, {"0111", "0001"}, {"1111111", "0000000"}, {"1", "0"},
          {"10", "01"},           {"0001", "1110"}, {"1100", "0011"},       {"0000100", "0110111"}};
}

// The first candidate pair of the run whose answers differ under the calling thread's hooks;
// empty ids when none does.
std::pair<data::Ids, data::Ids> differing(const run::Inference& inf, const std::string& run) {
  return first_differing(inf, candidates(run));
}

}  // namespace

TEST_CASE("attribution patching equals exact patching where the metric is linear in the patch") {
  // A site's last layer read alone (its attention output, through W_O, to the output layer):
  // d is linear in that layer's z, so (clean - corrupted) . gradient is the patch's effect, at
  // each position and for the head at all of them. The input side's first resid_pre read alone:
  // the same for each residual cell of layer 0. (The hooks change the answers, so each reading
  // takes the first pair of inputs whose answers differ under it. The tiny copy model's decoder
  // self-attention read alone gives every source the same answer, and the classifier's first
  // resid_pre read alone every input: those are left out, the others are all compared.)
  int residuals = 0;
  for (const char* name : {"lm", "copy", "majority"}) {
    INFO(name);
    const auto inf = open(name);
    const std::vector<nn::AttentionSite> sites = inf->model().attention_sites();
    size_t compared = 0;
    for (const nn::AttentionSite& s : sites) {
      const int64_t L = s.layers - 1;
      const std::string out = s.prefix + std::to_string(L) + "." + s.point + "_out";
      INFO(s.name << ", reading " << out << " alone");
      nn::Hooks linear;
      read_only(linear, inf->model(), out, inf->model().W_O(s, L).bias);
      const nn::HookScope scope(linear);
      const auto [clean, corrupt] = differing(*inf, name);
      if (clean.empty()) {
        WARN(name << " " << s.name << ": no pair of inputs with different answers");
        continue;
      }
      ++compared;
      const inspect::AttributionPatching r = inspect::attribution_patching(*inf, clean, corrupt, 0);
      const inspect::PatchRuns exact(*inf, clean, corrupt);
      CHECK(r.estimate.clean_diff == exact.clean_diff);
      double moved = 0;
      for (int64_t h = 0; h < s.heads; ++h) {
        double total = 0;
        const inspect::HeadEstimate& e = estimate_of(r, s.head_name(L, h), &total);
        INFO("head " << s.head_name(L, h));
        CHECK(total == Approx(exact.head(s, L, h)).margin(1e-4));
        for (int64_t p = 0; p < static_cast<int64_t>(e.by_position.size()); ++p) {
          INFO("position " << p);
          const double want = exact.head(s, L, h, {p});
          moved += std::abs(want);
          CHECK(e.by_position[p] == Approx(want).margin(1e-4));
        }
      }
      CHECK(moved > 0.1);  // the cells restore something: the comparison is not of zeros
    }
    CHECK(compared >= std::max<size_t>(1, sites.size() - 1));
    const nn::AttentionSite& in = sites.front();
    const std::string point = in.prefix + "0.resid_pre";
    INFO("reading " << point << " alone");
    nn::Hooks linear;
    read_only(linear, inf->model(), point);
    const nn::HookScope scope(linear);
    const auto [clean, corrupt] = differing(*inf, name);
    if (clean.empty()) {
      WARN(name << " " << point << ": no pair of inputs with different answers");
      continue;
    }
    ++residuals;
    const inspect::AttributionPatching r = inspect::attribution_patching(*inf, clean, corrupt, 0);
    const inspect::PatchRuns exact(*inf, clean, corrupt);
    double moved = 0;
    for (int64_t p = 0; p < static_cast<int64_t>(clean.size()); ++p) {
      INFO("position " << p);
      const double want = exact.residual(point, p);
      moved += std::abs(want);
      CHECK(r.estimate.residual[0][p] == Approx(want).margin(1e-4));
    }
    CHECK(moved > 0.1);
  }
  CHECK(residuals >= 2);
}

TEST_CASE("attribution patching: --check's exact values are qkv patch's, bit for bit") {
  for (const Pair& pr : pairs()) {
    INFO(pr.run);
    const std::string args = "patch " + quoted(runs().file(pr.run)) + " --clean " +
                             quoted(pr.clean) + " --corrupt " + quoted(pr.corrupt) +
                             " --json --threads 1";
    const RunResult exact = run_qkv(args);
    INFO(exact.output);
    REQUIRE(exact.status == 0);
    const json e = json::parse(exact.output);
    const auto inf = open(pr.run);
    const inspect::AttributionPatching lib = inspect::attribution_patching(
        *inf, inf->encode(pr.clean, "test"), inf->encode(pr.corrupt, "test"), 0);
    int64_t cells = 0;
    for (const auto& h : lib.heads) cells += static_cast<int64_t>(h.by_position.size());
    for (const auto& row : lib.estimate.residual) cells += static_cast<int64_t>(row.size());
    const int64_t k = std::min<int64_t>(cells, inspect::kMaxPatchCheck);
    const RunResult approx = run_qkv(args + " --approx --check " + std::to_string(k));
    INFO(approx.output);
    REQUIRE(approx.status == 0);
    const json a = json::parse(approx.output);
    CHECK(a["method"] == "attribution patching");
    CHECK(a["clean_answer"] == e["clean_answer"]);
    CHECK(a["clean_diff"] == e["clean_diff"]);
    CHECK(a["corrupt_diff"] == e["corrupt_diff"]);
    REQUIRE(a["heads"].size() == e["heads"].size());
    CHECK(a["residual"].size() == e["residual"].size());
    REQUIRE(a["check"]["cells"].size() == static_cast<size_t>(k));
    int64_t compared = 0;
    double last = 1e300;
    for (const json& c : a["check"]["cells"]) {
      INFO(c.dump());
      const double est = c["estimate"].get<double>();
      CHECK(std::abs(est) <= last);  // the largest first
      last = std::abs(est);
      if (c["kind"] == "residual") {
        CHECK(c["exact"].get<double>() ==
              e["residual"][c["layer"].get<size_t>()][c["position"].get<size_t>()].get<double>());
        ++compared;
        continue;
      }
      // a head of one query position: patching it there is patching the head
      for (size_t i = 0; i < a["heads"].size(); ++i)
        if (a["heads"][i]["head"] == c["name"] && a["heads"][i]["by_position"].size() == 1) {
          CHECK(c["exact"].get<double>() == e["heads"][i]["restored"].get<double>());
          ++compared;
        }
    }
    CHECK(compared > 0);
    // the library's estimates are the command's
    CHECK(attribution_patching_json(lib)["heads"] == a["heads"]);
    CHECK(attribution_patching_json(lib)["residual"] == a["residual"]);
  }
}

TEST_CASE("attribution patching: the command's table, and one line for each bad request") {
  const std::string copy = quoted(runs().file("copy"));
  const std::string io = " --clean '1 2 3 4 5' --corrupt '7 2 3 4 5'";
  const RunResult t = run_qkv("patch " + copy + io + " --approx --check 3 --threads 1");
  INFO(t.output);
  REQUIRE(t.status == 0);
  CHECK(t.output.find("estimated restored fraction") != std::string::npos);
  CHECK(t.output.find("the 3 largest estimates patched exactly") != std::string::npos);
  CHECK(t.output.find("correlation of estimate and exact") != std::string::npos);
  // the same bits twice
  CHECK(run_qkv("patch " + copy + io + " --approx --check 3 --threads 1").output == t.output);
  for (const auto& [args, says] : std::vector<std::pair<std::string, std::string>>{
           {io + " --approx --check 0", "--check must be 1..64, got 0"},
           {io + " --approx --check 65", "--check must be 1..64, got 65"},
           {io + " --check 3", "--check needs --approx"},
           {" --clean '5 6' --corrupt '1 2' --approx --check 64", "is more than the 20 cells"},
           {io + " --approx --check 64 --max-work 1000", "more than the bound of 1k (--max-work"},
           {" --clean '1 2 3' --corrupt '1 2' --approx", "need the same length"}}) {
    const RunResult r = run_qkv("patch " + copy + args);
    INFO(args << ": " << r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find(says) != std::string::npos);
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }
}

TEST_CASE("reference: attribution patching's estimates match torch autograd on the tiny GPT",
          "[reference]") {
  // the tiny GPT's weights in torch (float64, tests/apps/reference_attribution_patching.py
  // building tests/nn/reference_nn.py's GPT with its attention written out to reach z)
  TempDir dir("attribution_patching_reference");
  const auto inf = open("lm");
  const Pair& pr = pairs().front();
  const data::Ids clean = inf->encode(pr.clean, "test"), corrupt = inf->encode(pr.corrupt, "test");
  const inspect::AttributionPatching ours = inspect::attribution_patching(*inf, clean, corrupt, 0);
  const inspect::PatchRuns runs(*inf, clean, corrupt);
  json cfg = gpt_reference_config(*inf);
  cfg.update({{"a", runs.clean_id()}, {"b", runs.corrupt_id()}});
  save_reference_case(
      dir.file("lm.in.safetensors"), *inf,
      {{"input.clean", run::row_of(clean)}, {"input.corrupt", run::row_of(corrupt)}}, cfg);
  SKIP_WITHOUT_TORCH();
  const ReferenceRun ref =
      run_reference(source_dir() + "/tests/apps/reference_attribution_patching.py", dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  const nn::SafetensorsFile theirs = nn::load_safetensors(dir.file("lm.out.safetensors"));
  const std::vector<double> diff = to_vector<double>(theirs.get("diff").to(DType::f64));
  CHECK(ours.estimate.clean_diff == Approx(diff[0]).margin(1e-4));
  CHECK(ours.estimate.corrupt_diff == Approx(diff[1]).margin(1e-4));
  const std::vector<double> heads = to_vector<double>(theirs.get("heads").to(DType::f64));
  const std::vector<double> residual = to_vector<double>(theirs.get("residual").to(DType::f64));
  std::vector<double> mine;
  for (const auto& h : ours.heads)
    mine.insert(mine.end(), h.by_position.begin(), h.by_position.end());
  REQUIRE(mine.size() == heads.size());
  double top = 0, worst = 0;
  for (const double v : heads) top = std::max(top, std::abs(v));
  for (size_t i = 0; i < heads.size(); ++i) {
    INFO("head cell " << i << " (max|torch| " << top << ")");
    worst = std::max(worst, std::abs(mine[i] - heads[i]));
    CHECK(mine[i] == Approx(heads[i]).margin(1e-4 * std::max(top, 1.0)));
  }
  mine.clear();
  for (const auto& row : ours.estimate.residual) mine.insert(mine.end(), row.begin(), row.end());
  REQUIRE(mine.size() == residual.size());
  for (size_t i = 0; i < residual.size(); ++i) {
    INFO("residual cell " << i);
    worst = std::max(worst, std::abs(mine[i] - residual[i]));
    CHECK(mine[i] == Approx(residual[i]).margin(1e-4 * std::max(top, 1.0)));
  }
  std::printf("attribution patching reference: max|torch| %.4g, worst error %.3g\n", top, worst);
}
