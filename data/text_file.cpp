#include "data/text_file.hpp"

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <memory>

#include "core/error.hpp"

namespace qkv::data {

InputRules corpus_rules(uint64_t max_line) {
  InputRules r;
  r.what = "text file";
  r.allow_pipes = true;
  r.max_line = max_line;
  return r;
}

// zlib's gzread reads a plain file as it is and inflates a gzip one, so one code path serves
// both; a truncated or corrupt stream is an error, never a short read.
std::string read_text_file(const std::string& path, const InputRules& rules) {
  namespace fs = std::filesystem;
  std::error_code ec;
  QKV_CHECK(fs::exists(path, ec), "read_text_file", path, ": no such file");
  QKV_CHECK(!fs::is_directory(path, ec), "read_text_file", path, ": is a folder, not a file");
  int fd = -1;
  try {
    fd = open_input(path, rules);
  } catch (const Error& e) {
    throw Error(cat("read_text_file: ", e.what()));
  }
  std::unique_ptr<gzFile_s, int (*)(gzFile)> f(gzdopen(fd, "rb"), gzclose);
  if (!f) ::close(fd);
  QKV_CHECK(f != nullptr, "read_text_file", path, ": cannot read (out of memory?)");
  gzbuffer(f.get(), 1 << 17);
  InputBounds bounds(path, rules);
  std::string out;
  char buf[1 << 16];
  for (;;) {
    const int n = gzread(f.get(), buf, sizeof buf);
    if (n > 0) {
      try {
        bounds.add(buf, static_cast<size_t>(n));
      } catch (const Error& e) {
        throw Error(cat("read_text_file: ", e.what()));
      }
      out.append(buf, static_cast<size_t>(n));
    }
    int code = Z_OK;
    const char* msg = gzerror(f.get(), &code);
    if (n < 0 || (code != Z_OK && code != Z_STREAM_END))
      throw Error(cat("read_text_file: ", path, ": ",
                      code == Z_BUF_ERROR ? "truncated gzip file (unexpected end of file)"
                                          : cat("corrupt gzip data (", msg, ")")));
    if (n == 0) break;
  }
  return out;
}

}  // namespace qkv::data
