// `attn classify --explain`: the attribution report of each classified text
// (the library's attn/teach/attribution.h) printed as text or JSON, and a
// viewer export (attn view) that carries the attribution.
#pragma once

#include <attn/teach/attribution.h>

#include <string>
#include <vector>

#include "args.h"

namespace attn::models {
class EncoderClassifier;
class TextClassifier;
struct Classification;
}  // namespace attn::models

namespace attn::cli::attrib {

// The options `attn classify --explain` adds to `attn classify`, and the run
// (after the classification itself) for the texts and their results.
const std::vector<OptionSpec>& explain_options();
int run_classify_explain(models::TextClassifier& model, const std::string& model_path,
                         const std::vector<std::string>& texts,
                         const std::vector<models::Classification>& results, const Args& opts);

}  // namespace attn::cli::attrib
