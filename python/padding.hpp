// Padding in what run_with_cache hands out. A batch of unequal lengths is padded at the end and
// masked in the pass (python/inputs.hpp); the activations at padded positions mean nothing, so
// the cache and the logits hold 0 there, along each axis of positions on the padded side:
//
//   (B, n, ...)            axis 1: the residual stream, embeddings, norms, sublayer outputs,
//                          mlp.*, logits (an encoder classifier's (B, 1, C): none)
//   attn.q, .z / .k, .v    axis 2 (B, h, n, d_head): the queries' side / the keys' side
//   attn.pattern           axis 2 (queries' side) and axis 3 (keys' side) of (B, h, n, m)
//   rnn.L.h, rnn.L.c, pooled   none
//
// The side of a point: an encoder-decoder's encoder.* and its cross-attention's keys and values
// are the input's; the rest of decoder.* and its logits the decoder input's. A one-sided model
// (a language model, a classifier) has the input's alone.
#pragma once
#include <pybind11/numpy.h>

#include <string>

#include "python/inputs.hpp"

namespace qkv::python {

// Zeroes a (float32, C-contiguous, the hook point `name`'s activation or the logits) at the
// padded positions of input and decoder (decoder.ids undefined: a one-sided model). An axis
// whose length is not its side's padded length is left alone.
void zero_padding(py::array& a, const std::string& name, const Batch& input, const Batch& decoder);

}  // namespace qkv::python
