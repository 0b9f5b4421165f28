// Tensors as numpy arrays, and back. Who keeps what alive:
//
//   weight_view   a zero-copy, writable float32 view of a tensor the model owns. The array's
//                 base is a capsule holding `keep` (the run's Inference, so the model lives) and
//                 the tensor's storage, so the memory stays valid however long the array lives,
//                 after run.close() or `del run` too.
//   owned_array   zero-copy of a tensor nothing else holds (a pass's logits): the capsule holds
//                 the tensor.
//   float32_copy  a fresh float32 array, row-major (activations: bf16 ones are widened).
//   taken_array   a pass's activation: zero-copy when nothing but the caller holds its memory
//                 and it is float32 and packed, float32_copy otherwise.
//   tensor_from   a Python array as a fresh qkv tensor (a hook's replacement), checked against
//                 the shape and dtype it must have.
#pragma once
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "core/tensor.hpp"
#include "data/dataset.hpp"

namespace qkv::python {

namespace py = pybind11;

// t (float32, any strides) as a writable array sharing its memory; keep stays alive with it.
py::array weight_view(const Tensor& t, std::shared_ptr<const void> keep);
// t as an array sharing its memory, the array its only owner from now on.
py::array owned_array(Tensor t);
// t converted to float32 and copied.
py::array float32_copy(const Tensor& t);
// t as a float32 array the caller may write: t's own memory when t is the only holder of its
// storage (a pass's fresh activation once the cache has let go of it) and float32 and packed;
// otherwise a copy, so an array never aliases memory a model or another array still reads.
py::array taken_array(Tensor t);
// a (float32, t's shape) as a new tensor of t's dtype; ValueError naming `what` (the hook point)
// when the dtype or the shape differs.
Tensor tensor_from(const py::handle& a, const Tensor& like, const std::string& what);
// int64 ids of any shape, copied (a batch of them: (B, n)).
py::array int64_copy(const Tensor& ids);
// ids as a 1-d int64 array.
py::array_t<int64_t> ids_array(const data::Ids& ids);
// A 1-d integer sequence (numpy or list) of ids in [0, limit) as ids; ValueError naming op
// otherwise.
data::Ids ids_from(const py::handle& ids, int64_t limit, const char* op);

}  // namespace qkv::python
