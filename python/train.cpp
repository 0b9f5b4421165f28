// qkv.train(config, overrides={...}, run_dir=..., on_step=fn): training in process, the call
// `qkv train` makes (training::train, training/train.hpp), so the run folder is the binary's bit
// for bit. on_step(record) gets each metrics.jsonl record as a dict, as it is written.
//
// The GIL is released for the whole run and taken back for on_step and, at most every 50 ms,
// for Python's signal check. A KeyboardInterrupt (Ctrl-C, _thread.interrupt_main) or any other
// exception raised in on_step or by a signal handler stops the run as SIGINT stops `qkv train`:
// at the step boundary, with a checkpoint, resumable (qkv.train(resume=run_dir)); then it is
// raised. The process's own signal handlers stay Python's.
#include <pybind11/stl.h>

#include <chrono>
#include <filesystem>
#include <new>
#include <optional>
#include <utility>
#include <vector>

#include "core/parallel.hpp"
#include "python/errors.hpp"
#include "run/train_run.hpp"
#include "training/train.hpp"

namespace qkv::python {

namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using Overrides = std::vector<std::pair<std::string, std::string>>;

// One Python value as the VALUE of `--section.key VALUE`: TOML text (a str is passed as is, as
// the command line passes it: TOML when it is a TOML value, else bare text).
std::string toml_value(const py::handle& v, const std::string& key) {
  if (py::isinstance<py::bool_>(v)) return v.cast<bool>() ? "true" : "false";
  if (py::isinstance<py::int_>(v) || py::isinstance<py::float_>(v))
    return py::repr(v).cast<std::string>();  // the shortest text that reads back to the value
  if (py::isinstance<py::str>(v)) return v.cast<std::string>();
  if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    std::string out = "[";
    for (const py::handle& x : v) {
      if (out.size() > 1) out += ", ";
      // a string inside an array is a TOML string: quoted as JSON quotes it
      out += py::isinstance<py::str>(x) ? Json(x.cast<std::string>()).dump() : toml_value(x, key);
    }
    return out + "]";
  }
  throw py::type_error("train: overrides[\"" + key + "\"]: a bool, int, float, str or list, got " +
                       py::str(py::type::of(v).attr("__name__")).cast<std::string>());
}

// {"train.max_steps": 300, "seed": 2} -> ("train.max_steps", "300"), ("seed", "2")
Overrides overrides_of(const py::handle& o) {
  Overrides out;
  if (o.is_none()) return out;
  if (!py::isinstance<py::dict>(o)) throw py::type_error("train: overrides must be a dict");
  for (const auto& [k, v] : o.cast<py::dict>()) {
    if (!py::isinstance<py::str>(k)) throw py::type_error("train: overrides' keys are str");
    const std::string key = k.cast<std::string>();
    out.emplace_back(key, toml_value(v, key));
  }
  return out;
}

py::object to_python(const Json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

// on_step and Python's signals as training::TrainCallbacks. The first Python exception (from
// on_step or a signal handler) is kept and stops the run; later records skip on_step.
class PythonCallbacks {
 public:
  explicit PythonCallbacks(py::object on_step) : on_step_(std::move(on_step)) {}

  training::TrainCallbacks callbacks() {
    training::TrainCallbacks cb;
    if (!on_step_.is_none()) cb.on_record = [this](const Json& j) { record(j); };
    cb.should_stop = [this] { return poll(); };
    cb.stop = &stop_;
    return cb;
  }
  // With the GIL: the exception that stopped the run, raised again (nothing when none).
  void raise_if_stopped() {
    if (!error_) return;
    py::error_already_set e = std::move(*error_);
    error_.reset();
    e.restore();
    throw py::error_already_set();
  }

 private:
  // (the training thread, without the GIL)
  void record(const Json& j) {
    const py::gil_scoped_acquire gil;
    if (error_) return;
    try {
      on_step_(to_python(j));
    } catch (py::error_already_set& e) {
      keep(std::move(e));
    }
  }
  bool poll() {
    if (stop_.requested()) return true;
    const auto now = std::chrono::steady_clock::now();
    if (now - checked_ < std::chrono::milliseconds(50)) return false;
    checked_ = now;
    const py::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) keep(py::error_already_set());
    return stop_.requested();
  }
  void keep(py::error_already_set&& e) {
    if (!error_) error_.emplace(std::move(e));
    stop_.request();
  }

  py::object on_step_;
  std::optional<py::error_already_set> error_;  // destroyed with the GIL held (train's scope)
  training::StopToken stop_;
  std::chrono::steady_clock::time_point checked_{};
};

