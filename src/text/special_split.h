// Splitting text at special-token strings, the first step of the byte-level BPE and SentencePiece
// encoders (private to src/text). Which specials may match where: a special that `everywhere(id)`
// allows (user-defined tokens, which are text-like) matches anywhere; the others (control, unknown)
// only inside one of the `allowed` byte ranges: the whole text with parse_special, or the pieces of a
// text::TextPieces that allow them (a chat template's own markers, never a message's content).
#pragma once

#include <attn/text/text_piece.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace attn::text::specials {

struct SpecialFrag {
  int32_t id;  // -1: raw text [off, off + len)
  std::size_t off, len;
};

struct ByteRange {
  std::size_t begin, end;  // [begin, end)
};

// The pieces' text joined, and the byte ranges of the runs of pieces that allow special tokens.
inline std::string join_pieces(const TextPieces& pieces, std::vector<ByteRange>& allowed) {
  std::string text;
  allowed.clear();
  for (const TextPiece& p : pieces) {
    if (p.allow_special && !p.text.empty()) {
      if (!allowed.empty() && allowed.back().end == text.size())
        allowed.back().end += p.text.size();
      else
        allowed.push_back({text.size(), text.size() + p.text.size()});
    }
    text += p.text;
  }
  return text;
}

// `text` split at the specials (ids, longest text first; text_of(id) is the token's text), one
// special at a time, leftmost match first.
template <class TextOf, class Everywhere>
std::vector<SpecialFrag> split_specials(std::string_view text, const std::vector<int32_t>& specials,
                                        const std::vector<ByteRange>& allowed, TextOf text_of,
                                        Everywhere everywhere) {
  // `allowed` is sorted and disjoint: the one range that may hold [b, e) is the last starting at or
  // before b (a chat of a thousand messages has thousands of ranges).
  const auto inside = [&](std::size_t b, std::size_t e) {
    const auto after = std::upper_bound(allowed.begin(), allowed.end(), b,
                                        [](std::size_t x, const ByteRange& r) { return x < r.begin; });
    return after != allowed.begin() && e <= std::prev(after)->end;
  };
  std::vector<SpecialFrag> frags = {{-1, 0, text.size()}};
  for (const int32_t sid : specials) {
    const bool anywhere = everywhere(sid);
    if (!anywhere && allowed.empty()) continue;
    const std::string& st = text_of(sid);
    if (text.find(st) == std::string_view::npos) continue;
    std::vector<SpecialFrag> next;
    for (const SpecialFrag& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      std::size_t pos = f.off, from = f.off;
      const std::size_t end = f.off + f.len;
      while (from < end) {
        const std::size_t hit = text.substr(0, end).find(st, from);
        if (hit == std::string_view::npos) break;
        if (!anywhere && !inside(hit, hit + st.size())) {
          from = hit + 1;  // typed by a user: text
          continue;
        }
        if (hit > pos) next.push_back({-1, pos, hit - pos});
        next.push_back({sid, hit, st.size()});
        pos = from = hit + st.size();
      }
      if (pos < end) next.push_back({-1, pos, end - pos});
    }
    frags = std::move(next);
  }
  return frags;
}

}  // namespace attn::text::specials
