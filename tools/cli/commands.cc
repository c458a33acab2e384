#include "commands.h"

namespace attn::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"explain", "walk through attention step by step", run_explain},
      {"quiz", "test your understanding of attention", run_quiz},
      {"view", "see attention weights: an HTML page or a terminal heatmap", run_view},
      {"train", "train a model for a task and save it as one file", run_train},
      {"classify", "classify texts with a trained model; show what [CLS] attended to", run_classify},
  };
  return list;
}

}  // namespace attn::cli