const char* reason_name(train::StopReason r) {
  switch (r) {
    case train::StopReason::completed:
      return "completed";
    case train::StopReason::early_stopping:
      return "early_stopping";
    case train::StopReason::requested:
      return "requested";
  }
  return "";
}

py::dict result_dict(const training::TrainResult& r) {
  py::dict d;
  d["run_dir"] = r.run_dir;
  d["reason"] = reason_name(r.reason);
  d["step"] = r.step;
  d["exit_code"] = r.exit_code;
  d["checkpoint"] = r.checkpoint;
  d["final"] = r.final_line;
  return d;
}

// A path given as str or os.PathLike ("" for None).
std::string fspath(const py::object& p) {
  if (p.is_none()) return "";
  return py::module_::import("os").attr("fspath")(p).cast<std::string>();
}

[[noreturn]] void raise_file_not_found(const std::string& message) {
  PyErr_SetString(PyExc_FileNotFoundError, message.c_str());
  throw py::error_already_set();
}

// config or resume: the file or folder that must be there (FileNotFoundError, as qkv.open's)
void check_paths(const training::TrainRequest& req) {
  if (!req.resume.empty() && !fs::is_directory(req.resume))
    raise_file_not_found("train: " + req.resume + ": no such run folder");
  if (req.resume.empty() && req.config_text.empty() && !req.config.empty() &&
      !fs::exists(req.config))
    raise_file_not_found("train: " + req.config + ": no such config file");
}

py::dict train(const py::object& config, const py::object& overrides, const py::object& run_dir,
               py::object on_step, const py::object& resume, bool overwrite, bool quiet,
               bool verbose, const py::object& config_text) {
  training::TrainRequest req;
  req.config = fspath(config), req.run_dir = fspath(run_dir), req.resume = fspath(resume);
  req.config_text = config_text.is_none() ? "" : config_text.cast<std::string>();
  req.overrides = overrides_of(overrides);
  req.overwrite = overwrite, req.quiet = quiet, req.verbose = verbose;
  check_paths(req);
  if (!on_step.is_none() && !PyCallable_Check(on_step.ptr()))
    throw py::type_error("train: on_step must be callable");
  PythonCallbacks python(std::move(on_step));
  const training::TrainCallbacks cb = python.callbacks();
  const int threads = get_num_threads();  // the config's count is the process's while it trains
  std::optional<training::TrainResult> result;
  try {
    py::gil_scoped_release release;
    result = training::train(req, cb);
  } catch (const std::bad_alloc&) {
    set_num_threads(threads);
    run::discard_unfinished_run();  // the caller's part of an allocation failure (training/)
    throw;
  } catch (...) {
    set_num_threads(threads);
    throw;
  }
  set_num_threads(threads);
  python.raise_if_stopped();
  return result_dict(*result);
}

}  // namespace

void bind_train(py::module_& m) {
  m.def("train", &train, py::arg("config") = py::none(), py::kw_only(),
        py::arg("overrides") = py::none(), py::arg("run_dir") = py::none(),
        py::arg("on_step") = py::none(), py::arg("resume") = py::none(),
        py::arg("overwrite") = false, py::arg("quiet") = false, py::arg("verbose") = false,
        py::arg("config_text") = py::none(),
        "Trains a run in this process exactly as `qkv train` does (the same run folder, bit for "
        "bit): config (a TOML file) with overrides ({\"train.max_steps\": 300} as "
        "--train.max_steps 300) into run_dir (None: runs/<config name>), or resume=RUN_DIR. "
        "on_step(record) gets each metrics.jsonl record as a dict. KeyboardInterrupt, or an "
        "exception in on_step, stops it with a checkpoint (resumable), then is raised. Returns "
        "{run_dir, reason, step, exit_code, checkpoint, final}.");
}

}  // namespace qkv::python
