#include "apps/config/config_value.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <string_view>
#include <system_error>

#include <fmt/format.h>

#include "apps/config/yaml_size.hpp"
#include "apps/text/message_text.hpp"

namespace conveyor {
namespace {

// yaml-cpp tags a plain scalar "?" and a quoted one "!": `layers: "4"` is a string.
bool is_quoted(const YAML::Node& node) { return node.Tag() == "!"; }

void make_flow(YAML::Node node) {
  if (!node.IsSequence() && !node.IsMap()) return;
  node.SetStyle(YAML::EmitterStyle::Flow);  // a node read from a block keeps its style
  for (auto item : node) {
    if (node.IsMap()) {
      make_flow(item.second);
    } else {
      make_flow(item);
    }
  }
}

// A value is printed whole only when it is small: Clone expands aliases, so a value made
// of nested aliases would take exponential time and memory just to be shown.
constexpr std::size_t kPrintedNodes = 64;

std::string flow(const YAML::Node& node) {
  const std::size_t nodes = expanded_node_count(node, kPrintedNodes);
  if (nodes > kPrintedNodes)
    return fmt::format("of more than {} values (not shown)", kPrintedNodes);
  YAML::Node copy = YAML::Clone(node);
  make_flow(copy);
  YAML::Emitter out;
  out << YAML::Flow << copy;
  return printable_excerpt(out.c_str());
}

[[noreturn]] void expected(const std::string& what, const YAML::Node& node) {
  std::string got = describe_yaml(node);
  if (node.IsScalar() && is_quoted(node)) got = "the string " + got + " (write it without quotes)";
  throw ConfigValueError("expected " + what + ", got " + got);
}

// Parses all of `text` as a decimal integer of type T; a leading '+' is allowed.
template <class T>
std::from_chars_result parse_integer(std::string_view text, T* out) {
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  auto r = std::from_chars(text.data(), text.data() + text.size(), *out);
  if (r.ec == std::errc{} && r.ptr != text.data() + text.size()) r.ec = std::errc::invalid_argument;
  return r;
}

template <class T>
T read_integer(const YAML::Node& node, const char* what) {
  if (!node.IsScalar() || is_quoted(node)) expected(what, node);
  T v{};
  const auto r = parse_integer(node.Scalar(), &v);
  if (r.ec == std::errc::result_out_of_range) {
    // Tell "too big" from "negative" for unsigned keys.
    std::int64_t probe = 0;
    if (std::is_unsigned_v<T> && parse_integer(node.Scalar(), &probe).ec == std::errc{})
      expected(what, node);
    throw ConfigValueError(describe_yaml(node) + " does not fit in a " +
                           (std::is_unsigned_v<T> ? "64-bit unsigned" : "64-bit") + " integer");
  }
  if (r.ec != std::errc{}) expected(what, node);
  return v;
}

}  // namespace

std::string describe_yaml(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return "nothing";
  if (node.IsScalar()) {
    std::string quoted = "'";  // appended piecewise: GCC 12 warns falsely on "'" + str
    quoted += printable_excerpt(node.Scalar());
    return quoted += "'";
  }
  if (node.IsSequence()) return "the list " + flow(node);
  return "the mapping " + flow(node);
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "" : ", ") + n;
  return out;
}

std::string format_number(double v) {
  std::array<char, 32> buf{};
  const auto r = std::to_chars(buf.data(), buf.data() + buf.size(), v);
  return std::string(buf.data(), r.ptr);
}

std::int64_t ConfigCodec<std::int64_t>::read(const YAML::Node& node) {
  return read_integer<std::int64_t>(node, "an integer");
}
YAML::Node ConfigCodec<std::int64_t>::write(std::int64_t v) { return YAML::Node(std::to_string(v)); }

std::uint64_t ConfigCodec<std::uint64_t>::read(const YAML::Node& node) {
  return read_integer<std::uint64_t>(node, "a non-negative integer");
}
YAML::Node ConfigCodec<std::uint64_t>::write(std::uint64_t v) { return YAML::Node(std::to_string(v)); }

