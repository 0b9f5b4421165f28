#include "python/arrays.hpp"

#include <cstring>

#include "core/storage.hpp"

namespace qkv::python {

namespace {

// What a zero-copy array's capsule keeps alive.
struct Keep {
  std::shared_ptr<const void> owner;  // the run's Inference (its model)
  std::shared_ptr<Storage> storage;   // the memory itself, whatever the model does with it
};

std::vector<py::ssize_t> shape_of(const Tensor& t) { return {t.shape().begin(), t.shape().end()}; }

std::string shape_text(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t d = 0; d < a.ndim(); ++d) s += (d ? ", " : "") + std::to_string(a.shape(d));
  return s + (a.ndim() == 1 ? ",)" : ")");
}

}  // namespace

py::array weight_view(const Tensor& t, std::shared_ptr<const void> keep) {
  QKV_CHECK(t.dtype() == DType::f32, "params", "a weight of ", t.shape(), " is ",
            dtype_name(t.dtype()), ", not float32");
  std::vector<py::ssize_t> strides;
  for (const int64_t s : t.strides())
    strides.push_back(s * static_cast<py::ssize_t>(sizeof(float)));
  auto* k = new Keep{std::move(keep), t.storage()};
  py::capsule base(k, [](void* p) { delete static_cast<Keep*>(p); });
  return py::array_t<float>(shape_of(t), strides, t.data<float>(), base);
}

py::array owned_array(Tensor t) {
  if (t.dtype() != DType::f32 || !t.is_contiguous()) t = t.to(DType::f32).contiguous();
  auto* held = new Tensor(std::move(t));
  py::capsule base(held, [](void* p) { delete static_cast<Tensor*>(p); });
  return py::array_t<float>(shape_of(*held), held->data<float>(), base);
}

py::array float32_copy(const Tensor& t) {
  Tensor c = t.to(DType::f32).contiguous();
  // Converted or packed: c is already a copy nothing else holds, so it is handed over whole.
  if (c.storage() != t.storage()) return owned_array(std::move(c));
  py::array_t<float> out(shape_of(c));
  if (c.numel() > 0)
    std::memcpy(out.mutable_data(), c.data<float>(),
                static_cast<size_t>(c.numel()) * sizeof(float));
  return out;
}

py::array taken_array(Tensor t) {
  const bool sole = t.storage() && t.storage().use_count() == 1;
  if (sole && t.dtype() == DType::f32 && t.is_contiguous()) return owned_array(std::move(t));
  return float32_copy(t);
}

Tensor tensor_from(const py::handle& h, const Tensor& like, const std::string& what) {
  if (!py::isinstance<py::array>(h))
    throw py::value_error("hook " + what + ": returned " +
                          std::string(py::str(py::type::of(h).attr("__name__"))) +
                          ", not a numpy array (return None after editing in place)");
  const auto a = py::reinterpret_borrow<py::array>(h);
  const std::string dtype = py::str(a.dtype());
  const bool same_shape = a.ndim() == like.dim() && [&] {
    for (int64_t d = 0; d < like.dim(); ++d)
      if (a.shape(d) != like.size(d)) return false;
    return true;
  }();
  if (dtype != "float32" || !same_shape)
    throw py::value_error("hook " + what + ": returned " + dtype + " " + shape_text(a) +
                          "; the activation is float32 " + shape_str(like.shape()));
  const auto c = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(a);
  Tensor out = empty(like.shape(), DType::f32);
  if (out.numel() > 0)
    std::memcpy(out.data<float>(), c.data(), static_cast<size_t>(out.numel()) * sizeof(float));
  return out.to(like.dtype());
}

py::array int64_copy(const Tensor& ids) {
  const Tensor c = ids.contiguous();
  py::array_t<int64_t> out(shape_of(c));
  if (c.numel() > 0)
    std::memcpy(out.mutable_data(), c.data<int64_t>(),
                static_cast<size_t>(c.numel()) * sizeof(int64_t));
  return out;
}

py::array_t<int64_t> ids_array(const data::Ids& ids) {
  py::array_t<int64_t> out(static_cast<py::ssize_t>(ids.size()));
  if (!ids.empty()) std::memcpy(out.mutable_data(), ids.data(), ids.size() * sizeof(int64_t));
  return out;
}

data::Ids ids_from(const py::handle& h, int64_t limit, const char* op) {
  const py::array a = py::array::ensure(h);
  if (!a) throw py::value_error(std::string(op) + ": ids must be a sequence of integers");
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u')
    throw py::value_error(std::string(op) + ": ids must be integers, got " +
                          std::string(py::str(a.dtype())));
  if (a.ndim() != 1)
    throw py::value_error(std::string(op) + ": ids must be one sequence (1-d), got " +
                          shape_text(a));
  const auto c = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
  data::Ids ids(c.data(), c.data() + c.size());
  for (const int64_t id : ids)
    if (id < 0 || id >= limit)
      throw py::value_error(std::string(op) + ": id " + std::to_string(id) + " out of range [0, " +
                            std::to_string(limit) + ")");
  return ids;
}

}  // namespace qkv::python
