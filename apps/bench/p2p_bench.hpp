#pragma once
// `conveyor bench p2p`: latency and bandwidth of each tensor channel, with the raw
// library measured in the same run as the reference, reported as a ratio:
//
//   transport   channel                               raw reference
//   nccl        NcclSendChannel → NcclRecvChannel     ncclSend / ncclRecv on plain buffers
//               (GPU 0 → GPU 1, a thread per rank)    (own communicator, same threads)
//   cuda-peer   make_cuda_peer_channel(1).receive     cudaMemcpyPeerAsync on plain buffers
//   ucx         UcxEndpoint ping-pong (host tensors)  ucp_tag_send/recv_nbx ping-pong on
//               (two workers on loopback)             preallocated buffers, same tags
#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace conveyor {

/// Bounds of --iterations and --repeats: 100000 messages of 1 GiB take over an hour.
inline constexpr int kMaxP2pIterations = 100000;
inline constexpr int kMaxP2pRepeats = 100;

struct P2pOptions {
  std::string transport = "all";  // all, nccl, cuda-peer, ucx
  std::vector<std::string> sizes = {"8KiB", "1MiB", "16MiB", "64MiB"};
  int iterations = 0;  // messages per measurement; 0: by size (see p2p_bench.cpp)
  int repeats = 3;     // rounds alternating raw and channel; the best round of each counts
};

/// The transports `--transport` accepts.
const std::vector<std::string>& p2p_transports();

/// "8KiB" → 8192; "1MiB", "16MiB", "4096", "4096B", "1GiB". Throws InputError naming
/// --sizes unless the result is a positive multiple of 4 of at most 1 GiB.
std::size_t parse_p2p_size(const std::string& text);

/// Runs the benchmark; throws InputError for bad options and for a GPU transport asked
/// for on a machine (or build) without two GPUs. With transport "all", transports that
/// cannot run here are listed under "skipped" with the reason.
/// {"bench":"p2p","results":[{"transport","bytes","iterations","channel_us","channel_gbs",
///   "raw_us","raw_gbs","ratio", GPU only: "channel_sync_us","raw_sync_us","sync_ratio"}],
///  "skipped":[{"transport","reason"}], "ucx_transports": "..."}
nlohmann::json run_p2p_bench(const P2pOptions& options);

/// The text form: one line per transport and size.
std::string format_p2p_table(const nlohmann::json& result);

}  // namespace conveyor
