// run_with_cache and run_with_hooks: one teacher-forced pass (Inference::batch_logits) with a
// layer of hooks (nn/hooks.hpp) made from Python's arguments, pushed on the calling thread for
// the call only.
//
// A Python hook function gets a float32 copy of the activation (writable) and its hook name,
// and returns a replacement or None (then the copy, edited in place or not, flows on): fn(a,
// name). The copy keeps the model's own tensors out of Python's reach, so an array a hook keeps
// stays valid, and a failed hook leaves nothing changed.
#include <pybind11/stl.h>

#include <memory>

#include "python/arrays.hpp"
#include "python/errors.hpp"
#include "python/inputs.hpp"
#include "python/run.hpp"

namespace qkv::python {

namespace {

// names: None (every hook point), one name or glob, or a list of them.
std::vector<std::string> patterns_of(const py::handle& names) {
  if (py::isinstance<py::str>(names)) return {names.cast<std::string>()};
  return names.cast<std::vector<std::string>>();
}

// The hook points matching any pattern, in forward order; KeyError listing the nearest names
// when a pattern matches none.
std::vector<std::string> matching(const nn::Model& model, const std::vector<std::string>& patterns,
                                  const char* op) {
  key_error_of([&] {
    nn::check_hook_names(model, patterns, op);
    return 0;
  });
  std::vector<std::string> out;
  for (const std::string& name : nn::hook_points(model))
    for (const std::string& p : patterns)
      if (nn::glob_match(p, name)) {
        out.push_back(name);
        break;
      }
  return out;
}

// A Python function as a replacement at one hook point. The function object is shared, so the
// HookFn copies the pass may make touch no Python reference count without the GIL; the last
// reference goes with the Hooks, under the GIL.
nn::HookFn python_hook(std::shared_ptr<py::object> fn, const std::string& name) {
  return [fn = std::move(fn), name](const ag::Var& a) -> ag::Var {
    py::gil_scoped_acquire gil;
    py::array copy = float32_copy(a.data());
    const py::object r = (*fn)(copy, name);
    return ag::Var(tensor_from(r.is_none() ? copy : r, a.data(), name));
  };
}

// fwd_hooks: [(name or glob, fn), ...] added to hooks, in order.
void add_python_hooks(nn::Hooks& hooks, const nn::Model& model, const py::handle& fwd_hooks,
                      const char* op) {
  for (const py::handle& item : fwd_hooks) {
    const auto pair = item.cast<py::tuple>();
    if (pair.size() != 2 || !PyCallable_Check(pair[1].ptr()))
      throw py::value_error(std::string(op) + ": fwd_hooks takes (name, function) pairs");
    const auto fn = std::make_shared<py::object>(py::reinterpret_borrow<py::object>(pair[1]));
    for (const std::string& name : matching(model, {pair[0].cast<std::string>()}, op))
      hooks.add(name, python_hook(fn, name));
  }
}

// The captured activations as float32 copies, in the order the pass reached them.
py::dict cache_dict(const nn::Hooks& hooks) {
  py::dict out;
  for (const std::string& name : hooks.passed)
    if (const auto it = hooks.cache.find(name); it != hooks.cache.end())
      out[py::str(name)] = float32_copy(it->second.data());
  return out;
}

py::tuple run_with_cache(const Run& r, const py::handle& input, const py::handle& names,
                         const py::handle& fwd_hooks, const py::handle& decoder_input) {
  const auto inf = r.get("run_with_cache");
  nn::Hooks hooks;
  if (names.is_none()) {
    hooks.capture = [](std::string_view) { return true; };
  } else {
    const std::vector<std::string> patterns = patterns_of(names);
    matching(inf->model(), patterns, "run_with_cache");  // unknown names: KeyError
    hooks.capture = nn::names_matching(patterns);
  }
  add_python_hooks(hooks, inf->model(), fwd_hooks, "run_with_cache");
  const Tensor src = batch_of(*inf, input, "run_with_cache");
  const Tensor tgt = decoder_input_of(*inf, src, decoder_input, "run_with_cache");
  check_pass_memory(*inf, src, tgt, "run_with_cache");
  Tensor logits;
  {
    py::gil_scoped_release release;
    logits = inf->batch_logits(src, tgt, &hooks);
  }
  return py::make_tuple(owned_array(std::move(logits)), cache_dict(hooks));
}

}  // namespace

void bind_cache(py::class_<Run>& run) {
  run.def("run_with_cache", &run_with_cache, py::arg("input"), py::arg("names") = py::none(),
          py::arg("fwd_hooks") = py::list(), py::arg("decoder_input") = py::none(),
          "(logits, cache): one pass over input (text, texts of one length, or ids), cache a "
          "dict of float32 arrays keyed by hook name (names: globs; None: every hook point), "
          "with fwd_hooks [(name or glob, fn(activation, name))] applied.");
  run.def(
      "run_with_hooks",
      [](const Run& r, const py::handle& input, const py::handle& fwd_hooks,
         const py::handle& decoder_input) -> py::object {
        const py::tuple both = run_with_cache(r, input, py::list(), fwd_hooks, decoder_input);
        return both[0];  // the logits (a py::object: the tuple's accessor would outlive it)
      },
      py::arg("input"), py::arg("fwd_hooks") = py::list(), py::arg("decoder_input") = py::none(),
      "logits of one pass over input with fwd_hooks [(name or glob, fn(activation, name))]: "
      "fn returns a replacement of the same shape and dtype, or None after editing in place.");
  run.def(
      "decoder_input",
      [](const Run& r, const py::handle& input) -> py::object {
        const auto inf = r.get("decoder_input");
        const Tensor tgt = decoder_input_of(*inf, batch_of(*inf, input, "decoder_input"),
                                            py::none(), "decoder_input");
        if (!tgt.defined()) return py::none();
        return int64_copy(tgt);
      },
      py::arg("input"),
      "The decoder input (B, T) run_with_cache reads by default for an encoder-decoder: each "
      "input's <bos> and greedy output, as qkv lens frames it; None for a model without one.");
}

}  // namespace qkv::python
