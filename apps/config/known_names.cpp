#include "apps/config/known_names.hpp"

#include "actors/plan/schedule/schedule.hpp"

namespace conveyor {

const std::vector<std::string>& known_schedule_names() {
  return sched::schedule_names();  // the schedule library is the one list
}

const std::vector<std::string>& known_device_kinds() {
  static const std::vector<std::string> kinds = {"cpu", "cuda"};
  return kinds;
}

const std::vector<std::string>& known_model_dtypes() {
  static const std::vector<std::string> names = {"auto", "fp32", "bf16"};
  return names;
}

const std::vector<std::string>& known_master_dtypes() {
  static const std::vector<std::string> names = {"fp32", "bf16"};
  return names;
}

const std::vector<std::string>& known_grad_dtypes() {
  static const std::vector<std::string> names = {"f32", "bf16"};
  return names;
}

const std::vector<std::string>& known_stage_threads() {
  static const std::vector<std::string> names = {"detached", "scheduled"};
  return names;
}

const std::vector<std::string>& known_attention_backends() {
  static const std::vector<std::string> names = {"cudnn", "kernels"};
  return names;
}

const std::vector<std::string>& known_transport_kinds() {
  static const std::vector<std::string> names = {"auto", "ucx"};
  return names;
}

const std::vector<std::string>& known_nan_policies() {
  static const std::vector<std::string> names = {"abort", "skip", "rollback"};
  return names;
}

const std::vector<std::string>& known_buddy_copies() {
  static const std::vector<std::string> names = {"auto", "on", "off"};
  return names;
}

const std::vector<std::string>& known_checkpoint_writers() {
  static const std::vector<std::string> names = {"node0", "every_node"};
  return names;
}

const std::vector<std::string>& known_fault_policies() {
  static const std::vector<std::string> names = {"restart", "abort"};
  return names;
}

}  // namespace conveyor
