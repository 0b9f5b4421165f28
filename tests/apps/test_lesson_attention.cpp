// qkv attention: trains a tiny copy model through the CLI, then draws its attention maps and
// checks the files' pixel sizes against the heatmap layout for the known input.
#include <catch2/catch.hpp>

#include <cstring>
#include <regex>

#include "figures/heatmap.hpp"
#include "support/process.hpp"

using namespace qkv;
using namespace qkv::figures;
using namespace qkv::testing;

namespace {

const TempDir& trained_run() {
  static TempDir dir("attention");
  static bool done = [] {
    const RunResult r =
        run_qkv("train '" + source_dir() + "/configs/copy.toml' --run-dir '" + dir.file("run") +
                "' --quiet --train.max_steps 60 --train.eval_examples 20 --data.train_size 1000"
                " --data.valid_size 20 --data.test_size 20 --optim.warmup 20"
                " --model.d_model 32 --model.d_ff 64 --model.heads 2");
    INFO(r.output);
    REQUIRE(r.status == 0);
    return true;
  }();
  (void)done;
  return dir;
}

// Width and height from a PNG's IHDR chunk (big-endian at bytes 16 and 20).
std::pair<int, int> png_size(const std::string& bytes) {
  REQUIRE(bytes.size() > 24);
  REQUIRE(bytes.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0);
  auto be = [&](size_t o) {
    return (static_cast<unsigned char>(bytes[o]) << 24) |
           (static_cast<unsigned char>(bytes[o + 1]) << 16) |
           (static_cast<unsigned char>(bytes[o + 2]) << 8) |
           static_cast<unsigned char>(bytes[o + 3]);
  };
  return {static_cast<int>(be(16)), static_cast<int>(be(20))};
}

}  // namespace

