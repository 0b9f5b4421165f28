#include "nn/safetensors.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/atomic_file.hpp"
#include "core/bounded_json.hpp"

namespace qkv::nn {
namespace {

using json = nlohmann::json;

const char* st_dtype(DType dt) {
  switch (dt) {
    case DType::f32:
      return "F32";
    case DType::f64:
      return "F64";
    case DType::i64:
      return "I64";
    default:
      return "BOOL";
  }
}

bool parse_dtype(const std::string& s, DType& dt) {
  if (s == "F32")
    dt = DType::f32;
  else if (s == "F64")
    dt = DType::f64;
  else if (s == "I64")
    dt = DType::i64;
  else if (s == "BOOL")
    dt = DType::b8;
  else
    return false;
  return true;
}

}  // namespace

const Tensor& SafetensorsFile::get(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return t;
  throw Error(cat(path, ": no tensor named '", name, "'"));
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const Metadata& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::string data;
  for (const auto& [name, t] : tensors) {
    QKV_CHECK(name != "__metadata__" && !header.contains(name), "save_safetensors",
              "duplicate or reserved tensor name '", name, "'");
    const Tensor c = t.contiguous();
    const size_t nbytes = static_cast<size_t>(c.numel()) * dtype_size(c.dtype());
    const size_t begin = data.size();
    data.append(static_cast<const char*>(c.raw_data()), nbytes);
    header[name] = {{"dtype", st_dtype(c.dtype())},
                    {"shape", c.shape()},
                    {"data_offsets", {begin, begin + nbytes}}};
  }
  std::string h = header.dump();
  while (h.size() % 8) h += ' ';  // keeps the data buffer 8-byte aligned, as the format suggests
  std::string out(8, '\0');
  uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += h;
  out += data;
  atomic_write_file(path, out);
}

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& name) {
  auto fail = [&](const std::string& why) -> Error { return Error(name + ": " + why); };
  if (bytes.size() < 8)
    throw fail("truncated safetensors file (" + std::to_string(bytes.size()) +
               " bytes, no header length)");
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i)
    n |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[i])) << (8 * i);
  if (n > bytes.size() - 8)
    throw fail("corrupt safetensors header: it claims " + std::to_string(n) +
               " bytes but the file has " + std::to_string(bytes.size() - 8) + " after the length");
  // The parser's own words (or the depth bound's); the length is the file's, checked above.
  const json header = parse_json(std::string_view(bytes).substr(8, n),
                                 name + ": corrupt safetensors header", {kMaxJsonDepth, n});
  if (!header.is_object()) throw fail("corrupt safetensors header: not a JSON object");
  const uint64_t data_len = bytes.size() - 8 - n;
  const char* data = bytes.data() + 8 + n;

  SafetensorsFile f;
  f.path = name;
  std::vector<std::pair<uint64_t, std::pair<std::string, Tensor>>> found;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "__metadata__") {
      if (!v.is_object()) throw fail("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          throw fail("__metadata__ value '" + m.key() + "' is not a string");
        f.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + key + "'";
    if (!v.is_object() || !v.contains("dtype") || !v.contains("shape") ||
        !v.contains("data_offsets"))
      throw fail(where + " needs dtype, shape and data_offsets");
    DType dt;
    if (!v["dtype"].is_string() || !parse_dtype(v["dtype"].get<std::string>(), dt))
      throw fail(where + " has unsupported dtype " + v["dtype"].dump() +
                 " (qkv reads F32, F64, I64, BOOL)");
    if (!v["shape"].is_array()) throw fail(where + " shape is not an array");
    Shape shape;
    uint64_t numel = 1;
    for (const json& d : v["shape"]) {
      if (!d.is_number_unsigned())
        throw fail(where + " has a shape entry that is not a non-negative integer");
      const uint64_t s = d.get<uint64_t>();
      if (s > (1ull << 40) || (s && numel > (1ull << 40) / s))
        throw fail(where + " shape is too large");
      numel *= s;
      shape.push_back(static_cast<int64_t>(s));
    }
    const json& off = v["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() ||
        !off[1].is_number_unsigned())
      throw fail(where + " data_offsets must be two non-negative integers");
    const uint64_t b = off[0].get<uint64_t>(), e = off[1].get<uint64_t>();
    if (b > e || e > data_len)
      throw fail(where + " data_offsets [" + std::to_string(b) + ", " + std::to_string(e) +
                 "] fall outside the " + std::to_string(data_len) +
                 "-byte data buffer (truncated file?)");
    if (e - b != numel * dtype_size(dt))
      throw fail(where + " of shape " + shape_str(shape) + " needs " +
                 std::to_string(numel * dtype_size(dt)) + " bytes, its offsets span " +
                 std::to_string(e - b));
    Tensor t = empty(shape, dt);
    if (e > b) std::memcpy(t.raw_data(), data + b, e - b);
    if (dt == DType::b8) {
      const uint8_t* p = t.data<uint8_t>();
      for (uint64_t i = 0; i < numel; ++i)
        if (p[i] > 1) throw fail(where + " is BOOL but holds a byte other than 0 or 1");
    }
    found.push_back({b, {key, t}});
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (auto& [b, nt] : found) f.tensors.push_back(std::move(nt));
  return f;
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(cat(path, ": cannot open (", std::strerror(errno), ")"));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_safetensors(ss.str(), path);
}

}  // namespace qkv::nn
