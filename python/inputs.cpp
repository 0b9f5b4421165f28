#include "python/inputs.hpp"

#include <pybind11/numpy.h>

#include <algorithm>
#include <cstring>

#include "core/machine.hpp"

namespace qkv::python {

namespace {

// Rows of ids as (B, n) int64, n the longest row, shorter ones padded at the end with 0;
// ValueError naming op and the row when one is empty.
Batch rows_of(const std::vector<data::Ids>& rows, const char* op) {
  Batch out;
  int64_t n = 0;
  for (size_t b = 0; b < rows.size(); ++b) {
    if (rows[b].empty())
      throw py::value_error(std::string(op) + ": row " + std::to_string(b) +
                            " of the batch is empty");
    out.lengths.push_back(static_cast<int64_t>(rows[b].size()));
    n = std::max(n, out.lengths.back());
  }
  out.ids = zeros({static_cast<int64_t>(rows.size()), n}, DType::i64);
  for (size_t b = 0; b < rows.size(); ++b)
    std::memcpy(out.ids.data<int64_t>() + b * n, rows[b].data(), rows[b].size() * sizeof(int64_t));
  return out;
}

// A numpy integer array (or nested list of ints), 1-d or 2-d, as (B, n) int64, every position
// real; with one_d, 1-d only (a row of a list).
Tensor ids_tensor(const py::handle& h, const char* op, const char* what, bool one_d = false) {
  const py::array a = py::array::ensure(h);
  if (!a) throw py::value_error(std::string(op) + ": " + what + " must be text or integer ids");
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::value_error(std::string(op) + ": " + what + " ids must be integers, got " +
                          std::string(py::str(a.dtype())));
  if (a.ndim() != 1 && (one_d || a.ndim() != 2))
    throw py::value_error(std::string(op) + ": " + what + " ids must be " +
                          (one_d ? "(n) in a list of rows" : "(n) or (batch, n)") + ", got " +
                          std::to_string(a.ndim()) + " dimensions");
  const auto c = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  const int64_t B = a.ndim() == 2 ? a.shape(0) : 1, n = a.shape(a.ndim() - 1);
  Tensor out = empty({B, n}, DType::i64);
  if (B * n > 0)
    std::memcpy(out.data<int64_t>(), c.data(), static_cast<size_t>(B * n) * sizeof(int64_t));
  return out;  // empty batches are refused by the pass (run::check_batch_ids)
}

Batch ids_batch(const py::handle& h, const char* op, const char* what) {
  Batch out;
  out.ids = ids_tensor(h, op, what);
  out.lengths.assign(static_cast<size_t>(out.ids.size(0)), out.ids.size(1));
  return out;
}

// A list or tuple whose items are each a text or a sequence of ids (not a number): rows.
bool is_rows(const py::handle& h) {
  if (!py::isinstance<py::list>(h) && !py::isinstance<py::tuple>(h)) return false;
  const auto s = h.cast<py::sequence>();
  if (s.size() == 0) return false;
  for (const py::handle& x : s)
    if (!py::isinstance<py::str>(x) && !py::isinstance<py::list>(x) &&
        !py::isinstance<py::tuple>(x) && !py::isinstance<py::array>(x))
      return false;
  return true;
}

// Each row: a text (when texts, read by the run) or 1-d ids.
Batch listed_rows(const run::Inference& inf, const py::sequence& rows, bool texts, const char* op,
                  const char* what) {
  std::vector<data::Ids> out;
  for (const py::handle& x : rows) {
    if (py::isinstance<py::str>(x)) {
      if (!texts) throw py::value_error(std::string(op) + ": " + what + " takes ids, not text");
      out.push_back(inf.encode(x.cast<std::string>(), op));
    } else if (py::len(x) == 0) {
      out.emplace_back();  // refused by rows_of, naming the row
    } else {
      const Tensor t = ids_tensor(x, op, what, true);
      const int64_t* p = t.data<int64_t>();
      out.emplace_back(p, p + t.numel());
    }
  }
  Batch b = rows_of(out, op);
  b.listed = true;
  return b;
}

}  // namespace

bool Batch::padded() const {
  for (int64_t n : lengths)
    if (n < ids.size(1)) return true;
  return false;
}

Tensor Batch::valid() const {
  Tensor v = zeros({ids.size(0), ids.size(1)}, DType::b8);
  for (size_t b = 0; b < lengths.size(); ++b)
    std::memset(v.data<uint8_t>() + b * ids.size(1), 1, static_cast<size_t>(lengths[b]));
  return v;
}

data::Ids Batch::row(int64_t b) const {
  const int64_t* p = ids.data<int64_t>() + b * ids.size(1);
  return data::Ids(p, p + lengths[static_cast<size_t>(b)]);
}

Batch batch_of(const run::Inference& inf, const py::handle& input, const char* op) {
  if (py::isinstance<py::str>(input))
    return rows_of({inf.encode(input.cast<std::string>(), op)}, op);
  if (is_rows(input)) return listed_rows(inf, input.cast<py::sequence>(), true, op, "input");
  return ids_batch(input, op, "input");
}

Batch decoder_input_of(const run::Inference& inf, const Batch& input, const py::handle& given,
                       const char* op) {
  if (!inf.can(run::Capability::decode)) {
    if (!given.is_none())
      throw py::value_error(std::string(op) + ": decoder_input is for an encoder-decoder; " +
                            inf.run().dir + " reads its input alone");
    return Batch();
  }
  if (!given.is_none())
    return is_rows(given) ? listed_rows(inf, given.cast<py::sequence>(), false, op, "decoder_input")
                          : ids_batch(given, op, "decoder_input");
  run::check_batch_ids(input.ids, inf.max_input_tokens(), "input");
  std::vector<data::Ids> rows;
  {
    py::gil_scoped_release release;
    for (int64_t b = 0; b < input.ids.size(0); ++b)
      rows.push_back(inf.inspect(input.row(b)).tgt_in);
  }
  Batch out = rows_of(rows, op);
  out.listed = input.listed || out.padded();
  return out;
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
