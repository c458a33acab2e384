// The page template of `attn view` with its data placeholder. The build
// generates its definition from src/viz/page.html (src/viz/embed.cmake), so the
// library needs no files at run time.
#pragma once

#include <string_view>

namespace attn::viz {

extern const char* const kPageTemplate;
inline constexpr std::string_view kDataPlaceholder = "/*ATTN_DATA*/null";
// Inside a JSON string: the interface's first language ("en" as written).
inline constexpr std::string_view kLangPlaceholder = "/*ATTN_LANG*/en";

}  // namespace attn::viz
