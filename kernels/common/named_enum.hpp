#pragma once
// An enum that is written as text (a config value, a field of a printed report): one table
// of (value, name) per enum, read both to parse a name and to print a value, so that the
// two cannot disagree. An enum joins by specialising EnumNames:
//   template <> struct EnumNames<Color> {
//     static constexpr NamedValue<Color> entries[] = {{Color::red, "red"}, ...};
//   };
// listing every value once, in the order messages and references show the names. JSON
// writes such an enum by name too (below): left to nlohmann it would write a number.
#include <nlohmann/json_fwd.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace conveyor {

template <class E>
struct NamedValue {
  E value;
  std::string_view name;
};

/// Specialised per enum with `static constexpr NamedValue<E> entries[]`.
template <class E>
struct EnumNames;

template <class E>
concept NamedEnum = std::is_enum_v<E> && requires { EnumNames<E>::entries; };

/// True when no two entries share a value or a name: the table reads back both ways.
template <NamedEnum E>
constexpr bool enum_table_is_one_to_one() {
  const auto& all = EnumNames<E>::entries;
  for (const auto& a : all)
    for (const auto& b : all)
      if (&a != &b && (a.value == b.value || a.name == b.name)) return false;
  return true;
}

/// The name of `v`; "?" only for a value cast from an integer outside the enum.
template <NamedEnum E>
constexpr std::string_view enum_name(E v) {
  static_assert(enum_table_is_one_to_one<E>(), "EnumNames lists a value or a name twice");
  for (const auto& e : EnumNames<E>::entries)
    if (e.value == v) return e.name;
  return "?";
}

/// The value named `name`, or nullopt when the table has no such name.
template <NamedEnum E>
constexpr std::optional<E> parse_enum(std::string_view name) {
  for (const auto& e : EnumNames<E>::entries)
    if (e.name == name) return e.value;
  return std::nullopt;
}

/// Every name, in the table's order (for "one of a, b" and references).
template <NamedEnum E>
const std::vector<std::string>& enum_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& e : EnumNames<E>::entries) out.emplace_back(e.name);
    return out;
  }();
  return names;
}

}  // namespace conveyor

NLOHMANN_JSON_NAMESPACE_BEGIN

// A named enum becomes its name in JSON (plan.json, reports, metrics), as the text does.
template <conveyor::NamedEnum E>
struct adl_serializer<E, void> {
  template <class Json>
  static void to_json(Json& j, E v) {
    j = std::string(conveyor::enum_name(v));
  }
};

NLOHMANN_JSON_NAMESPACE_END
