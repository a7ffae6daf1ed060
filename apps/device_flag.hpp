#pragma once
// --device as `hf logits` and `sample` take it: cpu, cuda (GPU 0) or cuda:N.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "kernels/tensor/device.hpp"

namespace conveyor {

inline std::optional<Device> parse_device_flag(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0 && s.size() > 5 && s.size() < 9 &&
      s.find_first_not_of("0123456789", 5) == std::string::npos)
    return Device::cuda(std::stoi(s.substr(5)));
  return std::nullopt;
}

/// The option's check: its error names the value and what is allowed.
inline CLI::Validator device_flag_validator() {
  return CLI::Validator(
      [](std::string& v) {
        return parse_device_flag(v) ? std::string() : "must be cpu, cuda or cuda:N, got '" + v + "'";
      },
      "cpu|cuda[:N]");
}

}  // namespace conveyor
