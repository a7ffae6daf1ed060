#pragma once
#include <cstdint>
#include <string>

namespace conveyor {

enum class DeviceKind : std::uint8_t { cpu, cuda };

/// Where a tensor's bytes live. CPU tensors have index 0.
struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int i) { return {DeviceKind::cuda, i}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  friend bool operator==(const Device&, const Device&) = default;
  std::string str() const {
    return kind == DeviceKind::cpu ? "cpu" : "cuda:" + std::to_string(index);
  }
};

}  // namespace conveyor
