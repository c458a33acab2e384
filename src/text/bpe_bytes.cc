#include <attn/core/error.h>
#include <attn/text/bpe_bytes.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <queue>

#include "text/bpe_pretok.h"
#include "text/special_split.h"
#include "text/unicode_ucd.h"

namespace attn::text {

// ---- GPT-2's byte ↔ unicode table ---------------------------------------------------

namespace {

// Bytes that are printable Latin-1 characters map to themselves: '!'..'~',
// '¡'..'¬', '®'..'ÿ'. The remaining 68 get U+0100 + n in increasing byte order.
struct ByteTable {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 512> to_byte{};  // all mapped code points are below U+0200
  ByteTable() {
    to_byte.fill(-1);
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? static_cast<char32_t>(b) : next++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};

const ByteTable& byte_table() {
  static const ByteTable t;
  return t;
}

}  // namespace

char32_t byte_to_unicode(uint8_t b) { return byte_table().to_cp[b]; }

int unicode_to_byte(char32_t c) { return c < 512 ? byte_table().to_byte[c] : -1; }

// ---- pre-tokenization ----------------------------------------------------------------

PreTokenizer pre_tokenizer_from_gguf_name(const std::string& name) {
  if (name == "gpt2") return PreTokenizer::gpt2;
  if (name == "smollm") return PreTokenizer::smollm;
  if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") return PreTokenizer::llama3;
  if (name == "qwen2" || name == "deepseek-r1-qwen") return PreTokenizer::qwen2;
  throw Error(detail::concat("unsupported tokenizer.ggml.pre \"", name,
                             "\"; supported: \"gpt2\", \"smollm\", \"llama-bpe\" (also \"llama3\", "
                             "\"llama-v3\"), \"qwen2\" (also \"deepseek-r1-qwen\")"));
}

const char* pre_tokenizer_name(PreTokenizer p) {
  switch (p) {
    case PreTokenizer::gpt2:
      return "gpt2";
    case PreTokenizer::smollm:
      return "smollm";
    case PreTokenizer::llama3:
      return "llama-bpe";
    case PreTokenizer::qwen2:
      return "qwen2";
  }
  return "?";
}

// ---- construction -----------------------------------------------------------------------

ByteBpeTokenizer ByteBpeTokenizer::from_vocab(ByteBpeVocab vocab) {
  const std::size_t n = vocab.tokens.size();
  ATTN_CHECK(n > 0, "bpe: the vocabulary is empty");
  ATTN_CHECK(n <= static_cast<std::size_t>(INT32_MAX), "bpe: vocabulary of ", n,
             " tokens does not fit int32 ids");
  ATTN_CHECK(vocab.types.empty() || vocab.types.size() == n, "bpe: ", vocab.types.size(), " token types for ",
             n, " tokens; expected one per token");
  if (vocab.types.empty()) vocab.types.assign(n, BpeTokenType::normal);
  for (auto [id, name] : {std::pair{vocab.bos_id, "bos"}, std::pair{vocab.eos_id, "eos"},
                          std::pair{vocab.pad_id, "padding"}, std::pair{vocab.unk_id, "unknown"}})
    ATTN_CHECK(id >= -1 && id < static_cast<int64_t>(n), "bpe: ", name, " token id ", id,
               " is outside the vocabulary [0, ", n, ")");
  ByteBpeTokenizer t;
  t.vocab_ = std::move(vocab);
  for (std::size_t i = 0; i < n; ++i) {
    ATTN_CHECK(!t.vocab_.tokens[i].empty(), "bpe: token ", i, " is empty");
    t.ids_.emplace(t.vocab_.tokens[i], static_cast<int32_t>(i));  // first wins on duplicates
  }
  for (std::size_t r = 0; r < t.vocab_.merges.size(); ++r) {
    const std::string& m = t.vocab_.merges[r];
    const std::size_t sp = m.find(' ', 1);
    ATTN_CHECK(sp != std::string::npos && sp + 1 < m.size() && m.find(' ', sp + 1) == std::string::npos,
               "bpe: merge ", r, " \"", m, "\" must be two symbols separated by one space");
    t.ranks_.emplace(m, static_cast<int32_t>(r));  // the first (lowest) rank wins
  }
  ATTN_CHECK(t.vocab_.added_flags.empty() || t.vocab_.added_flags.size() == n,
             "bpe: ", t.vocab_.added_flags.size(), " added-token flags for ", n,
             " tokens; expected one per token");
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    const auto it = t.ids_.find(buf);
    t.byte_ids_[b] = it == t.ids_.end() ? -1 : it->second;
  }
  for (std::size_t i = 0; i < n; ++i) {
    const BpeTokenType ty = t.vocab_.types[i];
    if (ty == BpeTokenType::control || ty == BpeTokenType::user_defined || ty == BpeTokenType::unknown)
      t.specials_.push_back(static_cast<int32_t>(i));
  }
  std::stable_sort(t.specials_.begin(), t.specials_.end(), [&](int32_t a, int32_t b) {
    return t.vocab_.tokens[a].size() > t.vocab_.tokens[b].size();
  });
  return t;
}

ByteBpeTokenizer ByteBpeTokenizer::from_gguf(const io::GgufFile& f) {
  const std::string model = f.get_string("tokenizer.ggml.model");
  ATTN_CHECK(model == "gpt2", "bpe: ", f.path(), ": tokenizer.ggml.model is \"", model,
             "\"; expected \"gpt2\" (byte-level BPE)");
  ByteBpeVocab v;
  const std::string pre = f.has("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : "gpt2";
  try {
    v.pre = pre_tokenizer_from_gguf_name(pre);
  } catch (const Error& e) {
    throw Error(detail::concat("bpe: ", f.path(), ": ", e.what()));
  }
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.token_type")) {
    const std::vector<int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
    ATTN_CHECK(types.size() == v.tokens.size(), "bpe: ", f.path(), ": tokenizer.ggml.token_type has ",
               types.size(), " entries for ", v.tokens.size(), " tokens");
    for (std::size_t i = 0; i < types.size(); ++i) {
      ATTN_CHECK(types[i] >= 1 && types[i] <= 6, "bpe: ", f.path(), ": token ", i, " has type ", types[i],
                 "; expected 1..6");
      v.types.push_back(static_cast<BpeTokenType>(types[i]));
    }
  }
  v.merges = f.get_string_array("tokenizer.ggml.merges");
  // Ids are checked against the vocabulary in from_vocab; first they must fit
  // int32 (a u64 id of 2^32 + 1 would otherwise wrap around to 1).
  auto special_id = [&](const char* key) {
    const int64_t id = f.get_int(key, -1);
    ATTN_CHECK(id >= INT32_MIN && id <= INT32_MAX, "bpe: ", f.path(), ": ", key, " is ", id,
               "; expected a token id in [0, ", v.tokens.size(), ")");
    return static_cast<int32_t>(id);
  };
  v.bos_id = special_id("tokenizer.ggml.bos_token_id");
  v.eos_id = special_id("tokenizer.ggml.eos_token_id");
  v.pad_id = special_id("tokenizer.ggml.padding_token_id");
  v.unk_id = special_id("tokenizer.ggml.unknown_token_id");
  v.add_bos = f.has("tokenizer.ggml.add_bos_token") && f.get_bool("tokenizer.ggml.add_bos_token");
  try {
    return from_vocab(std::move(v));
  } catch (const Error& e) {
    throw Error(detail::concat(e.what(), " (file '", f.path(), "')"));
  }
}

int32_t ByteBpeTokenizer::token_to_id(std::string_view token) const {
  const auto it = ids_.find(std::string(token));
  return it == ids_.end() ? -1 : it->second;
}

const std::string& ByteBpeTokenizer::id_to_token(int32_t id) const {
  ATTN_CHECK(id >= 0 && id < vocab_size(), "bpe: token id ", id, " is outside the vocabulary [0, ",
             vocab_size(), ")");
  return vocab_.tokens[static_cast<std::size_t>(id)];
}

// ---- encoding ---------------------------------------------------------------------------

namespace {

std::size_t utf8_len(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }

// The code point starting at byte i of valid UTF-8 `s`.
char32_t cp_at(std::string_view s, std::size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  const std::size_t n = utf8_len(c);
  char32_t v = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
  for (std::size_t k = 1; k < n && i + k < s.size(); ++k)
    v = (v << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return v;
}

// The start of the code point that ends at byte i (i > 0) of valid UTF-8 `s`.
std::size_t cp_before(std::string_view s, std::size_t i) {
  std::size_t b = i - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xC0) == 0x80) --b;
  return b;
}

constexpr std::string_view kMeta = "\xE2\x96\x81";  // ▁

}  // namespace

