#include "apps/config/known_names.hpp"

namespace conveyor {

const std::vector<std::string>& known_schedule_names() {
  static const std::vector<std::string> names = {"gpipe", "1f1b"};
  return names;
}

const std::vector<std::string>& known_device_kinds() {
  static const std::vector<std::string> kinds = {"cpu", "cuda"};
  return kinds;
}

}  // namespace conveyor
