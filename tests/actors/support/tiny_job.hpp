#pragma once
// A small training job on a synthetic corpus, for actor and runtime tests.
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "actors/plan/pipeline_layout.hpp"
#include "actors/job/job_services.hpp"

namespace conveyor::testing {

/// A corpus of `n` tokens with some structure (a noisy repeating phrase), so losses move.
inline std::shared_ptr<const TokenCorpus> synthetic_corpus(std::size_t n, int vocab) {
  std::vector<TokenId> tokens(n);
  std::uint64_t x = 0x9E3779B97F4A7C15ull;
  for (std::size_t i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    const bool noise = (x % 8) == 0;
    tokens[i] = static_cast<TokenId>(noise ? (x >> 8) % vocab : (i * 7 + i / 13) % vocab);
  }
  return std::make_shared<const TokenCorpus>(TokenCorpus::from_tokens(std::move(tokens)));
}

struct TinyJobOptions {
  int stages = 2;
  std::string schedule = "1f1b";
  int micro_batches = 4;
  int layers = 4;
  std::int64_t steps = 3;
  int virtual_stages = 1;
};

inline Job tiny_job(const TinyJobOptions& o) {
  Job job;
  job.plan.model = GptConfig{o.layers, 32, 4, 16, 64};
  auto corpus = synthetic_corpus(4096, static_cast<int>(job.plan.model.vocab));
  job.plan.data.splits = split_corpus(*corpus, 0.1, job.plan.model.seq_len);
  job.plan.data.corpus = corpus;
  job.plan.data.seed = 7;
  job.plan.data.micro_batch_size = 2;
  job.plan.data.micro_batches = o.micro_batches;
  auto layout = make_pipeline_layout(
      sched::ScheduleSpec{o.schedule, o.stages, o.micro_batches, o.virtual_stages}, o.layers);
  job.plan.schedule = std::move(layout.schedule);
  job.plan.placement = std::move(layout.placement);
  job.plan.lr = LrSchedule{1e-2, 1e-3, 1, o.steps};
  job.plan.grad_clip = 1.0;
  job.plan.steps = o.steps;
  job.plan.eval_every = 0;
  job.plan.eval_batches = 2;
  return job;
}

/// Same names in the same order with the same bytes.
inline bool same_bits(const std::vector<NamedTensor>& a, const std::vector<NamedTensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].name != b[i].name || a[i].tensor.bytes() != b[i].tensor.bytes() ||
        std::memcmp(a[i].tensor.raw(), b[i].tensor.raw(), a[i].tensor.bytes()) != 0)
      return false;
  return true;
}

/// Collects what the coordinator reports.
struct RecordingObserver final : TrainingObserver {
  std::vector<StepMetrics> steps;
  std::vector<EvalMetrics> evals;
  void on_step(const StepMetrics& m, const std::vector<StageReport>&) override {
    steps.push_back(m);
  }
  void on_eval(const EvalMetrics& m) override { evals.push_back(m); }
  std::vector<RecoveryEvent> recoveries;
  void on_recovery(const RecoveryEvent& e) override { recoveries.push_back(e); }
};

}  // namespace conveyor::testing