TEST_CASE("attention: encoder self-attention of a known input has the layout's pixel size") {
  const TempDir& dir = trained_run();
  const RunResult r =
      run_qkv("attention '" + dir.file("run") +
              "' '1 2 3 4 5' --kind self --layer 1 --head 2 --out '" + dir.file("self.png") + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  // 5 x 5 cells of 32 px, one-character labels:
  // width = (12 + 14 + 8 + 12 + 6) + 160 + (16 + 16 + 6 + 48 + 12) = 310
  // height = 36 + 160 + (6 + 14 + 8 + 14 + 12) = 250 (column labels upright)
  const auto [w, h] = png_size(read_file(dir.file("self.png")));
  CHECK(w == 310);
  CHECK(h == 250);
  CHECK(r.output.find("encoder self-attention, layer 1/2, head 2 of 2") != std::string::npos);
}

TEST_CASE("attention: cross-attention rows are the output tokens, columns the source") {
  const TempDir& dir = trained_run();
  const RunResult r =
      run_qkv("attention '" + dir.file("run") + "' '3 1 4' --out '" + dir.file("cross.png") + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  std::smatch m;
  const std::regex shape(
      R"(\((\d+) x (\d+)\): cross-attention, layer 2/2, mean of 2 heads, (\d+) x (\d+))");
  REQUIRE(std::regex_search(r.output, m, shape));
  const int rows = std::stoi(m[3]), cols = std::stoi(m[4]);
  CHECK(cols == 3);
  // the output line has rows - 1 tokens (the last row is <eos>)
  const std::regex out_line(R"(output: ([^\n]*)\n)");
  std::smatch o;
  REQUIRE(std::regex_search(r.output, o, out_line));
  const std::string out = o[1];
  const int out_tokens =
      out.empty() ? 0 : 1 + static_cast<int>(std::count(out.begin(), out.end(), ' '));
  CHECK(rows == out_tokens + 1);
  // the size: row labels include "<eos>" (5 characters), column labels one character
  const int width = (12 + 14 + 8 + 12 * 5 + 6) + 3 * 32 + (16 + 16 + 6 + 48 + 12);
  const int height = 36 + std::max(rows * 32, 100) + (6 + 14 + 8 + 14 + 12);
  const auto [w, h] = png_size(read_file(dir.file("cross.png")));
  CHECK(w == std::max(width, 240));
  CHECK(h == height);
  CHECK(std::stoi(m[1]) == w);
  CHECK(std::stoi(m[2]) == h);
}

TEST_CASE("attention: SVG output, decoder self-attention, and errors") {
  const TempDir& dir = trained_run();
  RunResult r = run_qkv("attention '" + dir.file("run") + "' '7 7' --kind decoder-self --out '" +
                        dir.file("d.svg") + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  const std::string svg = read_file(dir.file("d.svg"));
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("&lt;bos&gt;") != std::string::npos);  // the decoder's first input
  r = run_qkv("attention '" + dir.file("run") + "' '1 2' --kind diagonal --out '" +
              dir.file("x.png") + "'");
  CHECK(r.status != 0);
  CHECK(r.output.find("--kind") != std::string::npos);
  r = run_qkv("attention '" + dir.file("run") + "' '1 2' --layer 3 --out '" + dir.file("x.png") +
              "'");
  CHECK(r.status == 1);
  CHECK(r.output.find("1..2") != std::string::npos);
  r = run_qkv("attention '" + dir.file("run") + "' '1 2' --head 5 --out '" + dir.file("x.png") +
              "'");
  CHECK(r.status == 1);
  r = run_qkv("attention '" + dir.file("run") + "' '1 banana' --out '" + dir.file("x.png") + "'");
  CHECK(r.status == 1);
  CHECK(r.output.find("banana") != std::string::npos);
  r = run_qkv("attention '" + dir.file("run") + "' '1 2' --out '" + dir.file("x.gif") + "'");
  CHECK(r.status == 1);
  CHECK_FALSE(std::filesystem::exists(dir.file("x.png")));
}

TEST_CASE("attention: --layer all --head all tiles every layer and head into one figure") {
  const TempDir& dir = trained_run();
  // One kind: 2 layers (rows) x 2 heads (columns) of the 310 x 250 map above, 8 px apart and
  // around: 8 + 310 + 8 + 310 + 8 = 644 wide, 8 + 250 + 8 + 250 + 8 = 524 high.
  RunResult r = run_qkv("attention '" + dir.file("run") +
                        "' '1 2 3 4 5' --kind self --layer all --head all --out '" +
                        dir.file("grid-self.png") + "'");
  INFO(r.output);
  REQUIRE(r.status == 0);
  CHECK(r.output.find("2 rows (kind x layer) of 2 maps") != std::string::npos);
  const auto [w, h] = png_size(read_file(dir.file("grid-self.png")));
  CHECK(w == 644);
  CHECK(h == 524);
  // Every kind: encoder self, decoder self and cross, 2 layers each; SVG too.
  r = run_qkv("attention '" + dir.file("run") + "' '1 2 3' --layer all --head all --out '" +
              dir.file("grid.svg") + "'");
  REQUIRE(r.status == 0);
  CHECK(r.output.find("6 rows (kind x layer) of 2 maps") != std::string::npos);
  const std::string svg = read_file(dir.file("grid.svg"));
  size_t maps = 0;
  for (size_t p = svg.find("<svg x="); p != std::string::npos; p = svg.find("<svg x=", p + 1))
    ++maps;
  CHECK(maps == 12);
  // One layer, every head: a row per kind.
  r = run_qkv("attention '" + dir.file("run") + "' '1 2 3' --layer 2 --head all --out '" +
              dir.file("heads.png") + "'");
  REQUIRE(r.status == 0);
  CHECK(r.output.find("3 rows (kind x layer) of 2 maps") != std::string::npos);
  r = run_qkv("attention '" + dir.file("run") + "' '1 2 3' --layer some --out '" +
              dir.file("x.png") + "'");
  CHECK(r.status == 2);
}

TEST_CASE("attention: --kind takes the model's site names, and the older spellings draw the same") {
  const TempDir& dir = trained_run();
  const auto draw = [&](const std::string& kind, const std::string& file) {
    const RunResult r = run_qkv("attention '" + dir.file("run") + "' '1 2 3' --kind " + kind +
                                " --threads 1 --out '" + dir.file(file) + "'");
    INFO(r.output);
    REQUIRE(r.status == 0);
    return read_file(dir.file(file));
  };
  CHECK(draw("encoder", "encoder.png") == draw("self", "self-again.png"));
  CHECK(draw("decoder", "decoder.svg") == draw("decoder-self", "decoder-self.svg"));
  // the default is the model's last site, cross-attention
  const std::string cross = draw("cross", "cross.png");
  const RunResult r = run_qkv("attention '" + dir.file("run") + "' '1 2 3' --threads 1 --out '" +
                              dir.file("default.png") + "'");
  REQUIRE(r.status == 0);
  CHECK(read_file(dir.file("default.png")) == cross);
  const RunResult bad = run_qkv("attention '" + dir.file("run") + "' '1 2' --kind causal --out '" +
                                dir.file("x.png") + "'");
  CHECK(bad.status == 1);
  CHECK(bad.output.find("--kind must be encoder, decoder or cross (or self, decoder-self), got "
                        "'causal'") != std::string::npos);
}
