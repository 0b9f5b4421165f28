// What a Python caller hands as a model's input, as the (B, n) int64 batch a pass reads.
//
//   "text"              one input, read as the run reads its inputs (Inference::encode) -> (1, n)
//   ["text", ...]       B inputs -> (B, n), n the longest; shorter rows padded at the end (with
//                       0, the library's padding id) and masked in the pass
//   [ids, ...]          B rows of ids (each a 1-d integer sequence), padded likewise
//   ids                 a numpy integer array (or a list of ints): (n) -> (1, n), or (B, n),
//                       every position real
//
// An encoder-decoder's decoder reads a second batch (decoder_input): given as ids, (T) or
// (B, T), or a list of B rows of ids, of the output vocabulary and starting with <bos>; or
// None: each input's greedy output after <bos>, framed as Inference::inspect (and so `qkv lens`)
// frames it, padded at the end when their lengths differ.
#pragma once
#include <pybind11/pybind11.h>

#include <vector>

#include "core/tensor.hpp"
#include "run/inference.hpp"

namespace qkv::python {

namespace py = pybind11;

// A batch as a pass reads it.
struct Batch {
  Tensor ids;                    // (B, n) int64; undefined: no batch (a model without a decoder)
  std::vector<int64_t> lengths;  // each row's real positions, the first ones of the row
  bool listed = false;           // assembled from rows (a list, or the greedy outputs)
  bool padded() const;           // some row shorter than n
  Tensor valid() const;          // (B, n) bool, true on real positions
  // What batch_logits reads: valid() when padded, else undefined (every position real).
  Tensor pass_valid() const { return padded() ? valid() : Tensor(); }
  // Row b's real ids.
  data::Ids row(int64_t b) const;
};

Batch batch_of(const run::Inference& inf, const py::handle& input, const char* op);
// The decoder's batch for input: given, or the greedy framing (releases the GIL while it
// decodes). No ids for a model that reads no decoder input (a language model, a classifier:
// Capability::decode missing); given is then refused.
Batch decoder_input_of(const run::Inference& inf, const Batch& input, const py::handle& given,
                       const char* op);
// MemoryError naming op, before anything runs, when a pass over input (B, S) and tgt (B, T) or
// undefined, with every activation kept (a cache of every hook point and its float32 copies), would
// need more memory than the machine has (a rough estimate, core/machine.hpp): a huge batch is
// refused rather than ending the process.
void check_pass_memory(const run::Inference& inf, const Tensor& input, const Tensor& tgt,
                       const char* op);

}  // namespace qkv::python
