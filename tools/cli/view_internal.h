// Transitional names for the attention-export format, which moved to the library
// (include/attn/viz/export.h, namespace attn::viz). The files that still say
// view::Export (translate.cc, attribution_report.*, classify_explain.cc: other
// areas of the restructuring) compile through these until they name attn::viz.
#pragma once

#include <attn/viz/export.h>

namespace attn::cli::view {

using viz::AttentionSet;
using viz::Attribution;
using viz::export_json;
using viz::Export;
using viz::Layer;
using viz::parse_export;

}  // namespace attn::cli::view
