// The byte-level BPE pre-tokenizers, hand-written over Unicode categories (private to src/text):
// each scanner cuts cps[begin, end) into words as its family's regex would, appending half-open code
// point ranges. \s is the White_Space property, \p{L} / \p{N} the general categories L* / N*, and a
// lookahead sees only [begin, end) (its end counts as "not \S"), as the regex sees one piece.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace attn::text::pretok {

using Ranges = std::vector<std::pair<std::size_t, std::size_t>>;

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
void split_gpt2(const std::u32string& cps, std::size_t begin, std::size_t end, Ranges& out);

// Llama 3 (max_digits 3) and Qwen2 (max_digits 1):
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
void split_llama3(const std::u32string& cps, std::size_t begin, std::size_t end, int max_digits, Ranges& out);

}  // namespace attn::text::pretok
