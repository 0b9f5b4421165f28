#include "python/inputs.hpp"

#include <pybind11/numpy.h>

#include <algorithm>
#include <cstring>

#include "core/machine.hpp"

namespace qkv::python {

namespace {

// Rows of ids of one length as (B, n) int64; ValueError naming op and the lengths otherwise.
Tensor rows_of(const std::vector<data::Ids>& rows, const char* op) {
  const size_t n = rows[0].size();
  for (const data::Ids& r : rows)
    if (r.size() != n) {
      std::string lengths;
      for (const data::Ids& q : rows)
        lengths += (lengths.empty() ? "" : ", ") + std::to_string(q.size());
      throw py::value_error(std::string(op) + ": the inputs have different lengths in tokens (" +
                            lengths + "); pass inputs of one length, or one at a time");
    }
  Tensor out = empty({static_cast<int64_t>(rows.size()), static_cast<int64_t>(n)}, DType::i64);
  for (size_t b = 0; b < rows.size(); ++b)
    std::memcpy(out.data<int64_t>() + b * n, rows[b].data(), n * sizeof(int64_t));
  return out;
}

// A numpy integer array (or nested list of ints), 1-d or 2-d, as (B, n) int64.
Tensor ids_batch(const py::handle& h, const char* op, const char* what) {
  const py::array a = py::array::ensure(h);
  if (!a) throw py::value_error(std::string(op) + ": " + what + " must be text or integer ids");
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::value_error(std::string(op) + ": " + what + " ids must be integers, got " +
                          std::string(py::str(a.dtype())));
  if (a.ndim() != 1 && a.ndim() != 2)
    throw py::value_error(std::string(op) + ": " + what + " ids must be (n) or (batch, n), got " +
                          std::to_string(a.ndim()) + " dimensions");
  const auto c = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  const int64_t B = a.ndim() == 2 ? a.shape(0) : 1, n = a.shape(a.ndim() - 1);
  Tensor out = empty({B, n}, DType::i64);
  if (B * n > 0)
    std::memcpy(out.data<int64_t>(), c.data(), static_cast<size_t>(B * n) * sizeof(int64_t));
  return out;  // empty batches are refused by the pass (run::check_batch_ids)
}

bool all_text(const py::sequence& s) {
  if (s.size() == 0) return false;
  for (const py::handle& x : s)
    if (!py::isinstance<py::str>(x)) return false;
  return true;
}

}  // namespace

Tensor batch_of(const run::Inference& inf, const py::handle& input, const char* op) {
  if (py::isinstance<py::str>(input))
    return rows_of({inf.encode(input.cast<std::string>(), op)}, op);
  if ((py::isinstance<py::list>(input) || py::isinstance<py::tuple>(input)) &&
      all_text(input.cast<py::sequence>())) {
    std::vector<data::Ids> rows;
    for (const py::handle& x : input.cast<py::sequence>())
      rows.push_back(inf.encode(x.cast<std::string>(), op));
    return rows_of(rows, op);
  }
  return ids_batch(input, op, "input");
}

Tensor decoder_input_of(const run::Inference& inf, const Tensor& input, const py::handle& given,
                        const char* op) {
  if (!inf.can(run::Capability::decode)) {
    if (!given.is_none())
      throw py::value_error(std::string(op) + ": decoder_input is for an encoder-decoder; " +
                            inf.run().dir + " reads its input alone");
    return Tensor();
  }
  if (!given.is_none()) return ids_batch(given, op, "decoder_input");
  run::check_batch_ids(input, inf.max_input_tokens(), "input");
  std::vector<data::Ids> rows;
  {
    py::gil_scoped_release release;
    for (int64_t b = 0; b < input.size(0); ++b) {
      const Tensor row = input.select(0, b).contiguous();
      const int64_t* p = row.data<int64_t>();
      rows.push_back(inf.inspect(data::Ids(p, p + row.numel())).tgt_in);
    }
  }
  try {
    return rows_of(rows, op);
  } catch (const py::value_error&) {
    throw py::value_error(std::string(op) +
                          ": the inputs' greedy outputs have different lengths; "
                          "pass decoder_input=, or one input at a time");
  }
}

void check_pass_memory(const run::Inference& inf, const Tensor& input, const Tensor& tgt,
                       const char* op) {
  const nn::ModelConfig& m = inf.run().config.model;
  const double B = static_cast<double>(input.size(0));
  const double n = static_cast<double>(std::max(input.size(1), tgt.defined() ? tgt.size(1) : 0));
  const double layers = static_cast<double>(m.encoder_layers + m.decoder_layers);
  const double V = static_cast<double>(inf.model().output_layer().weight.size(0));
  const double d = static_cast<double>(m.d_model), ff = static_cast<double>(m.d_ff);
  const double h = static_cast<double>(m.heads);
  // Each block's (n, d) points, its FFN's two (n, d_ff), three (n, n) maps per head (the pattern,
  // its scores, a cross-attention's), the logits; kept, then copied: twice, 4 bytes each.
  const double per_row = layers * (16 * n * d + 3 * n * ff + 3 * h * n * n) + 2 * n * V;
  try {
    require_memory(op, 2 * 4 * B * per_row,
                   "a pass over a batch of " + std::to_string(input.size(0)) + " x " +
                       std::to_string(static_cast<int64_t>(n)) + " with its activations");
  } catch (const qkv::Error& e) {
    PyErr_SetString(PyExc_MemoryError, e.what());
    throw py::error_already_set();
  }
}

}  // namespace qkv::python
