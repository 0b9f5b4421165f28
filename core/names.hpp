// Names tables: how a kind a config chooses among (a position encoding, an optimizer, a task...)
// is spelled. Each kind is an enum class declared next to the code it selects, with one table
// of {name, value} pairs and a names_of overload found by argument-dependent lookup:
//
//   enum class Activation { relu, gelu };
//   inline constexpr EnumName<Activation> kActivationNames[] = {{"relu", Activation::relu},
//                                                               {"gelu", Activation::gelu}};
//   constexpr std::span<const EnumName<Activation>> names_of(Activation) {
//     return kActivationNames;
//   }
//
// The config reader parses a name once (parse_name) and the effective config prints it back
// (name_of); everything in between switches on the enum, so -Wswitch flags every switch a new
// kind misses. A table may list an alias after the canonical name (same value, read but never
// printed): name_of returns the first entry of a value.
#pragma once
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/nearest.hpp"

namespace qkv {

template <class E>
struct EnumName {
  std::string_view name;
  E value;
};

// E is a kind with a names table.
template <class E>
concept NamedEnum = std::is_enum_v<E> && requires(E e) {
  { names_of(e) } -> std::convertible_to<std::span<const EnumName<E>>>;
};

template <NamedEnum E>
constexpr std::span<const EnumName<E>> names_table() {
  return names_of(E{});
}

// The canonical name of v ("?" if the table misses it, which a test per table rules out).
template <NamedEnum E>
constexpr std::string_view name_of(E v) {
  for (const EnumName<E>& n : names_table<E>())
    if (n.value == v) return n.name;
  return "?";
}

template <NamedEnum E>
constexpr std::optional<E> find_name(std::string_view name) {
  for (const EnumName<E>& n : names_table<E>())
    if (n.name == name) return n.value;
  return std::nullopt;
}

// "a, b or c": the canonical names (aliases left out), for error messages.
template <NamedEnum E>
std::string names_list() {
  std::string out;
  const auto t = names_table<E>();
  size_t count = 0, seen = 0;
  for (size_t i = 0; i < t.size(); ++i) count += name_of(t[i].value) == t[i].name;
  for (size_t i = 0; i < t.size(); ++i) {
    if (name_of(t[i].value) != t[i].name) continue;
    if (seen > 0) out += seen + 1 == count ? " or " : ", ";
    out += t[i].name;
    ++seen;
  }
  return out;
}

// The value named name; else throws Error("KEY: must be a, b or c, got 'name'"), with
// "; did you mean 'b'?" when a name is near (core/nearest.hpp).
template <NamedEnum E>
E parse_name(std::string_view name, const std::string& key) {
  if (const std::optional<E> v = find_name<E>(name)) return *v;
  // "...; did you mean 'sinusoidal'?": the nearest name of the table, aliases included
  std::vector<std::string_view> names;
  for (const EnumName<E>& n : names_table<E>()) names.push_back(n.name);
  throw Error(cat(key, ": must be ", names_list<E>(), ", got '", name, "'",
                  did_you_mean(name, names, "'", "'")));
}

}  // namespace qkv
