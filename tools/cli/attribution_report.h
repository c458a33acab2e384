// `attn classify --explain`: the attribution report of each classified text
// (the library's attn/teach/attribution.h) printed as text or JSON, and a
// viewer export (attn view) that carries the attribution.
#pragma once

#include <attn/teach/attribution.h>

#include <string>
#include <vector>

#include "args.h"
#include "view_internal.h"

namespace attn::models {
class EncoderClassifier;
class TextClassifier;
struct Classification;
}  // namespace attn::models

namespace attn::cli::attrib {

// A viewer export: every layer's full self-attention [1, H, L, L] (exact captured
// weights) and the attribution (methods "ig", "input_x_grad", "input_x_grad_norm").
// The one place that builds the attention-export format for classify --explain.
view::Export make_export(models::EncoderClassifier& model, const teach::AttributionInput& input,
                         const teach::AttributionResult& r, const std::string& model_name);

// The options `attn classify --explain` adds to `attn classify`, and the run
// (after the classification itself) for the texts and their results.
const std::vector<OptionSpec>& explain_options();
int run_classify_explain(models::TextClassifier& model, const std::string& model_path,
                         const std::vector<std::string>& texts,
                         const std::vector<models::Classification>& results, const Args& opts);

}  // namespace attn::cli::attrib
