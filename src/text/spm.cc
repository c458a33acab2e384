// The SentencePiece-style tokenizer of GGUF `llama` vocabularies (include/attn/text/spm.h).
#include <attn/core/error.h>
#include <attn/text/spm.h>

#include <algorithm>
#include <cstdio>
#include <queue>

#include "text/special_split.h"
#include "text/unicode_ucd.h"

namespace attn::text {

SpmTokenizer SpmTokenizer::from_vocab(SpmVocab v) {
  const std::size_t n = v.tokens.size();
  ATTN_CHECK(n > 0, "spm: empty vocabulary");
  ATTN_CHECK(v.scores.size() == n, "spm: ", n, " tokens but ", v.scores.size(), " scores");
  ATTN_CHECK(v.types.size() == n, "spm: ", n, " tokens but ", v.types.size(), " token types");
  for (int32_t* id : {&v.bos_id, &v.eos_id, &v.pad_id, &v.unk_id})
    ATTN_CHECK(*id >= -1 && *id < static_cast<int64_t>(n), "spm: special token id ", *id,
               " is outside the vocabulary of ", n);
  SpmTokenizer t;
  t.ids_.reserve(n * 2);
  for (std::size_t i = 0; i < n; ++i) {
    ATTN_CHECK(!v.tokens[i].empty(), "spm: token ", i, " is empty");
    const int32_t ty = static_cast<int32_t>(v.types[i]);
    ATTN_CHECK(ty >= 1 && ty <= 6, "spm: token ", i, " has type ", ty, "; expected 1..6");
    t.ids_[v.tokens[i]] = static_cast<int32_t>(i);  // a repeated piece: the last id, as llama.cpp
  }
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    auto it = t.ids_.find(buf);
    if (it == t.ids_.end()) it = t.ids_.find(std::string(1, static_cast<char>(b)));
    t.byte_ids_[b] = it == t.ids_.end() ? -1 : it->second;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const SpmTokenType ty = v.types[i];
    if (ty == SpmTokenType::control || ty == SpmTokenType::user_defined || ty == SpmTokenType::unknown)
      t.specials_.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(t.specials_.begin(), t.specials_.end(),
                   [&](int32_t a, int32_t b) { return v.tokens[a].size() > v.tokens[b].size(); });
  t.vocab_ = std::move(v);
  return t;
}

SpmTokenizer SpmTokenizer::from_gguf(const io::GgufFile& f) {
  ATTN_CHECK(f.has("tokenizer.ggml.model"), "spm: ", f.path(), ": missing 'tokenizer.ggml.model'");
  const std::string model = f.get_string("tokenizer.ggml.model");
  ATTN_CHECK(model == "llama", "spm: ", f.path(), ": tokenizer.ggml.model is '", model,
             "'; expected 'llama' (SentencePiece)");
  SpmVocab v;
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  ATTN_CHECK(f.has("tokenizer.ggml.scores"), "spm: ", f.path(), ": missing 'tokenizer.ggml.scores'");
  for (double s : f.get_float_array("tokenizer.ggml.scores")) v.scores.push_back(static_cast<float>(s));
  if (f.has("tokenizer.ggml.token_type")) {
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) {
      ATTN_CHECK(t >= 1 && t <= 6, "spm: ", f.path(), ": tokenizer.ggml.token_type holds ", t,
                 "; expected 1..6");
      v.types.push_back(static_cast<SpmTokenType>(t));
    }
  } else {
    v.types.assign(v.tokens.size(), SpmTokenType::normal);
  }
  auto id = [&](const char* key) { return f.has(key) ? static_cast<int32_t>(f.get_int(key)) : -1; };
  v.bos_id = id("tokenizer.ggml.bos_token_id");
  v.eos_id = id("tokenizer.ggml.eos_token_id");
  v.pad_id = id("tokenizer.ggml.padding_token_id");
  v.unk_id = id("tokenizer.ggml.unknown_token_id");
  if (f.has("tokenizer.ggml.add_bos_token")) v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
  if (f.has("tokenizer.ggml.add_space_prefix"))
    v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix");
  try {
    return from_vocab(std::move(v));
  } catch (const Error& e) {
    throw Error(detail::concat(f.path(), ": ", e.what()));
  }
}

int32_t SpmTokenizer::token_to_id(std::string_view piece) const {
  auto it = ids_.find(std::string(piece));
  return it == ids_.end() ? -1 : it->second;
}

const std::string& SpmTokenizer::id_to_token(int32_t id) const {
  ATTN_CHECK(id >= 0 && id < vocab_size(), "spm: token id ", id, " is outside [0, ", vocab_size(), ")");
  return vocab_.tokens[id];
}

SpmTokenType SpmTokenizer::type(int32_t id) const {
  ATTN_CHECK(id >= 0 && id < vocab_size(), "spm: token id ", id, " is outside [0, ", vocab_size(), ")");
  return vocab_.types[id];
}

namespace {
struct Symbol {
  int prev, next;
  std::size_t off, n;
};
struct Bigram {
  int left, right;
  float score;
  std::size_t size;
};
struct BigramLess {
  bool operator()(const Bigram& l, const Bigram& r) const {
    return l.score < r.score || (l.score == r.score && l.left > r.left);
  }
};
std::size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xe0) == 0xc0) return 2;
  if ((c & 0xf0) == 0xe0) return 3;
  if ((c & 0xf8) == 0xf0) return 4;
  return 1;
}
}  // namespace

