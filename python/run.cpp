#include "python/run.hpp"

#include <pybind11/stl.h>

#include <filesystem>

#include "config/config.hpp"
#include "python/arrays.hpp"
#include "python/errors.hpp"

namespace qkv::python {

namespace {

[[noreturn]] void raise_file_not_found(const std::string& message) {
  PyErr_SetString(PyExc_FileNotFoundError, message.c_str());
  throw py::error_already_set();
}

const char* family_name(data::TaskKind task) {
  switch (data::family_of(task)) {
    case data::TaskFamily::pairs:
      return "pairs";
    case data::TaskFamily::lm:
      return "lm";
    case data::TaskFamily::classify:
      return "classify";
  }
  return "";
}

const char* side_name(nn::Side s) { return s == nn::Side::input ? "input" : "output"; }

py::dict site_dict(const nn::AttentionSite& s) {
  py::dict d;
  d["name"] = s.name, d["title"] = s.title, d["hook"] = s.hook();
  d["queries"] = side_name(s.queries), d["keys"] = side_name(s.keys);
  d["causal"] = s.causal, d["layers"] = s.layers, d["heads"] = s.heads;
  d["key"] = s.key, d["metric_key"] = s.metric_key();
  return d;
}

// name -> a zero-copy view of each of the model's weights (module names, as
// nn::Module::named_parameters gives them), each keeping the Inference alive.
py::dict params_of(const std::shared_ptr<const run::Inference>& inf) {
  py::dict out;
  for (const auto& [name, var] : inf->model().named_parameters())
    out[py::str(name)] = weight_view(var.data(), inf);
  return out;
}

Run open_run(const std::string& path, const std::optional<std::string>& checkpoint,
             const std::optional<std::string>& precision, int threads) {
  run::OpenOptions o;
  o.checkpoint = checkpoint.value_or("best"), o.threads = threads, o.op = "open";
  if (precision) o.precision = parse_precision(*precision, "open: precision");
  if (!std::filesystem::is_directory(path))
    raise_file_not_found("open: " + path + ": no such run folder");
  try {
    py::gil_scoped_release release;
    return Run(path, o);
  } catch (const qkv::Error& e) {
    if (!std::filesystem::exists(std::filesystem::path(path) / "config.toml"))
      raise_file_not_found(e.what());  // a folder that holds no run
    throw;
  }
}

}  // namespace

Run::Run(std::string path, const run::OpenOptions& o)
    : path_(std::move(path)), inf_(run::open_inference(path_, o)) {}

std::shared_ptr<const run::Inference> Run::get(const char* op) const {
  if (!inf_) throw py::value_error(std::string("run.") + op + ": the run " + path_ + " is closed");
  return inf_;
}

py::class_<Run> bind_run(py::module_& m) {
  m.def("open", &open_run, py::arg("path"), py::arg("checkpoint") = "best",
        py::arg("precision") = py::none(), py::arg("threads") = 0,
        "A trained run folder loaded for inference: its checkpoint (best | latest | average | "
        "step-N | a path), precision (fp32 | bf16 | auto; None: the run's), compute threads "
        "(0: the run's; the process's setting).");
  py::class_<Run> c(m, "Run", "A trained run, opened by qkv.open.");
  c.def_property_readonly("path", &Run::path)
      .def_property_readonly("closed", &Run::closed)
      .def_property_readonly(
          "family",
          [](const Run& r) { return family_name(r.get("family")->run().config.data.task); })
      .def_property_readonly("checkpoint",
                             [](const Run& r) { return r.get("checkpoint")->run().checkpoint; })
      .def_property_readonly(
          "precision", [](const Run& r) { return precision_name(r.get("precision")->precision()); })
      .def_property_readonly("config",
                             [](const Run& r) {
                               const std::string toml =
                                   config::effective_toml(r.get("config")->run().config);
                               return py::module_::import("tomllib").attr("loads")(toml);
                             })
      .def("hook_points",
           [](const Run& r) { return nn::hook_points(r.get("hook_points")->model()); })
      .def("attention_sites",
           [](const Run& r) {
             py::list out;
             for (const auto& s : r.get("attention_sites")->model().attention_sites())
               out.append(site_dict(s));
             return out;
           })
      .def("capabilities",
           [](const Run& r) {
             std::vector<std::string> out;
             for (const run::Capability cap : r.get("capabilities")->capabilities())
               out.emplace_back(name_of(cap));
             return out;
           })
      .def("to_tokens",
           [](const Run& r, const std::string& text) {
             return ids_array(r.get("to_tokens")->encode(text, "to_tokens"));
           })
      .def("to_string",
           [](const Run& r, const py::handle& ids) {
             const auto inf = r.get("to_string");
             const int64_t V = inf->model().output_layer().weight.size(0);
             return inf->text(ids_from(ids, V, "to_string"));
           })
      .def_property_readonly("params", [](const Run& r) { return params_of(r.get("params")); })
      .def("close", &Run::close)
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__", [](Run& r, py::args) { r.close(); })
      .def("__repr__",
           [](const Run& r) { return "<qkv.Run " + r.path() + (r.closed() ? " (closed)>" : ">"); });
  return c;
}

}  // namespace qkv::python
