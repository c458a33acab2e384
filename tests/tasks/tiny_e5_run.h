// The tiny fine-tune the task tests share: two separable classes of the tiny e5 container's pieces
// (▁a / ▁ab against ▁b / ▁bb, 30 distinct lines each) written to dir/pos.txt and dir/neg.txt, and the
// options of a short fine-tune on them (the caller sets out, freeze_layers, eval, cache and epochs as
// its test needs).
#pragma once

#include <attn/tasks/classify.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "testing/testing.h"

namespace attn::testing {

inline tasks::ClassifyTrainOptions tiny_e5_run(const std::filesystem::path& dir) {
  std::ofstream pos(dir / "pos.txt"), neg(dir / "neg.txt");
  for (int i = 0; i < 30; ++i) {
    std::string p = "a", n = "b";
    for (int k = 0; k < i % 5; ++k) p += " a", n += " b";
    for (int k = 0; k < i / 5; ++k) p += " ab", n += " bb";
    pos << p << "\n";
    neg << n << "\n";
  }
  tasks::ClassifyTrainOptions o;
  o.pos = (dir / "pos.txt").string();
  o.neg = (dir / "neg.txt").string();
  o.out = (dir / "run").string();
  o.encoder = "e5";
  o.encoder_file = source_path("tests/io/data/e5_tiny.bin");
  o.encoder_lr = 3e-2;
  o.encoder_epochs = 3;
  o.batch_size = 8;
  o.seed = 5;
  return o;
}

}  // namespace attn::testing
