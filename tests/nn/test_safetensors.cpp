// safetensors: the byte layout, round trips of every dtype, and corrupt files that must be a
// qkv::Error naming the problem (never a crash or an out-of-bounds read).
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "nn/safetensors.hpp"
#include "support/nn.hpp"

using namespace qkv;
using namespace qkv::nn;
using namespace qkv::testing;
using nlohmann::json;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s;
}

// A file assembled by hand: header JSON text, then the data bytes.
std::string assemble(const std::string& header, const std::string& data) {
  return le64(header.size()) + header + data;
}

// One float32 tensor "w" of shape (2,) = {1, 2}: 8 data bytes.
std::string two_floats() {
  const float v[2] = {1.0f, 2.0f};
  return std::string(reinterpret_cast<const char*>(v), 8);
}

// parse must throw a qkv::Error whose message contains every fragment.
void expect_error(const std::string& bytes, const std::vector<std::string>& fragments) {
  try {
    parse_safetensors(bytes, "bad.safetensors");
    FAIL("parsed a corrupt file without error");
  } catch (const Error& e) {
    const std::string msg = e.what();
    INFO(msg);
    CHECK(msg.find("bad.safetensors") != std::string::npos);
    CHECK(msg.find("[json.exception") == std::string::npos);  // the parser's words, no prefix
    for (const auto& f : fragments) {
      INFO(f);
      CHECK(msg.find(f) != std::string::npos);
    }
  }
}

}  // namespace

TEST_CASE("safetensors: round trip of every dtype, scalars, empty and non-contiguous tensors") {
  TempDir dir("st_roundtrip");
  Generator g(1);
  const Tensor f32 = randn({3, 4}, g);
  const Tensor f64 = randn({2, 3, 2}, g, DType::f64);
  const Tensor i64 = from_vector<int64_t>({-5, 0, 7, int64_t(1) << 40}, {4});
  const Tensor b8 = gt(randn({5, 3}, g), 0.0);
  const Tensor scalar0 = scalar(3.25, DType::f64);
  const Tensor empty0 = zeros({0, 4});
  const Tensor trans = randn({4, 3}, g).t();  // non-contiguous view
  const NamedTensors in = {{"a.f32", f32},         {"b.f64", f64},        {"c.i64", i64},
                           {"d.bool", b8},         {"e.scalar", scalar0}, {"f.empty", empty0},
                           {"g.transposed", trans}};
  const std::string path = dir.file("all.safetensors");
  save_safetensors(path, in, {{"step", "42"}, {"note", "héllo"}});
  const SafetensorsFile f = load_safetensors(path);
  REQUIRE(f.tensors.size() == in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    INFO(in[i].first);
    CHECK(f.tensors[i].first == in[i].first);  // file order = offset order = save order
    const Tensor& got = f.tensors[i].second;
    CHECK(got.dtype() == in[i].second.dtype());
    CHECK(got.shape() == in[i].second.shape());
    if (got.numel() > 0 && is_floating(got.dtype())) CHECK(max_abs_diff(got, in[i].second) == 0);
  }
  CHECK(to_vector<int64_t>(f.get("c.i64")) == to_vector<int64_t>(i64));
  CHECK(to_vector<uint8_t>(f.get("d.bool")) == to_vector<uint8_t>(b8));
  CHECK(f.get("e.scalar").item() == 3.25);
  CHECK(f.metadata.at("step") == "42");
  CHECK(f.metadata.at("note") == "héllo");
  CHECK_THROWS_WITH(f.get("nope"), Catch::Contains("nope") && Catch::Contains("all.safetensors"));
}