std::vector<std::string> ByteBpeTokenizer::pre_tokenize(std::string_view text) const {
  std::vector<std::size_t> offsets;
  const std::u32string cps = ucd::decode_utf8(text, "bpe: input text", &offsets);
  offsets.push_back(text.size());
  pretok::Ranges words;
  switch (vocab_.pre) {
    case PreTokenizer::smollm: {
      std::size_t start = 0;
      for (std::size_t i = 0; i < cps.size(); ++i) {
        if (!ucd::is_number(cps[i])) continue;
        pretok::split_gpt2(cps, start, i, words);
        words.emplace_back(i, i + 1);
        start = i + 1;
      }
      pretok::split_gpt2(cps, start, cps.size(), words);
      break;
    }
    case PreTokenizer::gpt2:
      pretok::split_gpt2(cps, 0, cps.size(), words);
      break;
    case PreTokenizer::llama3:
      pretok::split_llama3(cps, 0, cps.size(), 3, words);
      break;
    case PreTokenizer::qwen2:
      pretok::split_llama3(cps, 0, cps.size(), 1, words);
      break;
  }
  std::vector<std::string> out;
  out.reserve(words.size());
  for (const auto& [b, e] : words) out.emplace_back(text.substr(offsets[b], offsets[e] - offsets[b]));
  return out;
}

