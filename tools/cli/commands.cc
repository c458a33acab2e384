#include "commands.h"

namespace attn::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"explain", "walk through attention step by step", run_explain},
      {"quiz", "test your understanding of attention", run_quiz},
      {"view", "see attention weights: an HTML page or a terminal heatmap", run_view},
      {"train", "train a model for a task and save it as one file", run_train},
      {"generate", "continue a prompt with SmolLM2 (GGUF), streaming tokens", run_generate_gguf},
      {"chat", "talk to SmolLM2-135M-Instruct (interactive or from stdin)", run_chat},
  };
  return list;
}

}  // namespace attn::cli
