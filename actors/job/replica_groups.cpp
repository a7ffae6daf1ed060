#include "actors/job/replica_groups.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>

#include "transport/collective/gloo/gloo_gradient_all_reduce.hpp"
#if CONVEYOR_WITH_CUDA
#include "transport/collective/nccl/nccl_gradient_all_reduce.hpp"
#endif

namespace conveyor {

ReplicaGroups::ReplicaGroups(int replicas, std::chrono::milliseconds timeout)
    : replicas_(replicas), timeout_(timeout) {
  if (replicas < 1)
    throw std::invalid_argument("ReplicaGroups: " + std::to_string(replicas) + " replicas");
  std::random_device random;
  const std::string token =
      fmt::format("{:08x}{:08x}{:08x}{:08x}", random(), random(), random(), random());
  RendezvousServerOptions s;
  s.host = "127.0.0.1";
  s.port = 0;
  s.token = token;
  s.log = [](std::string_view line) { fmt::print(stderr, "replica groups: {}\n", line); };
  server_ = std::make_unique<RendezvousServer>(s);
  RendezvousClientOptions c;
  c.host = "127.0.0.1";
  c.port = server_->port();
  c.token = token;
  client_ = std::make_unique<RendezvousClient>(c);
}

ReplicaGroups::ReplicaGroups(int replicas, std::chrono::milliseconds timeout,
                             const RendezvousClientOptions& store, std::string listen_address)
    : replicas_(replicas), timeout_(timeout), listen_address_(std::move(listen_address)) {
  if (replicas < 1)
    throw std::invalid_argument("ReplicaGroups: " + std::to_string(replicas) + " replicas");
  client_ = std::make_unique<RendezvousClient>(store);
}

ReplicaGroups::~ReplicaGroups() = default;

std::unique_ptr<GradientAllReduce> ReplicaGroups::join(int stage, int replica,
                                                       const BucketLayout& layout,
                                                       Device device,
                                                       std::uint32_t generation, int size) {
  const int ranks = size > 0 ? size : replicas_;
  if (replica < 0 || replica >= ranks)
    throw std::invalid_argument(fmt::format("stage {}'s group: replica {} of {}", stage, replica, ranks));
  return make_group(StageGroup{.name = fmt::format("stage {}", stage), .rank = replica,
                               .size = ranks, .generation = generation},
                    layout, device, Reduction::average);
}

std::unique_ptr<GradientAllReduce> ReplicaGroups::join_tied(int replica, int rank,
                                                            const BucketLayout& layout,
                                                            Device device, Device peer,
                                                            std::uint32_t generation) {
  const StageGroup group{.name = fmt::format("tied embeddings {}", replica), .rank = rank,
                         .size = 2, .generation = generation};
  if (!device.is_cpu() && device == peer)
    throw std::invalid_argument(group.describe() + ": the embedding's and the head's stages are "
                                "both on " + device.str() +
                                " (NCCL needs two GPUs; give devices.ids a GPU per stage)");
  return make_group(group, layout, device, Reduction::sum);
}

std::unique_ptr<GradientAllReduce> ReplicaGroups::make_group(const StageGroup& group,
                                                             const BucketLayout& layout,
                                                             Device device, Reduction reduction) {
  if (!device.is_cpu()) {
#if CONVEYOR_WITH_CUDA
    NcclGroupOptions o;
    o.group = group;
    o.layout = layout;
    o.reduction = reduction;
    o.device = device.index;
    o.timeout = timeout_;
    o.cancellation = &cancellation_;
    return std::make_unique<NcclGradientAllReduce>(*client_, std::move(o));
#else
    throw std::invalid_argument(group.describe() + ": " + device.str() +
                                " needs a build with CUDA");
#endif
  }
  GlooGroupOptions o;
  o.group = group;
  o.layout = layout;
  o.reduction = reduction;
  o.listen_address = listen_address_;
  o.timeout = timeout_;
  o.cancellation = &cancellation_;
  return std::make_unique<GlooGradientAllReduce>(*client_, std::move(o));
}

}  // namespace conveyor
