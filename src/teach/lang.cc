// The report language: parsing `--lang` and the locale default.
#include <attn/core/error.h>
#include <attn/teach/lang.h>

#include <cctype>
#include <cstdlib>
#include <string>

namespace attn::teach {
namespace {

// The language part of a locale name ("zh_CN.UTF-8" -> "zh"), lower case.
std::string language_part(std::string_view text) {
  std::string out;
  for (const char c : text) {
    if (c == '_' || c == '-' || c == '.' || c == '@') break;
    out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  return out;
}

}  // namespace

Lang parse_lang(std::string_view text) {
  const std::string part = language_part(text);
  if (part == "zh") return Lang::zh;
  if (part == "en") return Lang::en;
  throw Error("--lang: expected zh or en (or a locale such as zh_CN.UTF-8), got '" + std::string(text) + "'");
}

Lang lang_from_locale(std::string_view lc_all, std::string_view lc_messages, std::string_view lang) {
  for (const std::string_view v : {lc_all, lc_messages, lang}) {
    if (v.empty()) continue;
    return language_part(v) == "zh" ? Lang::zh : Lang::en;
  }
  return Lang::en;
}

Lang default_lang() {
  auto value = [](const char* v) { return v ? std::string_view(v) : std::string_view(); };
  return lang_from_locale(value(std::getenv("LC_ALL")), value(std::getenv("LC_MESSAGES")),
                          value(std::getenv("LANG")));
}

const char* lang_name(Lang lang) { return lang == Lang::zh ? "zh" : "en"; }

}  // namespace attn::teach
