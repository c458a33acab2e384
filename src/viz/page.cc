// The self-contained page of `attn view`: the template (page.html, embedded at
// build time) with the export's JSON in place of its data placeholder.
#include <attn/core/error.h>
#include <attn/viz/view.h>

#include "viz/page_template.h"

namespace attn::viz {

std::string page_html(const Export& e, const PageOptions& options) {
  ATTN_CHECK(options.lang == "en" || options.lang == "zh", "view: expected the page language en or zh; got '",
             options.lang, "'");
  const std::string json = export_json(e);
  // '<' only occurs inside JSON strings; \u003c keeps "</script>" in a token
  // from ending the script element.
  std::string data;
  data.reserve(json.size());
  for (const char c : json) {
    if (c == '<')
      data += "\\u003c";
    else
      data += c;
  }
  std::string page = kPageTemplate;
  const auto at = page.find(kDataPlaceholder);
  ATTN_CHECK(at != std::string::npos, "view: the page template lacks its data placeholder");
  page.replace(at, kDataPlaceholder.size(), data);
  const auto lang_at = page.find(kLangPlaceholder);
  ATTN_CHECK(lang_at != std::string::npos, "view: the page template lacks its language placeholder");
  page.replace(lang_at, kLangPlaceholder.size(), options.lang);
  return page;
}

}  // namespace attn::viz
