// Inputs that never end, through the real binary: a config or corpus path that is a device
// (/dev/zero, /dev/urandom), a FIFO nobody writes, a FIFO or gzip stream with an endless line.
// Each is one error line and exit 1, never a wait; ctest's TIMEOUT (5 s per case,
// tests/apps/CMakeLists.txt) fails a case that hangs.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "support/process.hpp"

using namespace qkv::testing;
namespace fs = std::filesystem;

namespace {

std::string quoted(const std::string& s) { return std::string(1, '\'') + s + "'"; }

// A tiny run of copy.toml whose corpus is `path` (task tsv, lm or parallel).
std::string train_on(const TempDir& t, const std::string& task, const std::string& path) {
  std::string a = "train " + quoted(source_dir() + "/configs/copy.toml") + " --run-dir " +
                  quoted(t.file("run")) + " --quiet --threads 1 --data.task " + task +
                  " --data.path " + quoted(path);
  if (task == "tsv") a += " --data.train_size 0 --data.valid_size 2 --data.test_size 2";
  if (task == "lm") a += " --model.kind decoder";
  if (task == "parallel") a += " --data.src_lang de --data.tgt_lang en";
  return a;
}

void expect_one_error(const std::string& args, const std::string& expect) {
  const RunResult r = run_qkv(args);
  INFO(args << "\n" << r.output);
  CHECK(r.status == 1);
  CHECK(r.output.find(expect) != std::string::npos);
  CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
}

// Writes an endless line into a FIFO from a thread. The FIFO is held open read-write first
// (Linux never blocks that), so a writer is there before qkv opens it, as with `<(command)`.
class EndlessWriter {
 public:
  explicit EndlessWriter(const std::string& fifo) {
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    fd_ = ::open(fifo.c_str(), O_RDWR | O_NONBLOCK);
    REQUIRE(fd_ >= 0);
    thread_ = std::thread([this] {
      const std::string chunk(1 << 16, 'a');
      while (!stop_)
        if (::write(fd_, chunk.data(), chunk.size()) < 0)  // full: wait for the reader
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
    });
  }
  ~EndlessWriter() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

 private:
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A gzip file that inflates to `n` bytes without a newline.
void gzip_endless_line(const std::string& path, size_t n) {
  gzFile f = gzopen(path.c_str(), "wb9");
  const std::string chunk(1 << 16, 'z');
  for (size_t done = 0; done < n; done += chunk.size())
    gzwrite(f, chunk.data(), static_cast<unsigned>(chunk.size()));
  gzclose(f);
}

}  // namespace

TEST_CASE("endless: a config that is /dev/urandom, /dev/zero or a FIFO", "[e2e]") {
  TempDir t("endless_config");
  const std::string run = " --run-dir " + quoted(t.file("run")) + " --quiet";
  expect_one_error("train /dev/urandom" + run, "/dev/urandom: not a config file (it is a device)");
  expect_one_error("config /dev/zero", "/dev/zero: not a config file (it is a device)");
  EndlessWriter w(t.file("config.fifo"));
  expect_one_error("train " + quoted(t.file("config.fifo")) + run,
                   "config.fifo: not a config file (it is a FIFO)");
  CHECK(!fs::exists(t.path / "run"));
}

TEST_CASE("endless: a config larger than 16 MiB, whatever its one line", "[e2e]") {
  TempDir t("endless_config_size");
  { std::ofstream(t.file("big.toml")) << "# " << std::string((16 << 20) + 10, 'x'); }
  expect_one_error("config " + quoted(t.file("big.toml")),
                   "big.toml: more than 16 MiB, too large for a config file");
}

TEST_CASE("endless: a tsv corpus that is /dev/zero", "[e2e]") {
  TempDir t("endless_zero");
  expect_one_error(train_on(t, "tsv", "/dev/zero"), "/dev/zero: not a text file (it is a device)");
  CHECK(!fs::exists(t.path / "run"));
}

TEST_CASE("endless: a language model's text that is /dev/urandom", "[e2e]") {
  TempDir t("endless_urandom");
  expect_one_error(train_on(t, "lm", "/dev/urandom"),
                   "/dev/urandom: not a text file (it is a device)");
}

TEST_CASE("endless: a tsv corpus that is a FIFO nobody writes", "[e2e]") {
  TempDir t("endless_fifo");
  REQUIRE(::mkfifo(t.file("corpus.fifo").c_str(), 0644) == 0);
  expect_one_error(train_on(t, "tsv", t.file("corpus.fifo")), "holds no sentence pairs");
}

TEST_CASE("endless: a tsv corpus from a FIFO that writes one endless line", "[e2e]") {
  TempDir t("endless_fifo_line");
  EndlessWriter w(t.file("corpus.fifo"));
  expect_one_error(train_on(t, "tsv", t.file("corpus.fifo")),
                   "corpus.fifo:1: a line longer than 1 MiB");
}

TEST_CASE("endless: a parallel corpus whose gzip file inflates to an endless line", "[e2e]") {
  TempDir t("endless_gzip");
  fs::create_directories(t.path / "corpus");
  gzip_endless_line((t.path / "corpus" / "train.de.gz").string(), 64 << 20);
  gzip_endless_line((t.path / "corpus" / "train.en.gz").string(), 1 << 16);
  expect_one_error(train_on(t, "parallel", t.file("corpus")),
                   "train.de.gz:1: a line longer than 1 MiB");
}
