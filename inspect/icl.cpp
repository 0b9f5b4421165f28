// The in-context-learning score (inspect/icl.hpp).
#include "inspect/icl.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "data/lm.hpp"
#include "nn/model.hpp"

namespace qkv::inspect {

IclPositions icl_positions(int64_t n) {
  QKV_CHECK(n >= 2, "icl", "a context of ", n, " tokens has no early and late positions");
  IclPositions p;
  p.width = std::max<int64_t>(1, n / 16);
  p.late = n - p.width;
  p.early = std::max<int64_t>(0, n / 10 - p.width / 2);
  return p;
}

std::vector<double> position_losses(const Tensor& logits, const Tensor& labels) {
  QKV_CHECK(logits.dim() == 3 && labels.dim() == 2 && labels.size(0) == logits.size(0) &&
                labels.size(1) == logits.size(1),
            "icl", "logits (W, n, V) and labels (W, n), got ", logits.shape(), " and ",
            labels.shape());
  const int64_t W = logits.size(0), n = logits.size(1), V = logits.size(2);
  // Each row widened to float64 as it is read (exactly), not a float64 copy of all W x n x V.
  const bool f64 = logits.dtype() == DType::f64;
  const Tensor z = (f64 ? logits : logits.to(DType::f32)).contiguous();
  const std::vector<int64_t> y = to_vector<int64_t>(labels.contiguous());
  std::vector<double> loss(static_cast<size_t>(n), 0.0);
  std::vector<double> wide(static_cast<size_t>(V));
  for (int64_t w = 0; w < W; ++w)
    for (int64_t t = 0; t < n; ++t) {
      const int64_t at = (w * n + t) * V;
      const double* row = f64 ? z.data<double>() + at : wide.data();
      if (!f64) std::copy(z.data<float>() + at, z.data<float>() + at + V, wide.begin());
      const double mx = *std::max_element(row, row + V);
      double sum = 0;
      for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
      const int64_t label = y[static_cast<size_t>(w * n + t)];
      QKV_CHECK(label >= 0 && label < V, "icl", "label ", label, " outside the vocabulary of ", V);
      loss[static_cast<size_t>(t)] += (mx + std::log(sum) - row[label]) / static_cast<double>(W);
    }
  return loss;
}

double icl_score(const std::vector<double>& losses) {
  const IclPositions p = icl_positions(static_cast<int64_t>(losses.size()));
  const auto mean = [&](int64_t from) {
    double s = 0;
    for (int64_t t = from; t < from + p.width; ++t) s += losses[static_cast<size_t>(t)];
    return s / static_cast<double>(p.width);
  };
  return mean(p.late) - mean(p.early);
}

data::Batch icl_windows(const data::Ids& tokens, int64_t n, int64_t windows, const char* op) {
  const auto T = static_cast<int64_t>(tokens.size());
  QKV_CHECK(T >= n + 1, op, "the validation text has ", T,
            " tokens, fewer than one window of data.block_size + 1 = ", n + 1);
  QKV_CHECK(windows >= 1, op, "needs at least one window, got ", windows);
  const int64_t last = T - n - 1;  // the last offset with n + 1 tokens
  std::vector<int64_t> offsets;
  for (int64_t i = 0; i < windows; ++i)
    offsets.push_back(windows == 1 ? 0 : i * last / (windows - 1));
  return data::lm_batch(tokens, offsets, n);
}

double icl_score(const nn::Model& model, const data::Batch& windows) {
  // the decoder's input alone, unmasked: no source, every position real
  const Tensor logits =
      model.forward(Tensor(), windows.tgt_in, Tensor(), Tensor()).data();  // (W, n, V)
  return icl_score(position_losses(logits, windows.tgt_out));
}

}  // namespace qkv::inspect
