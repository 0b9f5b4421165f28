// Reading a whole text corpus into memory, plain or gzip-compressed.
//
// A file that starts with the gzip magic bytes (1f 8b) is inflated with zlib whatever its
// name; anything else is read as it is. Errors name the file: missing, unreadable, or a
// corrupt or truncated gzip stream.
#pragma once
#include <string>

namespace qkv::data {

std::string read_text_file(const std::string& path);

}  // namespace qkv::data