// Merges the symbols of `s` (cut at `cuts`: the symbol starts, then s.size()) pairwise: repeatedly
// the adjacent pair with the lowest merge rank, leftmost first; `cuts` ends as the merged symbols'.
void ByteBpeTokenizer::merge_symbols(std::string& s, std::vector<std::size_t>& cuts) const {
  struct Sym {
    std::size_t begin, len;
    int prev, next;
  };
  std::vector<Sym> sym;
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i)
    sym.push_back({cuts[i], cuts[i + 1] - cuts[i], static_cast<int>(i) - 1, static_cast<int>(i) + 1});
  if (sym.empty()) return;
  sym.back().next = -1;
  struct Bigram {
    int32_t rank;
    int left, right;
    std::size_t size;  // combined length when queued: stale if it changed
  };
  auto worse = [](const Bigram& a, const Bigram& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;  // min rank, then leftmost
  };
  std::priority_queue<Bigram, std::vector<Bigram>, decltype(worse)> queue(worse);
  std::string key;
  auto push = [&](int l, int r) {
    if (l < 0 || r < 0) return;
    key.assign(s, sym[l].begin, sym[l].len);
    key.push_back(' ');
    key.append(s, sym[r].begin, sym[r].len);
    const auto it = ranks_.find(key);
    if (it != ranks_.end()) queue.push({it->second, l, r, sym[l].len + sym[r].len});
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) push(i, i + 1);
  while (!queue.empty()) {
    const Bigram b = queue.top();
    queue.pop();
    Sym& l = sym[b.left];
    if (l.len == 0 || l.next != b.right || sym[b.right].len == 0 || l.len + sym[b.right].len != b.size)
      continue;
    Sym& r = sym[b.right];
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = b.left;
    push(l.prev, b.left);
    push(b.left, l.next);
  }
  cuts.clear();
  for (int i = 0; i >= 0; i = sym[i].next) cuts.push_back(sym[i].begin);
  cuts.push_back(s.size());
}

