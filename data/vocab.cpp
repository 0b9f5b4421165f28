#include "data/vocab.hpp"

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.hpp"
#include "core/input_file.hpp"

namespace qkv::data {

Vocab::Vocab() : Vocab(std::vector<std::string>{kPad, kBos, kEos, kUnk}) {}

Vocab::Vocab(std::vector<std::string> tokens) : tokens_(std::move(tokens)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const bool fresh = index_.emplace(tokens_[i], static_cast<int64_t>(i)).second;
    QKV_CHECK(fresh, "Vocab", "duplicate token '", tokens_[i], "' at ids ", index_[tokens_[i]],
              " and ", i);
  }
  auto find = [&](const char* t) {
    auto it = index_.find(t);
    return it == index_.end() ? int64_t{-1} : it->second;
  };
  pad_ = find(kPad), bos_ = find(kBos), eos_ = find(kEos), unk_ = find(kUnk);
  QKV_CHECK(pad_ <= 0, "Vocab", kPad, " must be id 0 (batches pad with 0), found at id ", pad_);
}

Vocab Vocab::with_specials(const std::vector<std::string>& symbols) {
  std::vector<std::string> t{kPad, kBos, kEos, kUnk};
  t.insert(t.end(), symbols.begin(), symbols.end());
  return Vocab(std::move(t));
}

Vocab Vocab::build(const std::vector<std::vector<std::string>>& corpus, int64_t min_freq,
                   int64_t max_size) {
  QKV_CHECK(min_freq >= 1, "Vocab::build", "min_freq must be >= 1, got ", min_freq);
  QKV_CHECK(max_size == 0 || max_size > 4, "Vocab::build",
            "max_size must be 0 (no limit) or more than the 4 specials, got ", max_size);
  std::map<std::string, int64_t> counts;  // ordered: ties below break by bytes
  for (const auto& sentence : corpus)
    for (const auto& t : sentence) ++counts[t];
  std::vector<std::pair<std::string, int64_t>> kept;
  for (auto& [t, n] : counts)
    if (n >= min_freq && t != kPad && t != kBos && t != kEos && t != kUnk) kept.emplace_back(t, n);
  std::stable_sort(kept.begin(), kept.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  std::vector<std::string> symbols;
  for (auto& [t, n] : kept) {
    if (max_size > 0 && static_cast<int64_t>(symbols.size()) + 4 >= max_size) break;
    symbols.push_back(t);
  }
  return with_specials(symbols);
}

int64_t Vocab::id(const std::string& token) const {
  auto it = index_.find(token);
  if (it != index_.end()) return it->second;
  QKV_CHECK(unk_ >= 0, "Vocab::id", "token '", token, "' is not in a vocabulary without ", kUnk);
  return unk_;
}

const std::string& Vocab::token(int64_t id) const {
  QKV_CHECK(id >= 0 && id < size(), "Vocab::token", "id ", id, " out of range for size ", size());
  return tokens_[static_cast<size_t>(id)];
}

std::vector<int64_t> Vocab::encode(const std::vector<std::string>& tokens) const {
  std::vector<int64_t> ids;
  ids.reserve(tokens.size());
  for (const auto& t : tokens) ids.push_back(id(t));
  return ids;
}

std::vector<std::string> Vocab::decode(const std::vector<int64_t>& ids, bool keep_specials) const {
  std::vector<std::string> out;
  for (int64_t i : ids) {
    if (!keep_specials) {
      if (i == eos_) break;
      if (i == pad_ || i == bos_) continue;
    }
    out.push_back(token(i));
  }
  return out;
}

namespace {
std::string escape(const std::string& t) {
  std::string out;
  for (char c : t) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += c;
    }
  }
  return out;
}
}  // namespace

void Vocab::write(std::ostream& out) const {
  for (const auto& t : tokens_) out << escape(t) << '\n';
}

void Vocab::save(const std::string& path) const {
  std::ofstream f(path, std::ios::binary);
  QKV_CHECK(f.good(), "Vocab::save", "cannot open ", path, " for writing");
  write(f);
  f.flush();
  QKV_CHECK(f.good(), "Vocab::save", "write to ", path, " failed");
}

Vocab Vocab::load(const std::string& path) {
  // Opened without blocking and refused unless a regular file (a FIFO or a device in a run
  // folder must not hang a reader), read within a bound.
  InputRules rules;
  rules.what = "vocabulary file";
  rules.max_bytes = uint64_t{1} << 30;
  std::istringstream f(read_input(path, rules));
  return parse(f, path);
}

Vocab Vocab::parse(std::istream& f, const std::string& path) {
  std::vector<std::string> tokens;
  std::string line;
  int64_t lineno = 0;
  while (std::getline(f, line)) {
    ++lineno;
    std::string t;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] != '\\') {
        t += line[i];
        continue;
      }
      QKV_CHECK(i + 1 < line.size(), "Vocab::load", path, ":", lineno, ": dangling backslash");
      const char e = line[++i];
      if (e == '\\')
        t += '\\';
      else if (e == 'n')
        t += '\n';
      else if (e == 'r')
        t += '\r';
      else if (e == 't')
        t += '\t';
      else
        throw Error(cat("Vocab::load: ", path, ":", lineno, ": unknown escape \\", e));
    }
    QKV_CHECK(!t.empty(), "Vocab::load", path, ":", lineno, ": empty token");
    tokens.push_back(std::move(t));
  }
  QKV_CHECK(!tokens.empty(), "Vocab::load", path, " holds no tokens");
  try {
    return Vocab(std::move(tokens));
  } catch (const Error& e) {
    throw Error(cat("Vocab::load: ", path, ": ", e.what()));
  }
}

}  // namespace qkv::data
