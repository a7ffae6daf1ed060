#pragma once
// Upper bounds shared by the config keys and the command-line flags that mean the same.
#include <cstdint>

namespace conveyor {

/// Micro-batches of a step or an evaluation: a plan holds actions for every one of them.
inline constexpr std::int64_t kMaxMicroBatches = 65536;

/// Transformer blocks of a model (model.layers): `sched` and the partitioner search cuts
/// in time that grows with their square (5000 blocks take a second).
inline constexpr std::int64_t kMaxLayers = 8192;

/// CPU kernel threads of one stage (runtime.threads_per_stage).
inline constexpr std::int64_t kMaxThreadsPerStage = 1024;

/// Seconds of any deadline (a week): longer ones overflow the steady clock's arithmetic.
inline constexpr double kMaxDeadlineS = 604800.0;

/// The shortest rendezvous.peer_silence_s: every node heartbeats every 250 ms
/// (NodeSetup::heartbeat_interval), and a silence of fewer than 4 of them would declare a
/// healthy node lost over one late heartbeat (a busy host, a slow store round trip).
inline constexpr double kMinPeerSilenceS = 1.0;

}  // namespace conveyor
