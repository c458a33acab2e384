// Shared by tasks::train_translator (translate_train.cc) and tasks::translate_sentences
// (translate.cc); helpers in translate_common.cc. Private to src/tasks.
#pragma once

#include <attn/core/tensor.h>
#include <attn/data/batch.h>
#include <attn/io/json.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::tasks::detail {

// A pair batch split for teacher forcing: the decoder reads tgt[:, :-1] and
// predicts tgt[:, 1:] ([PAD] targets are ignored by the loss).
struct TeacherForcing {
  std::vector<int64_t> src_lengths;  // [B]
  Tensor tgt_in;                     // [B, Lt - 1] i64
  Tensor targets;                    // [B, Lt - 1] i64
  int64_t source_tokens = 0;         // real (non-pad) source tokens
  int64_t target_tokens = 0;         // real target tokens predicted (</s> included)
};
TeacherForcing teacher_forcing(const data::PairBatch& b);

// report.md from the report.json object that train_translate builds.
std::string translate_report_markdown(const json::Value& report);

}  // namespace attn::tasks::detail