void SpmTokenizer::encode_raw(std::string_view raw, std::vector<int32_t>& out) const {
  std::string text;
  text.reserve(raw.size() * 2);
  for (char c : raw) {
    if (c == ' ')
      text += "\xe2\x96\x81";
    else
      text += c;
  }
  std::vector<Symbol> sym;
  for (std::size_t off = 0; off < text.size();) {
    const std::size_t n = std::min(utf8_len(static_cast<unsigned char>(text[off])), text.size() - off);
    const int idx = static_cast<int>(sym.size());
    off += n;
    sym.push_back({idx - 1, off == text.size() ? -1 : idx + 1, off - n, n});
  }
  std::priority_queue<Bigram, std::vector<Bigram>, BigramLess> queue;
  std::unordered_map<std::string, std::pair<int, int>> rev_merge;
  auto try_add = [&](int left, int right) {
    if (left == -1 || right == -1) return;
    const std::string piece = text.substr(sym[left].off, sym[left].n + sym[right].n);
    const auto it = ids_.find(piece);
    if (it == ids_.end()) return;
    queue.push({left, right, vocab_.scores[it->second], piece.size()});
    rev_merge[piece] = {left, right};
  };
  for (int i = 1; i < static_cast<int>(sym.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Symbol& l = sym[b.left];
    Symbol& r = sym[b.right];
    if (l.n == 0 || r.n == 0 || l.n + r.n != b.size) continue;
    l.n += r.n;
    r.n = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  const auto resegment = [&](auto&& self, const Symbol& s) -> void {
    const std::string piece = text.substr(s.off, s.n);
    const auto it = ids_.find(piece);
    if (it != ids_.end()) {
      out.push_back(it->second);
      return;
    }
    const auto m = rev_merge.find(piece);
    if (m == rev_merge.end()) {
      for (std::size_t j = 0; j < s.n; ++j) {
        const int32_t id = byte_ids_[static_cast<unsigned char>(text[s.off + j])];
        ATTN_CHECK(id >= 0, "spm: byte 0x", static_cast<int>(static_cast<unsigned char>(text[s.off + j])),
                   " has no byte token (<0xXX>) in the vocabulary");
        out.push_back(id);
      }
      return;
    }
    self(self, sym[m->second.first]);
    self(self, sym[m->second.second]);
  };
  if (sym.empty()) return;
  for (int i = 0; i != -1; i = sym[i].next) resegment(resegment, sym[i]);
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<specials::ByteRange> allowed;
  if (parse_special) allowed.push_back({0, text.size()});
  return encode_split(text, allowed, add_bos);
}

std::vector<int32_t> SpmTokenizer::encode(const TextPieces& pieces, bool add_bos) const {
  std::vector<specials::ByteRange> allowed;
  const std::string text = specials::join_pieces(pieces, allowed);
  return encode_split(text, allowed, add_bos);
}

std::vector<int32_t> SpmTokenizer::encode_split(std::string_view text,
                                                const std::vector<specials::ByteRange>& allowed,
                                                bool add_bos) const {
  ucd::decode_utf8(text, "spm: input text");  // validate: the error names the byte offset
  const std::vector<specials::SpecialFrag> frags = specials::split_specials(
      text, specials_, allowed, [&](int32_t id) -> const std::string& { return vocab_.tokens[id]; },
      [&](int32_t id) { return vocab_.types[id] == SpmTokenType::user_defined; });
  std::vector<int32_t> ids;
  if (add_bos) {
    ATTN_CHECK(vocab_.bos_id >= 0, "spm: add_bos requested but the vocabulary has no bos token");
    ids.push_back(vocab_.bos_id);
  }
  bool prev_special = true;
  for (const specials::SpecialFrag& f : frags) {
    if (f.id >= 0) {
      ids.push_back(f.id);
      prev_special = true;
      continue;
    }
    if (f.len == 0) continue;  // empty text: no fragment at all, as llama.cpp
    std::string raw;
    if (vocab_.add_space_prefix && prev_special) raw = " ";
    raw += text.substr(f.off, f.len);
    encode_raw(raw, ids);
    prev_special = false;
  }
  return ids;
}

std::string SpmTokenizer::piece_text(int32_t id, bool render_special) const {
  const std::string& t = id_to_token(id);
  switch (vocab_.types[id]) {
    case SpmTokenType::byte: {
      unsigned v = 0;
      if (t.size() == 6 && std::sscanf(t.c_str(), "<0x%02X>", &v) == 1)
        return std::string(1, static_cast<char>(v));
      return t;
    }
    case SpmTokenType::control:
    case SpmTokenType::unknown:
    case SpmTokenType::unused:
      return render_special ? t : std::string();
    default:
      break;
  }
  std::string out;
  for (std::size_t i = 0; i < t.size();) {
    if (t.compare(i, 3, "\xe2\x96\x81") == 0) {
      out += ' ';
      i += 3;
    } else {
      out += t[i++];
    }
  }
  return out;
}

std::string SpmTokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) out += piece_text(id, render_special);
  return out;
}

}  // namespace attn::text
