// The printing of one classified text now lives in the library
// (include/attn/tasks/classify.h, namespace attn::tasks); these names remain
// for classify_explain.cc until it moves to src/teach.
#pragma once

#include <attn/tasks/classify.h>

namespace attn::cli::classify {

using PrintOptions = tasks::ClassifyFormat;
using tasks::classification_json;
using tasks::format_classification;
using tasks::mean_over_heads;
using tasks::top_attended;

}  // namespace attn::cli::classify
