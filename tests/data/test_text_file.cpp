// Reading corpora within bounds (data/text_file.hpp, core/input_file.hpp): devices refused, a
// FIFO nobody writes read as empty, the bytes read and the line lengths bounded while reading,
// gzip or not, whatever stat says.
#include <sys/stat.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <string>

#include "data/corpus.hpp"
#include "data/text_file.hpp"
#include "support/common.hpp"

using namespace qkv;
using namespace qkv::data;
using qkv::testing::scratch;

namespace {
// A gzip file of n bytes of c (compressed a thousandfold: a small file, a huge text).
std::string gzip_of(const std::string& name, size_t n, char c) {
  const std::string p = scratch(name);
  gzFile f = gzopen(p.c_str(), "wb9");
  const std::string chunk(1 << 16, c);
  for (size_t done = 0; done < n; done += chunk.size())
    gzwrite(f, chunk.data(), static_cast<unsigned>(std::min(chunk.size(), n - done)));
  gzclose(f);
  return p;
}
}  // namespace

TEST_CASE("text files: devices are refused, a FIFO nobody writes is empty") {
  CHECK_THROWS_WITH(read_text_file("/dev/zero"),
                    Catch::Contains("/dev/zero: not a text file (it is a device)"));
  CHECK_THROWS_WITH(read_text_file("/dev/urandom"), Catch::Contains("it is a device"));
  const std::string fifo = scratch("nobody.fifo");
  std::remove(fifo.c_str());
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK(read_text_file(fifo).empty());
  InputRules strict;  // a config: regular files only
  strict.what = "config file";
  CHECK_THROWS_WITH(read_input(fifo, strict), Catch::Contains("not a config file (it is a FIFO)"));
  CHECK(read_tsv(fifo).pairs.empty());
  std::remove(fifo.c_str());
}

TEST_CASE("text files: bytes and line lengths are bounded as they are read") {
  InputRules small = corpus_rules();
  small.max_bytes = 1000;
  const std::string plain = scratch("long.txt");
  { std::ofstream(plain) << std::string(1500, 'x') << "\n"; }
  CHECK_THROWS_WITH(read_text_file(plain, small), Catch::Contains("more than 1000 bytes"));
  CHECK(read_text_file(plain).size() == 1501);
  // a gzip stream inflating past the bound: counted after inflating, stat's size is small
  const std::string bomb = gzip_of("bomb.gz", 3 << 20, 'a');
  CHECK_THROWS_WITH(read_text_file(bomb, corpus_rules(kMaxCorpusLine)),
                    Catch::Contains("bomb.gz:1: a line longer than 1 MiB"));
  InputRules mib = corpus_rules();
  mib.max_bytes = 1 << 20;
  CHECK_THROWS_WITH(read_text_file(bomb, mib), Catch::Contains("more than 1 MiB"));
  // the line bound counts from each newline; the line number is the one too long
  const std::string lines = scratch("lines.txt");
  { std::ofstream(lines) << "short\nshort\n" << std::string(2000, 'y') << "\n"; }
  InputRules line = corpus_rules(1000);
  CHECK_THROWS_WITH(read_text_file(lines, line), Catch::Contains("lines.txt:3: a line longer"));
  CHECK_THROWS_WITH(read_tsv(bomb), Catch::Contains("a line longer than 1 MiB"));
}
