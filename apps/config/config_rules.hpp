#pragma once
// Checks on one key's value, and the builder that turns (key, field, help, rules) into a
// ConfigKey. A rule is a small value with
//   std::string describe() const;                        // ">= 1", for the reference
//   std::optional<std::string> check(const T& v) const;  // "must be >= 1, got 0"
// Rules on a number also apply to each element of a list of numbers.
// Checks that involve two keys live in config_validation.cpp, not here.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "apps/config/config_keys.hpp"
#include "apps/config/config_value.hpp"
#include "apps/text/message_text.hpp"

namespace conveyor::config_rules {

inline std::string show(std::int64_t v) { return std::to_string(v); }
inline std::string show(std::uint64_t v) { return std::to_string(v); }
inline std::string show(int v) { return std::to_string(v); }
inline std::string show(double v) { return format_number(v); }

template <class T>
struct is_list : std::false_type {};
template <class T>
struct is_list<std::vector<T>> : std::true_type {};

// Applies `one` to a value, or to each element of a list with the element's index named.
template <class T, class One>
std::optional<std::string> each(const T& v, One one) {
  if constexpr (is_list<T>::value) {
    for (std::size_t i = 0; i < v.size(); ++i)
      if (auto err = one(v[i])) return "element " + std::to_string(i) + " " + *err;
    return std::nullopt;
  } else {
    return one(v);
  }
}

template <class B>
struct AtLeast {
  B min;
  std::string why;  // appended in parentheses, e.g. "nodes heartbeat every 250 ms"
  std::string describe() const { return ">= " + show(min); }
  template <class T>
  std::optional<std::string> check(const T& value) const {
    return each(value, [&](auto v) -> std::optional<std::string> {
      if (v >= min) return std::nullopt;
      return "must be >= " + show(min) + ", got " + show(v) + (why.empty() ? "" : " (" + why + ")");
    });
  }
};

template <class B>
struct AtMost {
  B max;
  std::string why;  // appended in parentheses, e.g. "token ids are uint16"
  std::string describe() const { return "<= " + show(max); }
  template <class T>
  std::optional<std::string> check(const T& value) const {
    return each(value, [&](auto v) -> std::optional<std::string> {
      if (v <= max) return std::nullopt;
      return "must be <= " + show(max) + ", got " + show(v) + (why.empty() ? "" : " (" + why + ")");
    });
  }
};

struct Interval {
  double lo, hi;
  bool lo_open, hi_open;
  std::string text() const {
    return std::string(lo_open ? "(" : "[") + show(lo) + ", " + show(hi) + (hi_open ? ")" : "]");
  }
  std::string describe() const { return "in " + text(); }
  std::optional<std::string> check(double v) const {
    const bool ok = (lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi);
    if (ok) return std::nullopt;
    return "must be in " + text() + ", got " + show(v);
  }
};

struct GreaterThan {
  double lo;
  std::string describe() const { return "> " + show(lo); }
  std::optional<std::string> check(double v) const {
    if (v > lo) return std::nullopt;
    return "must be > " + show(lo) + ", got " + show(v);
  }
};

struct NonEmpty {
  std::string describe() const { return "not empty"; }
  template <class T>
  std::optional<std::string> check(const T& v) const {
    if (!v.empty()) return std::nullopt;
    return std::string("must not be empty");
  }
};

struct Distinct {
  std::string describe() const { return "no repeats"; }
  template <class T>
  std::optional<std::string> check(const std::vector<T>& v) const {
    std::set<T> seen;
    for (const auto& x : v)
      if (!seen.insert(x).second) return "must not repeat a value, got " + show(x) + " twice";
    return std::nullopt;
  }
};

template <class B>
AtLeast<B> at_least(B min, std::string why = "") { return {min, std::move(why)}; }
template <class B>
AtMost<B> at_most(B max, std::string why = "") { return {max, std::move(why)}; }
inline Interval open_interval(double lo, double hi) { return {lo, hi, true, true}; }
inline Interval closed_open_interval(double lo, double hi) { return {lo, hi, false, true}; }
inline GreaterThan greater_than(double lo) { return {lo}; }
inline NonEmpty non_empty() { return {}; }
inline Distinct distinct() { return {}; }

/// A ConfigKey whose value lives at `access(config)` (a lambda returning a reference to
/// the field, for const and non-const configs alike), read with ConfigCodec<field type>
/// and checked by `rules` in order.
/// The largest value any integer key takes (INT32_MAX).
inline constexpr std::int64_t kMaxConfigInteger = 2147483647;

template <class Access, class... Rules>
ConfigKey make_key(std::string name, Access access, std::string help, Rules... rules) {
  using T = std::remove_cvref_t<decltype(access(std::declval<RunConfig&>()))>;
  std::string allowed = ConfigCodec<T>::type_name();
  ((allowed += ", " + rules.describe()), ...);
  ConfigKey key;
  key.name = std::move(name);
  key.allowed = std::move(allowed);
  key.help = std::move(help);
  key.set = [access, rules...](RunConfig& c, const YAML::Node& node) {
    T value = ConfigCodec<T>::read(node);
    std::optional<std::string> err;
    ((err = err ? err : rules.check(value)), ...);
    // Integer keys are stored in 64 bits but counted in 32 by the runtime (threads, steps,
    // ranks): a larger value would wrap, so every integer key stops at INT32_MAX.
    if constexpr (std::is_same_v<T, std::int64_t> || std::is_same_v<T, std::vector<std::int64_t>>)
      if (!err) err = at_most(kMaxConfigInteger, "the runtime counts in 32 bits").check(value);
    if (err) throw ConfigValueError(*err);
    access(c) = std::move(value);
  };
  key.get = [access](const RunConfig& c) { return ConfigCodec<T>::write(access(c)); };
  return key;
}

}  // namespace conveyor::config_rules
