#include "apps/sample/generate.hpp"

#include <chrono>
#include <stdexcept>

namespace conveyor {

Generated generate(TokenDecoder& decoder, const std::vector<std::int32_t>& prompt, std::int64_t tokens,
                   const SamplingSettings& sampling, const std::function<void(std::int32_t)>& on_token) {
  if (prompt.empty() || static_cast<std::int64_t>(prompt.size()) >= decoder.capacity() || tokens < 1)
    throw std::logic_error("generate: a prompt of 1 to seq_len - 1 tokens and at least one new token");
  const auto start = std::chrono::steady_clock::now();
  Generated g;
  TokenSampler sampler(sampling);
  decoder.reset();
  Tensor logits = decoder.append(prompt, /*last_only=*/true);
  const std::int64_t V = logits.dim(1);
  for (std::int64_t i = 0; i < tokens; ++i) {
    const std::int32_t id = sampler.next(logits.f32(), V);
    g.ids.push_back(id);
    if (on_token) on_token(id);
    if (i + 1 == tokens) break;
    if (decoder.length() == decoder.capacity()) {
      g.hit_seq_len = true;
      break;
    }
    const std::int32_t next[] = {id};
    logits = decoder.append(next, /*last_only=*/true);
  }
  g.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return g;
}

}  // namespace conveyor