TEST_CASE("safetensors: the bytes follow the published layout") {
  TempDir dir("st_layout");
  const Tensor w = tensor({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor ids = from_vector<int64_t>({9, 8}, {2});
  const std::string path = dir.file("layout.safetensors");
  save_safetensors(path, {{"w", w}, {"ids", ids}}, {{"k", "v"}});
  const std::string bytes = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(bytes[i])) << (8 * i);
  REQUIRE(8 + n <= bytes.size());
  CHECK((8 + n) % 8 == 0);  // data buffer aligned
  const json h = json::parse(bytes.substr(8, n));
  CHECK(h["__metadata__"]["k"] == "v");
  CHECK(h["w"]["dtype"] == "F32");
  CHECK(h["w"]["shape"] == json::array({2, 3}));
  CHECK(h["ids"]["dtype"] == "I64");
  const auto wo = h["w"]["data_offsets"].get<std::vector<uint64_t>>();
  const auto io = h["ids"]["data_offsets"].get<std::vector<uint64_t>>();
  CHECK(wo[1] - wo[0] == 24);
  CHECK(io[1] - io[0] == 16);
  CHECK(bytes.size() == 8 + n + 40);
  float w4;
  std::memcpy(&w4, bytes.data() + 8 + n + wo[0] + 3 * 4, 4);  // row-major: w[1][0]
  CHECK(w4 == 4.0f);
  int64_t id1;
  std::memcpy(&id1, bytes.data() + 8 + n + io[0] + 8, 8);
  CHECK(id1 == 8);
}

TEST_CASE("safetensors: a file written by another tool loads") {
  // Tensors out of offset order, no metadata, header without padding, dtype names as the spec.
  const double d[3] = {0.5, -1.5, 2.5};
  const uint8_t bools[2] = {1, 0};
  std::string data(reinterpret_cast<const char*>(bools), 2);
  data += std::string(reinterpret_cast<const char*>(d), 24);
  const std::string header =
      R"({"x":{"dtype":"F64","shape":[3,1],"data_offsets":[2,26]},"m":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})";
  const SafetensorsFile f = parse_safetensors(assemble(header, data), "other.safetensors");
  REQUIRE(f.tensors.size() == 2);
  CHECK(f.tensors[0].first == "m");  // sorted by offset
  CHECK(to_vector<double>(f.get("x")) == std::vector<double>{0.5, -1.5, 2.5});
  CHECK(f.get("x").shape() == Shape{3, 1});
  CHECK(to_vector<uint8_t>(f.get("m")) == std::vector<uint8_t>{1, 0});
}

TEST_CASE("safetensors: every truncation of a valid file is an error") {
  TempDir dir("st_trunc");
  Generator g(2);
  const std::string path = dir.file("t.safetensors");
  save_safetensors(path, {{"a", randn({3, 2}, g)}, {"b", from_vector<int64_t>({1, 2}, {2})}},
                   {{"m", "x"}});
  const std::string bytes = read_bytes(path);
  CHECK_NOTHROW(parse_safetensors(bytes, "t"));
  for (size_t len = 0; len < bytes.size(); ++len) {
    INFO("truncated to " << len << " of " << bytes.size() << " bytes");
    CHECK_THROWS_AS(parse_safetensors(bytes.substr(0, len), "t"), Error);
  }
  expect_error(bytes.substr(0, 5), {"truncated"});
  expect_error("", {"truncated"});
  // cut inside the data buffer: the message names a tensor whose offsets no longer fit
  expect_error(bytes.substr(0, bytes.size() - 3), {"outside"});
  CHECK_THROWS_WITH(load_safetensors(dir.file("absent.safetensors")),
                    Catch::Contains("absent.safetensors"));
}

TEST_CASE("safetensors: corrupt headers are clear errors") {
  const std::string w_ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  REQUIRE_NOTHROW(parse_safetensors(assemble(w_ok, two_floats()), "ok"));

  SECTION("header length larger than the file") {
    std::string b = assemble(w_ok, two_floats());
    b.replace(0, 8, le64(w_ok.size() + 9));
    expect_error(b, {"header", std::to_string(w_ok.size() + 9)});
    b.replace(0, 8, le64(~uint64_t(0)));  // would overflow 8 + n
    expect_error(b, {"header"});
  }
  SECTION("malformed JSON") {
    expect_error(assemble(R"({"w":{"dtype":"F32",)", two_floats()),
                 {"corrupt safetensors header: parse error at line 1"});
    expect_error(assemble("", two_floats()), {"header"});
    expect_error(assemble("[1, 2]", ""), {"not a JSON object"});
    expect_error(assemble(R"({"w": 3})", ""), {"'w'", "dtype, shape and data_offsets"});
    expect_error(assemble(R"({"w":{"dtype":"F32","shape":[2]}})", two_floats()), {"'w'"});
    expect_error(
        assemble(R"({"w":{"dtype":"F32","shape":"2","data_offsets":[0,8]}})", two_floats()),
        {"'w'", "shape"});
    expect_error(
        assemble(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", two_floats()),
        {"'w'", "shape"});
    expect_error(
        assemble(R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", two_floats()),
        {"'w'", "shape"});
    expect_error(assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0]}})", two_floats()),
                 {"'w'", "data_offsets"});
    expect_error(
        assemble(R"({"__metadata__":{"k":1},"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                 two_floats()),
        {"__metadata__"});
    expect_error(assemble(R"({"__metadata__":[1]})", ""), {"__metadata__"});
  }
  SECTION("offsets outside the data buffer") {
    expect_error(
        assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", two_floats()),
        {"'w'", "[4, 12]", "outside"});
    expect_error(
        assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", two_floats()),
        {"'w'", "outside"});
    expect_error(
        assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,18446744073709551615]}})",
                 two_floats()),
        {"'w'"});
    expect_error(assemble(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", "abc"),
                 {"'w'", "outside"});
  }
  SECTION("offsets that disagree with the shape") {
    expect_error(
        assemble(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", two_floats()),
        {"'w'", "(3)", "12 bytes", "span 8"});
    expect_error(
        assemble(R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,8]}})", two_floats()),
        {"'w'", "16 bytes"});
    // a shape whose element count overflows must not wrap around to a small size
    expect_error(
        assemble(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,2],"data_offsets":[0,8]}})",
                 two_floats()),
        {"'w'"});
  }
  SECTION("unknown or wrong dtype") {
    for (const char* dt : {"F16", "BF16", "I32", "U8", "f32", ""}) {
      INFO(dt);
      expect_error(assemble(std::string(R"({"w":{"dtype":")") + dt +
                                R"(","shape":[2],"data_offsets":[0,8]}})",
                            two_floats()),
                   {"'w'", "dtype"});
    }
    expect_error(assemble(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,8]}})", two_floats()),
                 {"'w'", "dtype"});
    // BOOL bytes must be 0 or 1
    expect_error(assemble(R"({"w":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})", "\x01\x02"),
                 {"'w'", "BOOL"});
  }
}

