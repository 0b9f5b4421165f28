// What a Python caller hands as a model's input, as the (B, n) int64 batch a pass reads.
//
//   "text"              one input, read as the run reads its inputs (Inference::encode) -> (1, n)
//   ["text", ...]       B inputs of the same length in tokens -> (B, n); ValueError naming the
//                       lengths otherwise (pass them one at a time)
//   ids                 a numpy integer array (or a list of ints): (n) -> (1, n), or (B, n)
//
// An encoder-decoder's decoder reads a second batch (decoder_input): given as ids, (T) or
// (B, T), of the output vocabulary and starting with <bos>; or None: each input's greedy
// output after <bos>, framed as Inference::inspect (and so `qkv lens`) frames it.
#pragma once
#include <pybind11/pybind11.h>

#include "core/tensor.hpp"
#include "run/inference.hpp"

namespace qkv::python {

namespace py = pybind11;

Tensor batch_of(const run::Inference& inf, const py::handle& input, const char* op);
// The decoder's batch for input (B, S): given, or the greedy framing (releases the GIL while it
// decodes). An undefined tensor for a model that reads no decoder input (a language model, a
// classifier: Capability::decode missing); given is then refused.
Tensor decoder_input_of(const run::Inference& inf, const Tensor& input, const py::handle& given,
                        const char* op);
// MemoryError naming op, before anything runs, when a pass over input (B, S) and tgt (B, T) or
// undefined, with every activation kept (a cache of every hook point and its float32 copies), would
// need more memory than the machine has (a rough estimate, core/machine.hpp): a huge batch is
// refused rather than ending the process.
void check_pass_memory(const run::Inference& inf, const Tensor& input, const Tensor& tgt,
                       const char* op);

}  // namespace qkv::python
