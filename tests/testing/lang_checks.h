// Checks for texts written in two languages (the explain, quiz and view reports of
// issue 17): the numbers of a text, in order, and runs of untranslated English words.
#pragma once

#include <string>
#include <vector>

namespace attn::testing {

// Every number of a text, in order, as written but normalised: a sign when a minus (-, − U+2212,
// － U+FF0D) stands right before the digits and not after a letter or digit ("N-1" and "i-2" give
// 1 and 2), thousands separators dropped ("1,234,567" -> "1234567"), a decimal part, an exponent
// ("1e-5", "2.3e+04") and a percent sign ("12.5%", "５０％"). Full-width digits and the full-width
// point count as ASCII. "3×4" and "3 x 4" are two numbers, and so is the list "0.2,2.5".
std::vector<std::string> numbers_in(const std::string& text);
// The same, sorted: for texts whose word order differs between the languages (the numbers are the
// same multiset, not the same sequence).
std::vector<std::string> sorted_numbers_in(const std::string& text);

// The runs of three or more English words in a row (tokens split at ASCII whitespace, not across
// lines) outside `code spans`: an untranslated phrase or sentence. An English word is ASCII letters
// only (an inner ' or - allowed), at least two, once surrounding brackets, quotes and punctuation
// are taken off; single letters (the formulas' Q, K, V, N, h) and identifiers or commands
// ("attn::attention", "options.capture.enabled", "--multi-head", "fp32", "W_Q") are not words.
std::vector<std::string> english_runs(const std::string& text);

}  // namespace attn::testing
