#include "kernels/model/model_arch.hpp"

namespace conveyor {
namespace {

constexpr ModelArch kArchs[] = {ModelArch::gpt2, ModelArch::llama};
constexpr RopeScaling kScalings[] = {RopeScaling::none, RopeScaling::llama3};

template <class E, std::size_t N>
std::optional<E> parse_among(const E (&all)[N], std::string_view (*name)(E), std::string_view s) {
  for (E e : all)
    if (name(e) == s) return e;
  return std::nullopt;
}

template <class E, std::size_t N>
std::vector<std::string> names_of(const E (&all)[N], std::string_view (*name)(E)) {
  std::vector<std::string> out;
  for (E e : all) out.emplace_back(name(e));
  return out;
}

}  // namespace

std::string_view model_arch_name(ModelArch a) {
  switch (a) {
    case ModelArch::gpt2:
      return "gpt2";
    case ModelArch::llama:
      return "llama";
  }
  return "?";
}

std::optional<ModelArch> parse_model_arch(std::string_view name) {
  return parse_among(kArchs, model_arch_name, name);
}

const std::vector<std::string>& known_model_arch_names() {
  static const std::vector<std::string> names = names_of(kArchs, model_arch_name);
  return names;
}

std::string_view rope_scaling_name(RopeScaling r) {
  switch (r) {
    case RopeScaling::none:
      return "none";
    case RopeScaling::llama3:
      return "llama3";
  }
  return "?";
}

std::optional<RopeScaling> parse_rope_scaling(std::string_view name) {
  return parse_among(kScalings, rope_scaling_name, name);
}

const std::vector<std::string>& known_rope_scaling_names() {
  static const std::vector<std::string> names = names_of(kScalings, rope_scaling_name);
  return names;
}

}  // namespace conveyor