TEST_CASE("safetensors: random corruption never crashes") {
  TempDir dir("st_fuzz");
  Generator g(3);
  const std::string path = dir.file("f.safetensors");
  save_safetensors(path,
                   {{"a", randn({4, 3}, g)},
                    {"b", from_vector<int64_t>({1, 2, 3}, {3})},
                    {"c", gt(randn({5}, g), 0.0)},
                    {"d", randn({2}, g, DType::f64)}},
                   {{"k", "v"}});
  const std::string good = read_bytes(path);
  uint64_t n = 0;
  for (int i = 0; i < 8; ++i) n |= uint64_t(static_cast<unsigned char>(good[i])) << (8 * i);
  int parsed = 0, errors = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string b = good;
    const int flips = 1 + static_cast<int>(g.next_int(3));
    for (int k = 0; k < flips; ++k) {
      // mostly inside the header, where the parser's logic lives; sometimes the length
      const int64_t pos =
          g.next_int(10) == 0 ? g.next_int(8) : 8 + g.next_int(static_cast<int64_t>(n));
      const std::string digits = "0123456789[]{},:\"-.eE ";
      b[static_cast<size_t>(pos)] =
          g.next_int(2)
              ? static_cast<char>(g.next_int(256))
              : digits[static_cast<size_t>(g.next_int(static_cast<int64_t>(digits.size())))];
    }
    try {
      const SafetensorsFile f = parse_safetensors(b, "fuzz");
      for (const auto& [name, t] : f.tensors)
        CHECK(t.numel() * int64_t(dtype_size(t.dtype())) <= int64_t(b.size()));
      ++parsed;
    } catch (const Error&) {
      ++errors;
    }  // anything else (std::exception from json, a crash) fails the test
  }
  INFO("parsed " << parsed << ", rejected " << errors);
  CHECK(errors > 1000);
}

TEST_CASE("safetensors: save refuses reserved or duplicate names and writes atomically") {
  TempDir dir("st_save");
  const std::string path = dir.file("x.safetensors");
  CHECK_THROWS_WITH(save_safetensors(path, {{"__metadata__", zeros({1})}}),
                    Catch::Contains("__metadata__"));
  CHECK_THROWS_WITH(save_safetensors(path, {{"a", zeros({1})}, {"a", zeros({2})}}),
                    Catch::Contains("'a'"));
  CHECK_FALSE(std::filesystem::exists(path));
  save_safetensors(path, {{"a", ones({2})}});
  save_safetensors(path, {{"a", zeros({3})}});  // overwrite
  CHECK(load_safetensors(path).get("a").shape() == Shape{3});
  for (const auto& e : std::filesystem::directory_iterator(dir.path))
    CHECK(e.path().filename() == "x.safetensors");  // no temporary left behind
  CHECK_THROWS_AS(save_safetensors(dir.file("no/such/dir/x.safetensors"), {{"a", ones({1})}}),
                  Error);
}
