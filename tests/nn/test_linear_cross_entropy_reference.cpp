// The output layer and its cross-entropy as one bf16 op (ag::linear_cross_entropy in a bf16
// PrecisionScope: core/linear_cross_entropy.cpp) against PyTorch on the same inputs
// (tests/nn/reference_linear_cross_entropy.py, run with /usr/bin/python3):
// F.cross_entropy(F.linear(x, w, b) under torch.autocast("cpu", bfloat16), cast to float32,
// with ignore_index and label smoothing), and the same in float32. 300 rows (the fused op's
// chunks of 128 and a ragged one), d 40, a vocabulary of 1031, rows ignored at the chunks'
// edges; with a bias and label smoothing 0.1, and without either. Autocast also rounds the
// logits and their gradient to bfloat16 (qkv keeps the logits in float32), so the bf16 results
// are held to bfloat16's tolerance of autocast's and of PyTorch's float32; qkv's float32
// composition (the op outside the scope) to float32's of PyTorch's float32.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "core/precision.hpp"
#include "nn/safetensors.hpp"
#include "support/linear_cross_entropy.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;

namespace {

// The op's loss and gradients (loss, grad.x, grad.w, grad.b) in precision p.
std::map<std::string, Tensor> run(const LceProblem& c, Precision p) {
  PrecisionScope scope(p);
  const ag::Var x(c.x, true), w(c.w, true), b = c.b.defined() ? ag::Var(c.b, true) : ag::Var();
  const ag::Var loss = ag::linear_cross_entropy(x, w, b, c.t, c.ignore, c.eps);
  const std::string op = loss.impl()->node ? loss.impl()->node->op : "";
  CHECK(op == (p == Precision::bf16 ? "linear_cross_entropy" : "cross_entropy"));
  loss.backward();
  std::map<std::string, Tensor> out = {
      {"loss", loss.data().reshape({1})}, {"grad.x", x.grad()}, {"grad.w", w.grad()}};
  if (b.defined()) out["grad.b"] = b.grad();
  return out;
}

}  // namespace

TEST_CASE("reference: bf16 linear_cross_entropy matches PyTorch autocast", "[reference]") {
  SKIP_WITHOUT_BF16();
  TempDir dir("linear_cross_entropy_ref");
  const std::map<std::string, LceProblem> cases = {
      {"smoothing", lce_problem(true, -1, 0.1, 21)},
      {"plain", lce_problem(false, -100, 0.0, 22)},
  };
  std::map<std::string, std::map<std::string, Tensor>> ours_bf16, ours_fp32;
  for (const auto& [name, c] : cases) {
    NamedTensors in = {{"x", c.x}, {"w", c.w}, {"targets", c.t}};
    if (c.b.defined()) in.push_back({"b", c.b});
    const nlohmann::json config = {{"ignore_index", c.ignore}, {"label_smoothing", c.eps}};
    save_safetensors(dir.file(name + ".in.safetensors"), in, {{"config", config.dump()}});
    ours_bf16[name] = run(c, Precision::bf16);
    ours_fp32[name] = run(c, Precision::fp32);
  }
  const ReferenceRun ref =
      run_reference(source_path("tests/nn/reference_linear_cross_entropy.py"), dir);
  INFO(ref.report());
  REQUIRE(ref.status == 0);
  for (const auto& [name, ours] : ours_bf16) {
    const SafetensorsFile theirs = load_safetensors(dir.file(name + ".out.safetensors"));
    REQUIRE(ours.size() == (cases.at(name).b.defined() ? 4u : 3u));
    for (const auto& [part, t] : ours) {
      INFO(name << " " << part);
      const Tensor& autocast = theirs.get(part);
      const Tensor& torch32 = theirs.get("fp32." + part);
      const double vs_autocast = rel_err(t, autocast), vs_fp32 = rel_err(t, torch32);
      const double autocast_vs_fp32 = rel_err(autocast, torch32);
      const double fp32_vs_fp32 = rel_err(ours_fp32[name].at(part), torch32);
      std::printf(
          "bf16 linear_cross_entropy %-9s %-6s rel err vs autocast %.3g, vs fp32 %.3g (autocast "
          "vs fp32 %.3g, qkv fp32 vs torch fp32 %.3g)\n",
          name.c_str(), part.c_str(), vs_autocast, vs_fp32, autocast_vs_fp32, fp32_vs_fp32);
      REQUIRE(t.shape() == torch32.shape());
      const bool loss = part == "loss";
      CHECK(vs_autocast < (loss ? 2e-3 : 3e-2));
      CHECK(vs_fp32 < (loss ? 1e-3 : 1.5e-2));
      // the same definition (ignored rows, smoothing, the mean over counted rows) in float32
      CHECK(fp32_vs_fp32 < (loss ? 1e-5 : 1e-4));
    }
  }
}
