#include "python/errors.hpp"

namespace qkv::python {

void bind_errors(py::module_&) {
  // std::bad_alloc is pybind11's own MemoryError; a Python exception from a hook is
  // error_already_set, restored as it was.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const qkv::Error& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
}

}  // namespace qkv::python
