#include "serve/http.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>
#include <memory>

#include "core/bounded_json.hpp"
#include "core/input_file.hpp"
#include "runfolder/run_file.hpp"

using nlohmann::json;

namespace qkv::serve {

namespace {

constexpr uint64_t kMaxServedFile = 256ull << 20;  // a figure, a CSV, a config, a log
constexpr size_t kStreamChunk = 64 << 10;          // what one answer holds of its file at once

bool ip_literal(const std::string& h) {
  unsigned char buf[sizeof(in6_addr)];
  return inet_pton(AF_INET, h.c_str(), buf) == 1 || inet_pton(AF_INET6, h.c_str(), buf) == 1;
}

}  // namespace

// Every answer's JSON: bytes that are not UTF-8 (a request's path, a folder's name, a message
// quoting either) become U+FFFD instead of an exception.
std::string dump_json(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void send_json(httplib::Response& res, const json& j, int status) {
  res.status = status;
  res.set_content(dump_json(j), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  std::string line = message.substr(0, message.find('\n'));  // one line
  send_json(res, {{"error", line}}, status);
}

// The host of a Host header ("127.0.0.1:8080" -> 127.0.0.1, "[::1]:8080" -> ::1), lowercase.
std::string host_name(const std::string& header) {
  std::string h = header;
  if (!h.empty() && h[0] == '[') {
    const size_t end = h.find(']');
    h = end == std::string::npos ? h : h.substr(1, end - 1);
  } else if (const size_t colon = h.rfind(':'); colon != std::string::npos) {
    h = h.substr(0, colon);
  }
  std::transform(h.begin(), h.end(), h.begin(), [](unsigned char c) { return std::tolower(c); });
  return h;
}

// DNS rebinding names the server by the attacker's domain: a request must name it by an IP
// address, localhost (or a name under .localhost), or the --host it was given.
bool allowed_host(const std::string& header, const std::string& served) {
  const std::string h = host_name(header);
  const std::string local = ".localhost";
  return !h.empty() && (h == "localhost" || ip_literal(h) || h == host_name(served) ||
                        (h.size() > local.size() && h.ends_with(local)));
}

// The media type of a Content-Type header, lowercase, without parameters.
std::string media_type(const std::string& content_type) {
  std::string t = content_type.substr(0, content_type.find(';'));
  while (!t.empty() && t.back() == ' ') t.pop_back();
  std::transform(t.begin(), t.end(), t.begin(), [](unsigned char c) { return std::tolower(c); });
  return t;
}

// A query parameter that must be a whole integer ("12abc" is not 12).
int64_t integer_param(const httplib::Request& req, const char* key, int64_t fallback) {
  if (!req.has_param(key)) return fallback;
  const std::string v = req.get_param_value(key);
  int64_t x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size())
    throw BadInput(std::string(key) + " must be an integer");
  return x;
}

// A served file, opened without blocking (a regular file only, within kMaxServedFile), sent
// kStreamChunk bytes at a time: an answer holds one chunk, never the file. The size is the
// file's when opened; a file that gets shorter meanwhile ends the answer early (the
// connection closes rather than send other bytes than the length promised).
void stream_file(httplib::Response& res, const std::string& path, const char* type) {
  auto file = std::make_shared<const run::RunFile>(path, "served file");
  if (file->size() > kMaxServedFile)
    throw BadInput(path + ": " + bytes_text(file->size()) + ", more than the " +
                   bytes_text(kMaxServedFile) + " a served file may hold");
  res.set_content_provider(static_cast<size_t>(file->size()), type,
                           [file](size_t offset, size_t length, httplib::DataSink& sink) {
                             const std::string chunk =
                                 file->read(offset, std::min(length, kStreamChunk));
                             return !chunk.empty() && sink.write(chunk.data(), chunk.size());
                           });
}

// A request body: JSON within the body bound (httplib's) and kMaxJsonDepth levels.
json parse_body(const httplib::Request& req) {
  std::string why;
  std::optional<json> j = try_parse_json(req.body, why, {kMaxJsonDepth, req.body.size()});
  if (!j && too_deep(why)) throw BadInput("the request body is " + why);
  if (!j) throw BadInput("the request body is not valid JSON");
  if (!j->is_object()) throw BadInput("the request body must be a JSON object");
  return std::move(*j);
}

}  // namespace qkv::serve