void ByteBpeTokenizer::bpe_word(std::string_view word, std::vector<int32_t>& out) const {
  // Symbols: the byte-mapped code points of the word.
  std::string s;
  std::vector<std::size_t> cuts;
  for (unsigned char b : word) {
    cuts.push_back(s.size());
    ucd::append_utf8(byte_to_unicode(b), s);
  }
  cuts.push_back(s.size());
  if (vocab_.ignore_merges) {
    if (const auto it = ids_.find(s); it != ids_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  merge_symbols(s, cuts);
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const std::string piece = s.substr(cuts[i], cuts[i + 1] - cuts[i]);
    const auto it = ids_.find(piece);
    if (it != ids_.end()) {
      out.push_back(it->second);
      continue;
    }
    // No token for the merged symbol: fall back to its single code points (bytes).
    for (std::size_t k = 0; k < piece.size();) {
      const std::size_t len = utf8_len(static_cast<unsigned char>(piece[k]));
      const auto one = ids_.find(piece.substr(k, len));
      ATTN_CHECK(one != ids_.end() || vocab_.unk_id >= 0, "bpe: no token for the byte symbol \"",
                 piece.substr(k, len), "\" and no unknown token");
      out.push_back(one != ids_.end() ? one->second : vocab_.unk_id);
      k += len;
    }
  }
}

// One SentencePiece-style word (spaces already ▁): characters as symbols; a character that is no
// token becomes its <0xXX> byte tokens (byte_fallback, when all exist), else an unknown symbol
// (fused with the unknown symbol before it with fuse_unk); then the merges.
void ByteBpeTokenizer::spm_word(std::string_view word, std::vector<int32_t>& out) const {
  std::string s;
  std::vector<std::size_t> cuts;
  bool last_unknown = false;
  for (std::size_t i = 0; i < word.size();) {
    const std::size_t n = std::min(utf8_len(static_cast<unsigned char>(word[i])), word.size() - i);
    const std::string_view ch = word.substr(i, n);
    i += n;
    if (ids_.count(std::string(ch)) != 0) {
      cuts.push_back(s.size());
      s.append(ch);
      last_unknown = false;
      continue;
    }
    bool bytes = vocab_.byte_fallback;
    for (std::size_t k = 0; bytes && k < ch.size(); ++k)
      bytes = byte_ids_[static_cast<unsigned char>(ch[k])] >= 0;
    if (bytes) {
      for (const char c : ch) {
        cuts.push_back(s.size());
        s += vocab_.tokens[static_cast<std::size_t>(byte_ids_[static_cast<unsigned char>(c)])];
      }
      last_unknown = false;
      continue;
    }
    if (!(vocab_.fuse_unk && last_unknown)) cuts.push_back(s.size());
    s.append(ch);
    last_unknown = true;
  }
  cuts.push_back(s.size());
  merge_symbols(s, cuts);
  for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
    const auto it = ids_.find(s.substr(cuts[i], cuts[i + 1] - cuts[i]));
    if (it != ids_.end())
      out.push_back(it->second);
    else if (vocab_.unk_id >= 0)  // without an unknown token the character is dropped, as tokenizers does
      out.push_back(vocab_.unk_id);
  }
}

// One piece of text between added tokens (at_start: it begins the text).
void ByteBpeTokenizer::encode_piece(std::string_view piece, bool at_start, std::vector<int32_t>& out) const {
  std::string normalized;
  if (vocab_.nfc) {
    normalized = ucd::encode_utf8(ucd::nfc(ucd::decode_utf8(piece, "bpe: input text")));
    piece = normalized;
  }
  if (vocab_.byte_level) {
    for (const std::string& w : pre_tokenize(piece)) bpe_word(w, out);
    return;
  }
  std::string t;
  for (const char c : piece) {
    if (c == ' ')
      t += kMeta;
    else
      t += c;
  }
  const bool marked = t.compare(0, kMeta.size(), kMeta) == 0;
  if (vocab_.space_prefix == SpacePrefix::every_piece ||
      (vocab_.space_prefix == SpacePrefix::metaspace_always && !marked) ||
      (vocab_.space_prefix == SpacePrefix::metaspace_first && !marked && at_start))
    t.insert(0, kMeta);
  if (!vocab_.metaspace_split) {
    spm_word(t, out);
    return;
  }
  std::size_t start = 0;
  for (std::size_t i = kMeta.size(); i <= t.size(); ++i) {
    if (i == t.size() || t.compare(i, kMeta.size(), kMeta) == 0) {
      if (i > start) spm_word(std::string_view(t).substr(start, i - start), out);
      start = i;
    }
  }
}

