// Attribution patching (Nanda 2023, "Attribution Patching: Activation Patching At Industrial
// Scale"; Syed, Rager and Conmy 2023, "Attribution Patching Outperforms Automated Circuit
// Discovery"): activation patching's restored fraction (inspect/patch.hpp) estimated to first
// order, for every cell at once, from one recorded pass of the corrupted input and its backward.
// Putting the clean run's activation x' into the corrupted run at x changes the metric d by
//
//   d(patched) - d(corrupted) ~ (x' - x) . dd/dx, the gradient taken on the corrupted run
//
// (the run being patched: the Taylor expansion around it, TransformerLens's convention in
// Nanda's notebook), so
//
//   estimate = (x' - x) . dd/dx|corrupted / (d(clean) - d(corrupted))
//
// on the scale `qkv patch` reports (0: nothing restored, 1: the clean difference back), with
// its answers, its output side and its metric. Exact where d is linear in x. Cells:
//   head x position  each attention's head output z (1, h, n, d_head) at one query position;
//                    a head's estimate over all its positions (the head as qkv patch patches
//                    it) is their sum, the first-order term of patching them all
//   residual         the input side's resid_pre at (layer, position), as qkv patch patches it
// check K (1..kMaxPatchCheck, at most the cells): the K cells of largest |estimate| patched
// exactly (PatchRuns, the code qkv patch runs: a residual cell's value is qkv patch's, bit for
// bit), with the Pearson correlation of estimate and exact over those K.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "data/dataset.hpp"
#include "inspect/patch.hpp"
#include "inspect/work.hpp"

namespace qkv::run {
class Inference;
}

namespace qkv::inspect {

inline constexpr int64_t kMaxPatchCheck = 64;  // qkv patch --check

struct HeadEstimate {
  std::vector<std::string> positions;  // its query positions' labels (the clean run's)
  std::vector<double> by_position;     // the estimate at each; they sum to the head's
};

struct CheckedCell {
  std::string kind;   // "head" or "residual"
  std::string name;   // the head ("cross.1.0") or the hook point ("blocks.0.resid_pre")
  int64_t layer = 0;  // the head's or the resid_pre's layer
  int64_t head = -1;  // the head's index; -1 for a residual cell
  int64_t position = 0;
  std::string label;  // the position's token
  double estimate = 0, exact = 0;
};

struct AttributionPatching {
  Patching estimate;                 // laid out as patch_activations', each value an estimate
  std::vector<HeadEstimate> heads;   // per head, in the order of estimate.heads
  std::vector<CheckedCell> checked;  // the largest |estimate| first; empty without a check
  double correlation = 0;  // Pearson over checked; NaN for fewer than 2 or a constant column
};

// The cells of the pair of inputs `runs` compares, as attribution_patching bounds --check by
// them: every head at every query position, and every residual cell.
int64_t attribution_cells(const run::Inference& inf, const PatchRuns& runs);

// The estimate of every cell, and with check > 0 the exact patching of the `check` largest.
// The inputs as patch_activations takes them (qkv::Error naming "patch" otherwise); check
// outside 0..kMaxPatchCheck or above the cells is a qkv::Error naming --check.
AttributionPatching attribution_patching(const run::Inference& inf, const data::Ids& clean,
                                         const data::Ids& corrupt, int64_t check);

// The work of attribution_patching on inputs of n tokens with `check` exact cells: the two
// inspections, the clean run, the corrupted run, its recorded pass and backward (three), and a
// pass per checked cell.
Work attribution_patching_work(const run::Inference& inf, int64_t n, int64_t check);

// patch_json's object of r.estimate ("restored": the estimates), with "method":
// "attribution patching", each head's "positions" and "by_position", and with a check
// "check": {"k", "correlation" (null when undefined), "cells": [{"kind", "name", "layer",
// "index" (heads), "position", "label", "estimate", "exact"}...]}.
nlohmann::json attribution_patching_json(const AttributionPatching& r);

}  // namespace qkv::inspect
