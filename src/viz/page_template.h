// The page template of `attn view` with its data placeholder. The build
// generates its definition from src/viz/page.html (src/viz/embed.cmake), so the
// library needs no files at run time.
#pragma once

#include <string_view>

namespace attn::viz {

extern const char* const kPageTemplate;
// The explainer page (src/viz/explain.html, issue 41) and its placeholders.
extern const char* const kExplainTemplate;
inline constexpr std::string_view kStagesPlaceholder = "/*ATTN_STAGES*/null";
inline constexpr std::string_view kModelsPlaceholder = "/*ATTN_MODELS*/[]";
inline constexpr std::string_view kExplainLangPlaceholder = "/*ATTN_LANG*/zh";
inline constexpr std::string_view kDataPlaceholder = "/*ATTN_DATA*/null";
// Inside a JSON string: the interface's first language ("en" as written).
inline constexpr std::string_view kLangPlaceholder = "/*ATTN_LANG*/en";

}  // namespace attn::viz