std::vector<int32_t> ByteBpeTokenizer::encode(std::string_view text, bool add_bos, bool parse_special) const {
  std::vector<specials::ByteRange> allowed;
  if (parse_special) allowed.push_back({0, text.size()});
  return encode_split(text, allowed, add_bos);
}

std::vector<int32_t> ByteBpeTokenizer::encode(const TextPieces& pieces, bool add_bos) const {
  std::vector<specials::ByteRange> allowed;
  const std::string text = specials::join_pieces(pieces, allowed);
  return encode_split(text, allowed, add_bos);
}

std::vector<int32_t> ByteBpeTokenizer::encode_split(std::string_view text,
                                                    const std::vector<specials::ByteRange>& allowed,
                                                    bool add_bos) const {
  ucd::decode_utf8(text, "bpe: input text");  // validate: the error names the byte offset in `text`
  const auto text_of = [&](int32_t id) -> const std::string& { return vocab_.tokens[id]; };
  const auto everywhere = [&](int32_t id) { return vocab_.types[id] == BpeTokenType::user_defined; };
  std::vector<specials::SpecialFrag> frags;
  if (vocab_.hf_added_tokens) {
    const auto flags = [&](int32_t id) {
      return vocab_.added_flags.empty() ? 0 : int{vocab_.added_flags[id]};
    };
    const auto space_before = [](std::string_view t, std::size_t i) -> std::size_t {
      const std::size_t b = cp_before(t, i);
      return ucd::is_white_space(cp_at(t, b)) ? i - b : 0;
    };
    const auto space_after = [](std::string_view t, std::size_t i) -> std::size_t {
      return ucd::is_white_space(cp_at(t, i)) ? utf8_len(static_cast<unsigned char>(t[i])) : 0;
    };
    const auto word = [](char32_t c) { return c == '_' || ucd::is_letter(c) || ucd::is_number(c); };
    frags = specials::split_added(
        text, specials_, allowed, text_of, everywhere, flags, space_before, space_after,
        [&](std::string_view t, std::size_t i) { return word(cp_at(t, cp_before(t, i))); },
        [&](std::string_view t, std::size_t i) { return word(cp_at(t, i)); });
  } else {
    // Fragments: raw text ranges or special token ids, split one special at a time, longest first.
    frags = specials::split_specials(text, specials_, allowed, text_of, everywhere);
  }
  std::vector<int32_t> ids;
  if (add_bos) {
    ATTN_CHECK(vocab_.bos_id >= 0, "bpe: add_bos requested but the vocabulary has no bos token");
    ids.push_back(vocab_.bos_id);
  }
  for (const specials::SpecialFrag& f : frags) {
    if (f.id >= 0)
      ids.push_back(f.id);
    else
      encode_piece(text.substr(f.off, f.len), f.off == 0, ids);
  }
  return ids;
}

std::string ByteBpeTokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (int32_t id : ids) {
    const std::string& t = id_to_token(id);
    const BpeTokenType ty = vocab_.types[static_cast<std::size_t>(id)];
    if (ty == BpeTokenType::control || ty == BpeTokenType::unknown) {
      if (render_special) out += t;
      continue;
    }
    if (ty == BpeTokenType::user_defined) {
      out += t;
      continue;
    }
    if (!vocab_.byte_level) {
      if (ty == BpeTokenType::byte && vocab_.decode_bytes) {
        out.push_back(static_cast<char>(std::stoi(t.substr(3, 2), nullptr, 16)));
        continue;
      }
      for (std::size_t i = 0; i < t.size();) {
        if (t.compare(i, kMeta.size(), kMeta) == 0) {
          out += ' ';
          i += kMeta.size();
        } else {
          out += t[i++];
        }
      }
      continue;
    }
    for (char32_t c : ucd::decode_utf8(t, "bpe: token text")) {
      const int b = unicode_to_byte(c);
      if (b >= 0) {
        out.push_back(static_cast<char>(b));
      } else {
        ucd::append_utf8(c, out);
      }
    }
  }
  // The Strip / Metaspace decoder: the space the prefix added goes (the first character of the
  // whole text, so a longer id list never changes what a shorter one decoded to).
  if (!vocab_.byte_level && vocab_.strip_decoded_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
  return out;
}

}  // namespace attn::text
