#include "apps/train/train_samples.hpp"

#include <fmt/format.h>

#include <exception>

#include "apps/sample/generate.hpp"
#include "apps/sample/sample_model.hpp"
#include "kernels/model/kv_decoder.hpp"
#include "apps/text/message_text.hpp"
#include "apps/train/metrics_log.hpp"
#include "apps/train/progress.hpp"

namespace conveyor {

void TrainSamples::on_checkpoint(const checkpoint::WriteResult& written) {
  if (s_.every <= 0 || written.step <= 0 || written.step % s_.every != 0) return;
  try {
    SampleModel m = load_sample_model(written.path, "");
    const std::vector<std::int32_t> prompt = *m.codec.encode(s_.prompt);  // bytes: always encodes
    KvDecoder decoder(m.model.model, m.model.stage.params(), static_cast<std::int64_t>(prompt.size()) + s_.tokens);
    const Generated g = generate(decoder, prompt, s_.tokens, SamplingSettings{0.0, 0, 0});
    const std::string text = m.codec.decode(g.ids);
    log_.event({{"event", "sample"},
                {"step", written.step},
                {"prompt", s_.prompt},
                {"text", text},
                {"tokens", g.ids.size()},
                {"seconds", g.seconds}});
    progress_.note(fmt::format("sample after step {}: {}", written.step, printable_excerpt(s_.prompt + text, 200)));
  } catch (const std::exception& e) {
    progress_.note(fmt::format("sample after step {} skipped: {}", written.step, one_line_message(e.what())));
  }
}

}  // namespace conveyor
