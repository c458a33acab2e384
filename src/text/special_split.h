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

// Hugging Face's added-token matching (tokenizers' AddedVocabulary): the leftmost match first, the
// longest at that position, then on from its end; `flags(id)` gives lstrip (1: the whitespace before
// joins the token), rstrip (2: the whitespace after joins it) and single_word (4: no match with a
// letter, digit or '_' next to it). `specials` as for split_specials (any order).
// space_before(text, i) / space_after(text, i): the byte length of the whitespace character ending /
// starting at i, 0 when there is none; word_before / word_after likewise whether it is a word character.
template <class TextOf, class Everywhere, class Flags, class SpaceBefore, class SpaceAfter, class WordBefore,
          class WordAfter>
std::vector<SpecialFrag> split_added(std::string_view text, const std::vector<int32_t>& specials,
                                     const std::vector<ByteRange>& allowed, TextOf text_of,
                                     Everywhere everywhere, Flags flags, SpaceBefore space_before,
                                     SpaceAfter space_after, WordBefore word_before, WordAfter word_after) {
  const auto inside = [&](std::size_t b, std::size_t e) {
    const auto after = std::upper_bound(allowed.begin(), allowed.end(), b,
                                        [](std::size_t x, const ByteRange& r) { return x < r.begin; });
    return after != allowed.begin() && e <= std::prev(after)->end;
  };
  std::vector<std::vector<int32_t>> by_first(256);
  for (const int32_t sid : specials)
    if (everywhere(sid) || !allowed.empty())
      by_first[static_cast<unsigned char>(text_of(sid)[0])].push_back(sid);
  std::vector<SpecialFrag> frags;
  std::size_t done = 0;  // text before this is in frags
  for (std::size_t i = 0; i < text.size();) {
    int32_t best = -1;
    std::size_t best_len = 0;
    for (const int32_t sid : by_first[static_cast<unsigned char>(text[i])]) {
      const std::string& st = text_of(sid);
      if (st.size() <= best_len || text.compare(i, st.size(), st) != 0) continue;
      if (!everywhere(sid) && !inside(i, i + st.size())) continue;
      const int f = flags(sid);
      if ((f & 4) && ((i > 0 && word_before(text, i)) ||
                      (i + st.size() < text.size() && word_after(text, i + st.size()))))
        continue;
      best = sid;
      best_len = st.size();
    }
    if (best < 0) {
      ++i;
      continue;
    }
    std::size_t b = i, e = i + best_len;
    const int f = flags(best);
    if (f & 1)
      while (b > done && space_before(text, b) > 0) b -= space_before(text, b);
    if (f & 2)
      while (e < text.size() && space_after(text, e) > 0) e += space_after(text, e);
    if (b > done) frags.push_back({-1, done, b - done});
    frags.push_back({best, b, e - b});
    done = i = e;
  }
  if (done < text.size()) frags.push_back({-1, done, text.size() - done});
  return frags;
}

}  // namespace attn::text::specials
