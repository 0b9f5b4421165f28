// qkv._qkv._testing: the C++ side of the Python tests' parity checks, through the library's
// own single-input paths rather than the module's: Inference::logits (one row, the pass
// patching and the lens run) with an nn::Hooks capture, and the same under inspect::Ablation
// (what --ablate installs). Not part of the API.
#include <pybind11/stl.h>

#include <chrono>

#include "inspect/heads.hpp"
#include "python/arrays.hpp"
#include "python/inputs.hpp"
#include "python/run.hpp"

namespace qkv::python {

namespace {

// (logits (T, V), {name: activation}) of one input and decoder input (ids), capturing the hook
// points matching names, every one of them float32.
py::tuple capture(const Run& r, const data::Ids& input, const data::Ids& tgt_in,
                  const std::vector<std::string>& names, const std::string& ablate) {
  const auto inf = r.get("_testing.capture");
  nn::Hooks hooks;
  hooks.capture = nn::names_matching(names);
  Tensor logits;
  {
    py::gil_scoped_release release;
    const inspect::Ablation ablation(*inf, ablate, "_testing.capture");
    logits = inf->logits(input, tgt_in, &hooks);
  }
  py::dict cache;
  for (const auto& [name, v] : hooks.cache) cache[py::str(name)] = float32_copy(v.data());
  return py::make_tuple(float32_copy(logits), cache);
}

// Writes value into element i (row-major) of the weight `name` through the tensor API (which
// marks the storage written): the C++ side of the zero-copy test's edit.
void set_param(const Run& r, const std::string& name, int64_t i, double value) {
  for (const auto& [n, var] : r.get("_testing.set_param")->model().named_parameters())
    if (n == name) {
      Tensor flat = var.data().view({var.data().numel()});
      flat.narrow(0, i, 1).fill_(value);
      return;
    }
  throw py::key_error(name);
}

// Seconds of one batch_logits pass over ids (B, n) capturing the hook points matching names,
// without handing anything to Python: the C++ side of the run_with_cache benchmark
// (scripts/bench-python-cache.py).
double time_pass(const Run& r, const py::handle& ids, const std::vector<std::string>& names) {
  const auto inf = r.get("_testing.time_pass");
  const Tensor batch = batch_of(*inf, ids, "_testing.time_pass").ids;
  nn::Hooks hooks;
  hooks.capture = nn::names_matching(names);
  py::gil_scoped_release release;
  const auto t0 = std::chrono::steady_clock::now();
  inf->batch_logits(batch, Tensor(), &hooks);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

void bind_testing(py::module_& m) {
  auto t = m.def_submodule("_testing", "The C++ side of the Python tests' parity checks.");
  t.def("capture", &capture, py::arg("run"), py::arg("input"), py::arg("decoder_input"),
        py::arg("names"), py::arg("ablate") = "");
  t.def("time_pass", &time_pass, py::arg("run"), py::arg("ids"), py::arg("names"));
  t.def("set_param", &set_param, py::arg("run"), py::arg("name"), py::arg("index"),
        py::arg("value"));
}

}  // namespace qkv::python
