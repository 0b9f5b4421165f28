// run_with_cache and run_with_hooks: one teacher-forced pass (Inference::batch_logits) with a
// layer of hooks (nn/hooks.hpp) made from Python's arguments, pushed on the calling thread for
// the call only.
//
// A Python hook function gets a float32 copy of the activation (writable) and its hook name,
// and returns a replacement or None (then the copy, edited in place or not, flows on): fn(a,
// name). The copy keeps the model's own tensors out of Python's reach, so an array a hook keeps
// stays valid, and a failed hook leaves nothing changed.
//
// Inputs of unequal lengths are padded at the end and masked (python/inputs.hpp); the cache and
// the logits hold 0 at padded positions (python/padding.hpp), and a batch made of rows (a list)
// adds its masks, input_mask (B, n) and an encoder-decoder's decoder_input_mask (B, T). Hook
// functions see the whole padded activation.
#include <pybind11/stl.h>

#include <cstring>
#include <memory>

#include "python/arrays.hpp"
#include "python/errors.hpp"
#include "python/inputs.hpp"
#include "python/padding.hpp"
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

// The captured activations as float32 arrays, in the order the pass reached them, 0 at padding,
// taken out of hooks.cache: an activation whose memory nothing else holds once the cache lets go
// of it is handed over without a copy (taken_array).
py::dict cache_dict(nn::Hooks& hooks, const Batch& src, const Batch& tgt) {
  py::dict out;
  for (const std::string& name : hooks.passed)
    if (const auto it = hooks.cache.find(name); it != hooks.cache.end()) {
      Tensor t = it->second.data();
      hooks.cache.erase(it);
      py::array a = taken_array(std::move(t));
      zero_padding(a, name, src, tgt);
      out[py::str(name)] = a;
    }
  return out;
}

// A batch's (B, n) mask as a bool array, true on real positions.
py::array mask_array(const Batch& b) {
  const Tensor v = b.valid();
  py::array_t<bool> out({v.size(0), v.size(1)});
  std::memcpy(out.mutable_data(), v.data<uint8_t>(), static_cast<size_t>(v.numel()));
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
  const Batch src = batch_of(*inf, input, "run_with_cache");
  const Batch tgt = decoder_input_of(*inf, src, decoder_input, "run_with_cache");
  check_pass_memory(*inf, src.ids, tgt.ids, "run_with_cache");
  Tensor logits;
  {
    py::gil_scoped_release release;
    logits = inf->batch_logits(src.ids, tgt.ids, &hooks, src.pass_valid(), tgt.pass_valid());
  }
  py::array out = owned_array(std::move(logits));
  zero_padding(out, "logits", src, tgt);
  py::dict cache = cache_dict(hooks, src, tgt);
  if (src.listed || tgt.listed) {  // rows that may be padded: which positions are real
    cache["input_mask"] = mask_array(src);
    if (tgt.ids.defined()) cache["decoder_input_mask"] = mask_array(tgt);
  }
  return py::make_tuple(out, cache);
}

}  // namespace

void bind_cache(py::class_<Run>& run) {
  run.def("run_with_cache", &run_with_cache, py::arg("input"), py::arg("names") = py::none(),
          py::arg("fwd_hooks") = py::list(), py::arg("decoder_input") = py::none(),
          "(logits, cache): one pass over input (text, texts, rows of ids, or ids), cache a "
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
        const Batch tgt = decoder_input_of(*inf, batch_of(*inf, input, "decoder_input"), py::none(),
                                           "decoder_input");
        if (!tgt.ids.defined()) return py::none();
        if (!tgt.padded()) return int64_copy(tgt.ids);
        py::list rows;  // unequal lengths: one array per input
        for (int64_t b = 0; b < tgt.ids.size(0); ++b) rows.append(ids_array(tgt.row(b)));
        return rows;
      },
      py::arg("input"),
      "The decoder input run_with_cache reads by default for an encoder-decoder: each input's "
      "<bos> and greedy output, as qkv lens frames it, (B, T), or a list of B rows when their "
      "lengths differ; None for a model without one.");
}

}  // namespace qkv::python
