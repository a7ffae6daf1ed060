#pragma once
// The names a config may choose from, each list in one place. Validation, error messages
// and the key reference all read these, so a new schedule or device kind is one line here
// (or, later, one redirect to the library that implements it).
#include <string>
#include <vector>

namespace conveyor {

/// `pipeline.schedule` values. TODO(lead): return the schedule library's registry once
/// actors/plan/schedule has one (interleaved-1f1b, zb-h1, zbv, ...).
const std::vector<std::string>& known_schedule_names();

/// `devices.kind` values.
const std::vector<std::string>& known_device_kinds();

const std::vector<std::string>& known_model_dtypes();
const std::vector<std::string>& known_master_dtypes();
/// `optim.grad_dtype` values.
const std::vector<std::string>& known_grad_dtypes();
const std::vector<std::string>& known_stage_threads();
/// `runtime.attention` values (kernels/cuda/attention.hpp's AttentionBackend).
const std::vector<std::string>& known_attention_backends();
/// `transport.kind` values (nccl joins when conveyor train wires transport/nccl).
const std::vector<std::string>& known_transport_kinds();
/// fault.policy values.
const std::vector<std::string>& known_fault_policies();
const std::vector<std::string>& known_buddy_copies();
const std::vector<std::string>& known_checkpoint_writers();
/// fault.on_nan values.
const std::vector<std::string>& known_nan_policies();

}  // namespace conveyor
