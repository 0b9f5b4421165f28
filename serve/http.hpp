// The HTTP side of `qkv serve` that every route shares: JSON answers and errors, the request
// checks (Host, Content-Type, a body's JSON and fields, integer parameters) and streamed files.
// Used by server.cpp's routes; knows nothing of runs or models.
#pragma once
#include <httplib.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "serve/model.hpp"  // BadInput

namespace qkv::serve {

// A request for something that is not served: an unknown run, a file outside it (a 404).
struct NotFound : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Every answer's JSON: bytes that are not UTF-8 (a request's path, a folder's name, a message
// quoting either) become U+FFFD instead of an exception.
std::string dump_json(const nlohmann::json& j);
void send_json(httplib::Response& res, const nlohmann::json& j, int status = 200);
// {"error": the message's first line}.
void send_error(httplib::Response& res, int status, const std::string& message);

// The host of a Host header ("127.0.0.1:8080" -> 127.0.0.1, "[::1]:8080" -> ::1), lowercase.
std::string host_name(const std::string& header);
// DNS rebinding names the server by the attacker's domain: a request must name it by an IP
// address, localhost (or a name under .localhost), or the --host it was given.
bool allowed_host(const std::string& header, const std::string& served);
// The media type of a Content-Type header, lowercase, without parameters.
std::string media_type(const std::string& content_type);
// A query parameter that must be a whole integer ("12abc" is not 12); BadInput otherwise.
int64_t integer_param(const httplib::Request& req, const char* key, int64_t fallback);

// A served file, opened without blocking (a regular file only, of at most 256 MiB), sent 64 KiB
// at a time: an answer holds one chunk, never the file. The size is the file's when opened; a
// file that gets shorter meanwhile ends the answer early (the connection closes rather than
// send other bytes than the length promised).
void stream_file(httplib::Response& res, const std::string& path, const char* type);

// A request body: a JSON object within the body bound (httplib's) and kMaxJsonDepth levels;
// BadInput otherwise.
nlohmann::json parse_body(const httplib::Request& req);

// A field of the body, of type T, or `fallback` when absent; a wrong type is bad input.
template <class T>
T field(const nlohmann::json& body, const char* key, T fallback) {
  if (!body.contains(key) || body[key].is_null()) return fallback;
  const nlohmann::json& v = body[key];
  if constexpr (std::is_same_v<T, std::string>) {
    if (!v.is_string()) throw BadInput(std::string(key) + " must be a string");
  } else if constexpr (std::is_integral_v<T>) {
    if (!v.is_number_integer()) throw BadInput(std::string(key) + " must be an integer");
  } else {
    if (!v.is_number()) throw BadInput(std::string(key) + " must be a number");
  }
  return v.get<T>();
}

// The heads a request removes: "ablate": "L.H,..." (inspect/heads.hpp); absent: none.
inline std::string ablation(const nlohmann::json& body) {
  return field<std::string>(body, "ablate", "");
}

}  // namespace qkv::serve
