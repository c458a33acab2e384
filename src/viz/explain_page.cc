// The explainer page (attn/viz/explain_page.h): the template (explain.html, embedded at build time)
// with the stages, the model list and the first language in its placeholders.
#include <attn/core/error.h>
#include <attn/viz/explain_page.h>

#include "viz/page_template.h"

namespace attn::viz {
namespace {

// JSON for a <script> element: '<' only occurs inside JSON strings; \u003c keeps "</script>" in a
// string from ending the element.
std::string script_json(const json::Value& v) {
  const std::string j = json::dump(v);
  std::string out;
  out.reserve(j.size());
  for (const char c : j) out += c == '<' ? std::string("\\u003c") : std::string(1, c);
  return out;
}

void put(std::string& page, std::string_view placeholder, const std::string& value) {
  const auto at = page.find(placeholder);
  ATTN_CHECK(at != std::string::npos, "explain page: the template lacks the placeholder ", placeholder);
  page.replace(at, placeholder.size(), value);
}

}  // namespace

std::string explain_page_html(const json::Value& stages, const ExplainPageOptions& o) {
  ATTN_CHECK(o.lang == "en" || o.lang == "zh", "explain page: expected the language zh or en; got '", o.lang, "'");
  json::Value models = json::Value::array();
  for (const auto& [key, name] : o.models) {
    json::Value m = json::Value::array();
    m.push_back(json::Value::string(key));
    m.push_back(json::Value::string(name));
    models.push_back(std::move(m));
  }
  std::string page = kExplainTemplate;
  // The stages last: a learner's text may hold a placeholder's characters.
  put(page, kModelsPlaceholder, script_json(models));
  put(page, kExplainLangPlaceholder, o.lang);
  put(page, kStagesPlaceholder, stages.is_null() ? "null" : script_json(stages));
  return page;
}

}  // namespace attn::viz
