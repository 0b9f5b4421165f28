#include "data/text_file.hpp"

#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "core/error.hpp"

namespace qkv::data {

namespace {

bool is_gzip(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  f.read(reinterpret_cast<char*>(magic), 2);
  return f.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

std::string read_gzip(const std::string& path) {
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzopen(path.c_str(), "rb"), gzclose);
  QKV_CHECK(f, "read_text_file", path, ": cannot open");
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f.get(), buf, sizeof buf);
    if (n < 0) {
      int code = 0;
      const char* msg = gzerror(f.get(), &code);
      throw Error(cat(path, ": corrupt gzip data (", msg ? msg : "zlib error", ")"));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  // gzread stops quietly at a truncated stream; zlib reports it only through gzerror.
  int code = 0;
  gzerror(f.get(), &code);
  QKV_CHECK(code == Z_OK || code == Z_STREAM_END, "read_text_file", path,
            ": truncated or corrupt gzip data");
  return out;
}

}  // namespace

std::string read_text_file(const std::string& path) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe) throw Error(path + ": cannot read (no such file, or no permission)");
  if (is_gzip(path)) return read_gzip(path);
  std::ostringstream ss;
  ss << probe.rdbuf();
  return ss.str();
}

}  // namespace qkv::data
