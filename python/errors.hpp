// Errors as Python sees them. Every qkv::Error reaches Python as an exception with the command
// line's one-line message ("forward: the input has 300 positions; the model reads 1 to 256"):
//
//   ValueError          qkv::Error by default: a bad argument, a closed run, a shape or dtype
//                       a hook returned, an id out of range
//   FileNotFoundError   a run folder that is not there (qkv.open)
//   KeyError            a hook point the model does not have (with the nearest names)
//   MemoryError         an allocation that failed (std::bad_alloc: a huge batch)
//
// A Python exception raised inside a hook function passes through the C++ pass unchanged.
#pragma once
#include <pybind11/pybind11.h>

#include <string>
#include <utility>

#include "core/error.hpp"

namespace qkv::python {

namespace py = pybind11;

// Registers the translation of qkv::Error (ValueError) for every function of the module.
void bind_errors(py::module_& m);

// f() with a qkv::Error it throws raised as KeyError (an unknown name) instead.
template <class F>
auto key_error_of(F&& f) {
  try {
    return std::forward<F>(f)();
  } catch (const qkv::Error& e) {
    throw py::key_error(e.what());
  }
}

}  // namespace qkv::python
