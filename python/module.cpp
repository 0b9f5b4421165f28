// The compiled part of the Python package qkv (python/qkv/__init__.py re-exports it): each
// area of the API binds its own functions (python/CMakeLists.txt lists the files).
#include <pybind11/pybind11.h>

#include "python/errors.hpp"
#include "python/run.hpp"

namespace qkv::python {
void bind_testing(py::module_& m);  // testing.cpp
void bind_train(py::module_& m);    // train.cpp
}  // namespace qkv::python

PYBIND11_MODULE(_qkv, m) {
  namespace qp = qkv::python;
  m.doc() = "qkv: trained runs, their weights and every activation as numpy arrays";
  qp::bind_errors(m);
  auto run = qp::bind_run(m);
  qp::bind_cache(run);
  qp::bind_tools(run);
  qp::bind_testing(m);
  qp::bind_train(m);
}