double ConfigCodec<double>::read(const YAML::Node& node) {
  if (!node.IsScalar() || is_quoted(node)) expected("a number", node);
  std::string_view text = node.Scalar();
  if (!text.empty() && text.front() == '+') text.remove_prefix(1);
  double v = 0;
  const auto r = std::from_chars(text.data(), text.data() + text.size(), v);
  if (r.ec == std::errc::result_out_of_range)
    throw ConfigValueError(describe_yaml(node) + " is out of range for a number");
  if (r.ec != std::errc{} || r.ptr != text.data() + text.size()) expected("a number", node);
  if (!std::isfinite(v)) expected("a finite number", node);
  return v;
}
YAML::Node ConfigCodec<double>::write(double v) { return YAML::Node(format_number(v)); }

bool ConfigCodec<bool>::read(const YAML::Node& node) {
  if (node.IsScalar() && !is_quoted(node)) {
    const std::string& s = node.Scalar();
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  expected("true or false", node);
}
YAML::Node ConfigCodec<bool>::write(bool v) { return YAML::Node(v ? "true" : "false"); }

std::string ConfigCodec<std::string>::read(const YAML::Node& node) {
  if (!node.IsScalar()) expected("a string", node);
  return node.Scalar();
}
YAML::Node ConfigCodec<std::string>::write(const std::string& v) { return YAML::Node(v); }

std::vector<std::int64_t> ConfigCodec<std::vector<std::int64_t>>::read(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return {};
  if (node.IsScalar()) return {ConfigCodec<std::int64_t>::read(node)};
  if (!node.IsSequence()) expected("a list of integers", node);
  std::vector<std::int64_t> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    try {
      out.push_back(ConfigCodec<std::int64_t>::read(node[i]));
    } catch (const ConfigValueError& e) {
      throw ConfigValueError("element " + std::to_string(i) + " of " + describe_yaml(node) + ": " +
                             e.what());
    }
  }
  return out;
}
YAML::Node ConfigCodec<std::vector<std::int64_t>>::write(const std::vector<std::int64_t>& v) {
  YAML::Node seq(YAML::NodeType::Sequence);
  for (auto x : v) seq.push_back(ConfigCodec<std::int64_t>::write(x));
  seq.SetStyle(YAML::EmitterStyle::Flow);
  return seq;
}

std::vector<std::string> ConfigCodec<std::vector<std::string>>::read(const YAML::Node& node) {
  if (!node.IsDefined() || node.IsNull()) return {};
  if (node.IsScalar()) return {node.Scalar()};
  if (!node.IsSequence()) expected("a list of strings", node);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < node.size(); ++i) {
    if (!node[i].IsScalar())
      throw ConfigValueError("element " + std::to_string(i) + " of " + describe_yaml(node) +
                             ": expected a string");
    out.push_back(node[i].Scalar());
  }
  return out;
}
YAML::Node ConfigCodec<std::vector<std::string>>::write(const std::vector<std::string>& v) {
  YAML::Node seq(YAML::NodeType::Sequence);
  for (const auto& x : v) seq.push_back(YAML::Node(x));
  seq.SetStyle(YAML::EmitterStyle::Flow);
  return seq;
}

std::vector<FaultSpec> ConfigCodec<std::vector<FaultSpec>>::read(const YAML::Node& node) {
  std::vector<FaultSpec> out;
  for (const auto& entry : ConfigCodec<std::vector<std::string>>::read(node)) try {
      out.push_back(parse_fault_spec(entry));
    } catch (const std::invalid_argument& e) {
      throw ConfigValueError(printable_excerpt(e.what(), 400));
    }
  return out;
}
YAML::Node ConfigCodec<std::vector<FaultSpec>>::write(const std::vector<FaultSpec>& v) {
  std::vector<std::string> texts;
  for (const auto& f : v) texts.push_back(f.text);
  return ConfigCodec<std::vector<std::string>>::write(texts);
}

}  // namespace conveyor
