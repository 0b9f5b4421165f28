// qkv.open(path) -> Run: a trained run folder loaded for inference (run::open_inference), as
// Python holds it.
//
// Ownership: the Run holds the run's Inference (its config, data, vocabularies and model)
// through a shared_ptr. Every call copies that pointer before it releases the GIL, and every
// zero-copy weight view (run.params) holds one too, so close() -- or `del run` -- only drops the
// Run's own reference: the memory goes when the last view and the last call under way are done.
// A closed Run refuses further calls with ValueError.
//
// Threads: the GIL is released during every pass (forward, decode, sampling, scoring); calls on
// one Run from several Python threads run as run::Inference allows (concurrently, each pass on
// its own thread's hooks).
#pragma once
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "run/inference.hpp"

namespace qkv::python {

namespace py = pybind11;

class Run {
 public:
  Run(std::string path, const run::OpenOptions& o);
  // The Inference for a call named op; ValueError "run.OP: the run PATH is closed" after close().
  std::shared_ptr<const run::Inference> get(const char* op) const;
  void close() { inf_.reset(); }
  bool closed() const { return inf_ == nullptr; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::shared_ptr<const run::Inference> inf_;
};

// qkv.open and the Run's names, tokens and weights; the class, for the other files' methods.
py::class_<Run> bind_run(py::module_& m);
// run_with_cache, run_with_hooks (cache.cpp).
void bind_cache(py::class_<Run>& run);
// translate, generate, classify, score, heads, lens, patch (tools.cpp).
void bind_tools(py::class_<Run>& run);

}  // namespace qkv::python
