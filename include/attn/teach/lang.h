// The language a teaching report is written in (`--lang zh|en` on explain,
// quiz, view and their help). Every sentence of a report exists in both
// languages; the numbers are the same in both (tested).
//
//   out += tr(lang, "The weights sum to 1.", "权重之和为 1。");
//
// The default follows the locale as POSIX orders it: LC_ALL, then
// LC_MESSAGES, then LANG; a value starting with "zh" means Chinese, anything
// else (or nothing set) English.
#pragma once

#include <string>
#include <string_view>

namespace attn::teach {

enum class Lang { en, zh };

// "en" | "zh" (also "zh_CN", "zh-CN", "zh_TW.UTF-8", "en_US.UTF-8", ...).
// Throws attn::Error naming the value and what is accepted.
Lang parse_lang(std::string_view text);
// From LC_ALL / LC_MESSAGES / LANG (the first that is set and non-empty);
// English when none is set or the value is neither Chinese nor English ("C", "POSIX", "de_DE").
Lang default_lang();
// The same rule on given values (for tests): empty strings count as unset.
Lang lang_from_locale(std::string_view lc_all, std::string_view lc_messages, std::string_view lang);
const char* lang_name(Lang lang);  // "en" | "zh"

// The text for `lang`.
inline const char* tr(Lang lang, const char* en, const char* zh) { return lang == Lang::zh ? zh : en; }
inline std::string tr(Lang lang, const std::string& en, const std::string& zh) {
  return lang == Lang::zh ? zh : en;
}

}  // namespace attn::teach
