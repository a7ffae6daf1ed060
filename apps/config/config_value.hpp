#pragma once
// Typed reading and printing of one YAML value of a config key. Readers are strict: an
// integer key takes a plain (unquoted) YAML integer that fits its type, a number key a
// finite number, a string key any scalar; a list key also takes one scalar as a
// one-element list, or nothing as the empty list. A reader throws ConfigValueError with
// a message that does not name the key ("expected an integer, got '2.5'"); the loader
// adds the key and where the value came from.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/fault/fault_spec.hpp"
#include "kernels/common/error.hpp"
#include "kernels/common/named_enum.hpp"
#include "kernels/data/token_corpus.hpp"
#include "kernels/model/model_arch.hpp"
#include "kernels/model/recompute.hpp"
#include "apps/text/message_text.hpp"

namespace conveyor {

/// A bad value for some key; what() lacks the key (the loader prefixes it).
class ConfigValueError : public InputError {
 public:
  using InputError::InputError;
};

/// How a value reads in an error message: 'abc', the list [1, 2], the mapping {a: 1},
/// nothing (for YAML null).
std::string describe_yaml(const YAML::Node& node);

/// "gpipe, 1f1b": a list of allowed names for messages.
std::string join_names(const std::vector<std::string>& names);

/// The shortest decimal text that reads back as exactly `v` ("0.003", "1e-08").
std::string format_number(double v);

/// One codec per value type a key may have: read (strict, see above), write (the form
/// written to the resolved config.yaml, which reads back to the same value), and the
/// type's name for the reference ("integer"). A new value type is one more codec here.
template <class T>
struct ConfigCodec;

template <>
struct ConfigCodec<std::int64_t> {
  static std::string type_name() { return "integer"; }
  static std::int64_t read(const YAML::Node& node);
  static YAML::Node write(std::int64_t v);
};

template <>
struct ConfigCodec<std::uint64_t> {
  static std::string type_name() { return "integer >= 0"; }
  static std::uint64_t read(const YAML::Node& node);
  static YAML::Node write(std::uint64_t v);
};

template <>
struct ConfigCodec<double> {
  static std::string type_name() { return "number"; }
  static double read(const YAML::Node& node);
  static YAML::Node write(double v);
};

template <>
struct ConfigCodec<bool> {
  static std::string type_name() { return "true | false"; }
  static bool read(const YAML::Node& node);
  static YAML::Node write(bool v);
};

template <>
struct ConfigCodec<std::string> {
  static std::string type_name() { return "string"; }
  static std::string read(const YAML::Node& node);
  static YAML::Node write(const std::string& v);
};

template <>
struct ConfigCodec<std::vector<std::int64_t>> {
  static std::string type_name() { return "list of integers"; }
  static std::vector<std::int64_t> read(const YAML::Node& node);
  static YAML::Node write(const std::vector<std::int64_t>& v);
};

template <>
struct ConfigCodec<std::vector<std::string>> {
  static std::string type_name() { return "list of strings"; }
  static std::vector<std::string> read(const YAML::Node& node);
  static YAML::Node write(const std::vector<std::string>& v);
};

template <>
struct ConfigCodec<std::vector<FaultSpec>> {
  static std::string type_name() { return std::string("list of fault entries: ") + kFaultInjectGrammar; }
  /// A list of strings, each parsed (parse_fault_spec); a bad one is named with the reason.
  static std::vector<FaultSpec> read(const YAML::Node& node);
  static YAML::Node write(const std::vector<FaultSpec>& v);
};

/// Reads a scalar that must be one of `known` and parses it with `parse`; else throws
/// "'x' is not one of a, b".
template <class E>
E read_enum_name(const YAML::Node& node, std::optional<E> (*parse)(std::string_view),
                 const std::vector<std::string>& known) {
  const std::string name = ConfigCodec<std::string>::read(node);
  if (auto v = parse(name)) return *v;
  throw ConfigValueError("'" + printable_excerpt(name) + "' is not one of " + join_names(known));
}

/// An enum written as one of its names: `Name` prints a value, `Parse` reads one (nullopt
/// for an unknown name), `Known` lists the names in the order the reference shows them.
template <class E, std::string_view (*Name)(E), std::optional<E> (*Parse)(std::string_view),
          const std::vector<std::string>& (*Known)()>
struct NamedEnumCodec {
  static std::string type_name() { return "one of " + join_names(Known()); }  // "one of a, b"
  static E read(const YAML::Node& node) { return read_enum_name(node, Parse, Known()); }
  static YAML::Node write(E v) { return YAML::Node(std::string(Name(v))); }
};

/// An enum with a table of names (kernels/common/named_enum.hpp, apps/config/config_enums.hpp),
/// written as its name. The reference calls its values "string, one of a, b", as it did
/// when these keys were stored as strings (README's key table is that reference).
template <NamedEnum E>
struct ConfigCodec<E> {
  static std::string type_name() { return "string, one of " + join_names(enum_names<E>()); }
  static E read(const YAML::Node& node) { return read_enum_name(node, &parse_enum<E>, enum_names<E>()); }
  static YAML::Node write(E v) { return YAML::Node(std::string(enum_name(v))); }
};

template <>
struct ConfigCodec<DataFormat>
    : NamedEnumCodec<DataFormat, data_format_name, parse_data_format, known_data_format_names> {};

template <>
struct ConfigCodec<Recompute>
    : NamedEnumCodec<Recompute, recompute_name, parse_recompute, known_recompute_names> {};

template <>
struct ConfigCodec<ModelArch>
    : NamedEnumCodec<ModelArch, model_arch_name, parse_model_arch, known_model_arch_names> {};

template <>
struct ConfigCodec<RopeScaling>
    : NamedEnumCodec<RopeScaling, rope_scaling_name, parse_rope_scaling,
                     known_rope_scaling_names> {};

}  // namespace conveyor
