// ByteBpeTokenizer::from_tokenizer_json: a Hugging Face tokenizer.json whose model is BPE
// (include/attn/text/bpe_bytes.h, docs/tokenizers.md). Every component is checked against the forms
// attn implements; anything else is an attn::Error naming the field and what is supported.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/text/bpe_bytes.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <vector>

namespace attn::text {
namespace {

constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
constexpr const char* kLlama3Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr const char* kMeta = "\xE2\x96\x81";

const char* kSupportedPre =
    "supported: ByteLevel (use_regex true); Sequence [Digits (individual_digits true), ByteLevel]; "
    "Sequence [Split (the GPT-2, Llama 3 or Qwen2 pattern, Isolated), ByteLevel (use_regex false)]; "
    "Metaspace; null with the Prepend + Replace normalizers";

struct Ctx {
  std::string path;
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(detail::concat("tokenizer.json: ", path, ": ", what));
  }
};

std::string type_of(const json::Value* v) {
  if (v == nullptr || v->is_null()) return "null";
  if (v->is_object()) {
    const json::Value* t = v->find("type");
    return t != nullptr && t->is_string() ? "\"" + t->as_string() + "\"" : std::string("without a type");
  }
  return json::type_name(v->type());
}

bool is_type(const json::Value& v, const char* t) {
  const json::Value* x = v.is_object() ? v.find("type") : nullptr;
  return x != nullptr && x->is_string() && x->as_string() == t;
}

// An optional boolean member (absent or null: `def`).
bool flag(const Ctx& c, const json::Value& obj, const char* key, bool def, const std::string& where) {
  const json::Value* v = obj.find(key);
  if (v == nullptr || v->is_null()) return def;
  if (!v->is_bool())
    c.fail(detail::concat(where, " ", key, ": expected true or false; got ", json::dump(*v)));
  return v->as_bool();
}

// An optional string member (absent or null: "").
std::string text_of(const Ctx& c, const json::Value& obj, const char* key, const std::string& where) {
  const json::Value* v = obj.find(key);
  if (v == nullptr || v->is_null()) return "";
  if (!v->is_string()) c.fail(detail::concat(where, " ", key, ": expected a string; got ", json::dump(*v)));
  return v->as_string();
}

// The components of a Sequence (its `key` array), or the component itself.
std::vector<const json::Value*> flatten(const Ctx& c, const json::Value* v, const char* key,
                                        const char* field) {
  std::vector<const json::Value*> out;
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_object()) c.fail(detail::concat(field, ": expected an object or null; got ", type_of(v)));
  if (!is_type(*v, "Sequence")) return {v};
  const json::Value* items = v->find(key);
  if (items == nullptr || !items->is_array())
    c.fail(detail::concat(field, " Sequence: missing the \"", key, "\" array"));
  for (const json::Value& item : items->items()) {
    if (is_type(item, "Sequence"))
      c.fail(detail::concat(field, ": a Sequence inside a Sequence is not supported"));
    out.push_back(&item);
  }
  return out;
}

// ---- the model: vocab, merges, options ----
void read_model(const Ctx& c, const json::Value& j, ByteBpeVocab& v, std::string& unk_token) {
  const json::Value* model = j.find("model");
  if (model == nullptr || !is_type(*model, "BPE"))
    c.fail("model type " + type_of(model) +
           " is not supported by the BPE tokenizer; supported: \"BPE\" (WordPiece, Unigram: the encoders' "
           "tokenizers; WordLevel: not supported)");
  if (const json::Value* d = model->find("dropout");
      d && !d->is_null() && !(d->is_number() && d->as_double() == 0))
    c.fail("model dropout " + json::dump(*d) + " is not supported; expected null (no BPE dropout)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (!text_of(c, *model, key, "model").empty())
      c.fail(detail::concat("model ", key, " \"", text_of(c, *model, key, "model"),
                            "\" is not supported; expected null or \"\""));
  v.byte_fallback = flag(c, *model, "byte_fallback", false, "model");
  v.fuse_unk = flag(c, *model, "fuse_unk", false, "model");
  v.ignore_merges = flag(c, *model, "ignore_merges", false, "model");
  unk_token = text_of(c, *model, "unk_token", "model");

  const json::Value* vocab = model->find("vocab");
  if (vocab == nullptr || !vocab->is_object() || vocab->size() == 0)
    c.fail("model vocab: expected a non-empty object of token → id");
  std::vector<std::string>& tokens = v.tokens;
  std::vector<bool> seen;
  for (const auto& [tok, id] : vocab->members()) {
    // Ids run 0..n-1 without gaps, so each is below the count (a hostile id cannot size the table).
    if (!id.is_integer() || id.as_int64() < 0 || id.as_int64() >= static_cast<int64_t>(vocab->size()))
      c.fail(detail::concat("model vocab \"", tok, "\": expected an id in [0, ", vocab->size(),
                            ") (ids 0..n-1); got ", json::dump(id)));
    const auto i = static_cast<std::size_t>(id.as_int64());
    if (i >= tokens.size()) {
      tokens.resize(i + 1);
      seen.resize(i + 1, false);
    }
    if (seen[i])
      c.fail(
          detail::concat("model vocab: id ", i, " is given to both \"", tokens[i], "\" and \"", tok, "\""));
    if (tok.empty()) c.fail(detail::concat("model vocab: id ", i, " is the empty string"));
    seen[i] = true;
    tokens[i] = tok;
  }
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (!seen[i])
      c.fail(detail::concat("model vocab: no token has id ", i, " (ids must be 0..", tokens.size() - 1, ")"));

  const json::Value* merges = model->find("merges");
  if (merges == nullptr || !merges->is_array()) c.fail("model merges: expected an array");
  v.merges.reserve(merges->size());
  for (std::size_t r = 0; r < merges->size(); ++r) {
    const json::Value& m = merges->at(r);
    if (m.is_string()) {
      v.merges.push_back(m.as_string());
    } else if (m.is_array() && m.size() == 2 && m.at(std::size_t{0}).is_string() &&
               m.at(std::size_t{1}).is_string()) {
      const std::string& a = m.at(std::size_t{0}).as_string();
      const std::string& b = m.at(std::size_t{1}).as_string();
      if (a.empty() || b.empty() || a.find(' ') != std::string::npos || b.find(' ') != std::string::npos)
        c.fail(detail::concat("model merges[", r, "]: [\"", a, "\", \"", b,
                              "\"]: tokens that are empty or hold a space are not supported"));
      v.merges.push_back(a + " " + b);
    } else {
      c.fail(
          detail::concat("model merges[", r, "]: expected \"a b\" or [\"a\", \"b\"]; got ", json::dump(m)));
    }
  }
}

// ---- added tokens: ids (inside or after the vocabulary), types and flags ----
void read_added(const Ctx& c, const json::Value& j, ByteBpeVocab& v) {
  const json::Value* added = j.find("added_tokens");
  if (added == nullptr || added->is_null()) return;
  if (!added->is_array()) c.fail("added_tokens: expected an array");
  struct Added {
    std::size_t id;
    std::string content;
    bool special;
    uint8_t flags;
  };
  std::vector<Added> list;
  for (std::size_t k = 0; k < added->size(); ++k) {
    const json::Value& a = added->at(k);
    const std::string where = detail::concat("added_tokens[", k, "]");
    const json::Value* id = a.is_object() ? a.find("id") : nullptr;
    const json::Value* content = a.is_object() ? a.find("content") : nullptr;
    const auto bound = static_cast<int64_t>(v.tokens.size() + added->size());  // no gaps: below this
    if (id == nullptr || !id->is_integer() || id->as_int64() < 0 || id->as_int64() >= bound ||
        content == nullptr || !content->is_string() || content->as_string().empty())
      c.fail(detail::concat(where, ": expected {\"id\": an id in [0, ", bound,
                            "), \"content\": a non-empty string, ...}"));
    uint8_t f = 0;
    if (flag(c, a, "lstrip", false, where)) f |= kAddedLstrip;
    if (flag(c, a, "rstrip", false, where)) f |= kAddedRstrip;
    if (flag(c, a, "single_word", false, where)) f |= kAddedSingleWord;
    list.push_back({static_cast<std::size_t>(id->as_int64()), content->as_string(),
                    flag(c, a, "special", false, where), f});
  }
  std::size_t n = v.tokens.size();
  for (const Added& a : list) n = std::max(n, a.id + 1);
  v.tokens.resize(n);
  v.types.assign(n, BpeTokenType::normal);
  v.added_flags.assign(n, 0);
  std::vector<bool> is_added(n, false);
  for (const Added& a : list) {
    if (!v.tokens[a.id].empty() && v.tokens[a.id] != a.content)
      c.fail(detail::concat("added_tokens: \"", a.content, "\" has id ", a.id,
                            ", which the vocabulary gives to \"", v.tokens[a.id], "\""));
    v.tokens[a.id] = a.content;
    v.types[a.id] = a.special ? BpeTokenType::control : BpeTokenType::user_defined;
    v.added_flags[a.id] = a.flags;
    is_added[a.id] = true;
  }
  for (std::size_t i = 0; i < n; ++i)
    if (v.tokens[i].empty())
      c.fail(detail::concat("added_tokens: no token has id ", i, " (ids must be 0..", n - 1, ")"));
}

// ---- normalizer and pre-tokenizer: byte-level or SentencePiece-style ----
void read_text_pipeline(const Ctx& c, const json::Value& j, ByteBpeVocab& v) {
  bool prepend = false, replace = false;
  for (const json::Value* n : flatten(c, j.find("normalizer"), "normalizers", "normalizer")) {
    if (is_type(*n, "NFC")) {
      v.nfc = true;
    } else if (is_type(*n, "Prepend") && text_of(c, *n, "prepend", "normalizer Prepend") == kMeta) {
      prepend = true;
    } else if (is_type(*n, "Replace")) {
      const json::Value* pat = n->find("pattern");
      const json::Value* str = pat && pat->is_object() ? pat->find("String") : nullptr;
      if (str == nullptr || !str->is_string() || str->as_string() != " " ||
          text_of(c, *n, "content", "normalizer Replace") != kMeta)
        c.fail(
            "normalizer Replace: only the String \" \" → \"\xE2\x96\x81\" is supported (SentencePiece's "
            "spaces)");
      replace = true;
    } else {
      c.fail(
          "normalizer " + type_of(n) +
          " is not supported; supported: NFC, Prepend \"\xE2\x96\x81\", Replace \" \" → \"\xE2\x96\x81\", a "
          "Sequence of these, null");
    }
  }
  std::vector<const json::Value*> pre = flatten(c, j.find("pre_tokenizer"), "pretokenizers", "pre_tokenizer");
  // Gemma: Split on the String " " after the Replace normalizer has turned every space into ▁ finds
  // nothing to split, so it is no step at all.
  if (replace && pre.size() == 1 && is_type(*pre[0], "Split")) {
    const json::Value* pat = pre[0]->find("pattern");
    const json::Value* str = pat && pat->is_object() ? pat->find("String") : nullptr;
    if (str != nullptr && str->is_string() && str->as_string() == " ") pre.clear();
  }
  const auto unsupported = [&](const std::string& what) {
    c.fail("pre_tokenizer " + what + " is not supported; " + kSupportedPre);
  };
  if (pre.empty()) {  // SentencePiece-style through the normalizers (Llama 2's legacy files)
    if (!replace) unsupported("null without the Replace \" \" → \"\xE2\x96\x81\" normalizer");
    v.byte_level = false;
    v.space_prefix = prepend ? SpacePrefix::every_piece : SpacePrefix::none;
    return;
  }
  if (prepend || replace) c.fail("normalizer Prepend / Replace are supported only with pre_tokenizer null");
  const json::Value& last = *pre.back();
  if (is_type(last, "Metaspace")) {
    if (pre.size() != 1) unsupported("Sequence ending in Metaspace");
    if (text_of(c, last, "replacement", "pre_tokenizer Metaspace") != kMeta)
      c.fail("pre_tokenizer Metaspace replacement: only \"\xE2\x96\x81\" (U+2581) is supported");
    std::string scheme = text_of(c, last, "prepend_scheme", "pre_tokenizer Metaspace");
    if (scheme.empty())
      scheme = flag(c, last, "add_prefix_space", true, "pre_tokenizer Metaspace") ? "always" : "never";
    if (scheme == "always")
      v.space_prefix = SpacePrefix::metaspace_always;
    else if (scheme == "first")
      v.space_prefix = SpacePrefix::metaspace_first;
    else if (scheme == "never")
      v.space_prefix = SpacePrefix::none;
    else
      c.fail("pre_tokenizer Metaspace prepend_scheme \"" + scheme +
             "\" is not supported; expected always, first or never");
    v.metaspace_split = flag(c, last, "split", true, "pre_tokenizer Metaspace");
    v.byte_level = false;
    return;
  }
  if (!is_type(last, "ByteLevel"))
    unsupported(type_of(&last) + (pre.size() > 1 ? " (last in a Sequence)" : ""));
  if (flag(c, last, "add_prefix_space", false, "pre_tokenizer ByteLevel"))
    c.fail("pre_tokenizer ByteLevel add_prefix_space true is not supported; expected false");
  const bool use_regex = flag(c, last, "use_regex", true, "pre_tokenizer ByteLevel");
  if (pre.size() == 1) {
    if (!use_regex) unsupported("ByteLevel with use_regex false alone");
    v.pre = PreTokenizer::gpt2;
    return;
  }
  if (pre.size() != 2) unsupported(detail::concat("Sequence of ", pre.size()));
  const json::Value& first = *pre[0];
  if (is_type(first, "Digits")) {
    if (!flag(c, first, "individual_digits", false, "pre_tokenizer Digits") || !use_regex)
      unsupported("Sequence [Digits, ByteLevel] without individual_digits and use_regex both true");
    v.pre = PreTokenizer::smollm;
    return;
  }
  if (!is_type(first, "Split")) unsupported("Sequence [" + type_of(&first) + ", ByteLevel]");
  if (use_regex) unsupported("Sequence [Split, ByteLevel] with ByteLevel use_regex true (two regexes)");
  const json::Value* pat = first.find("pattern");
  const json::Value* re = pat && pat->is_object() ? pat->find("Regex") : nullptr;
  if (re == nullptr || !re->is_string()) c.fail("pre_tokenizer Split: expected a {\"Regex\": ...} pattern");
  if (text_of(c, first, "behavior", "pre_tokenizer Split") != "Isolated" ||
      flag(c, first, "invert", false, "pre_tokenizer Split"))
    c.fail("pre_tokenizer Split: only behavior Isolated with invert false is supported");
  const std::string& p = re->as_string();
  if (p == kGpt2Pattern)
    v.pre = PreTokenizer::gpt2;
  else if (p == kLlama3Pattern)
    v.pre = PreTokenizer::llama3;
  else if (p == kQwen2Pattern)
    v.pre = PreTokenizer::qwen2;
  else
    c.fail("pre_tokenizer Split pattern " + json::dump(*re) +
           " is not supported; supported: the GPT-2, Llama 3 and Qwen2 patterns (docs/tokenizers.md)");
}

// ---- post-processor (BOS) and decoder ----
void read_post_and_decoder(const Ctx& c, const json::Value& j, ByteBpeVocab& v,
                           const std::unordered_map<std::string, int32_t>& ids) {
  for (const json::Value* p : flatten(c, j.find("post_processor"), "processors", "post_processor")) {
    if (is_type(*p, "ByteLevel")) continue;
    if (!is_type(*p, "TemplateProcessing"))
      c.fail("post_processor " + type_of(p) +
             " is not supported; supported: ByteLevel, TemplateProcessing, a Sequence of these, null");
    const json::Value* single = p->find("single");
    const char* want = "post_processor TemplateProcessing single: only \"$A\" and \"<bos> $A\" are supported";
    if (single == nullptr || !single->is_array() || single->size() == 0 || single->size() > 2) c.fail(want);
    const json::Value& tail = single->at(single->size() - 1);
    const json::Value* seq = tail.is_object() ? tail.find("Sequence") : nullptr;
    if (seq == nullptr) c.fail(want);
    if (single->size() == 2) {
      const json::Value& head = single->at(std::size_t{0});
      const json::Value* sp = head.is_object() ? head.find("SpecialToken") : nullptr;
      const json::Value* name = sp && sp->is_object() ? sp->find("id") : nullptr;
      if (name == nullptr || !name->is_string()) c.fail(want);
      int32_t id = -1;
      const json::Value* table = p->find("special_tokens");
      const json::Value* entry = table && table->is_object() ? table->find(name->as_string()) : nullptr;
      const json::Value* list = entry && entry->is_object() ? entry->find("ids") : nullptr;
      if (list != nullptr && list->is_array() && list->size() == 1 && list->at(std::size_t{0}).is_integer())
        id = static_cast<int32_t>(list->at(std::size_t{0}).as_int64());
      else if (const auto it = ids.find(name->as_string()); it != ids.end())
        id = it->second;
      if (id < 0 || id >= static_cast<int64_t>(v.tokens.size()))
        c.fail("post_processor TemplateProcessing: special token \"" + name->as_string() +
               "\" has no id in the vocabulary");
      v.bos_id = id;
      v.add_bos = true;
    }
  }
  v.decode_bytes = false;
  for (const json::Value* d : flatten(c, j.find("decoder"), "decoders", "decoder")) {
    if (is_type(*d, "ByteFallback")) v.decode_bytes = true;
    if (is_type(*d, "ByteLevel") || is_type(*d, "ByteFallback") || is_type(*d, "Fuse")) continue;
    if (is_type(*d, "Replace")) continue;  // ▁ → " " (checked against the pipeline below)
    if (is_type(*d, "Strip")) {
      v.strip_decoded_space = true;
      continue;
    }
    if (is_type(*d, "Metaspace")) {
      v.strip_decoded_space = text_of(c, *d, "prepend_scheme", "decoder Metaspace") != "never";
      continue;
    }
    c.fail("decoder " + type_of(d) +
           " is not supported; supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip");
  }
}

// bos/eos/pad/unk by name from tokenizer_config.json beside the file, when there is one.
void read_config(const Ctx& c, ByteBpeVocab& v, const std::unordered_map<std::string, int32_t>& ids) {
  const std::filesystem::path cfg = std::filesystem::path(c.path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(cfg, ec)) return;
  json::Value j;
  try {
    j = json::parse(io::read_file(cfg.string(), "tokenizer_config.json"));
  } catch (const Error& e) {
    throw Error(detail::concat("tokenizer_config.json: ", cfg.string(), ": ", e.what()));
  }
  if (!j.is_object()) throw Error("tokenizer_config.json: " + cfg.string() + ": expected a JSON object");
  for (auto [key, slot] : {std::pair{"bos_token", &v.bos_id}, std::pair{"eos_token", &v.eos_id},
                           std::pair{"pad_token", &v.pad_id}, std::pair{"unk_token", &v.unk_id}}) {
    const json::Value* t = j.find(key);
    if (t != nullptr && t->is_object()) t = t->find("content");
    if (t == nullptr || !t->is_string()) continue;
    const auto it = ids.find(t->as_string());
    if (it == ids.end())
      throw Error(detail::concat("tokenizer_config.json: ", cfg.string(), ": ", key, " \"", t->as_string(),
                                 "\" is not a token of ", c.path));
    *slot = it->second;
  }
}

}  // namespace

ByteBpeTokenizer ByteBpeTokenizer::from_tokenizer_json(const std::string& path) {
  const Ctx c{path};
  json::Value j;
  try {
    j = json::parse(io::read_file(path, "tokenizer.json"));
  } catch (const Error& e) {
    c.fail(e.what());
  }
  if (!j.is_object()) c.fail("expected a JSON object; got " + std::string(json::type_name(j.type())));
  ByteBpeVocab v;
  v.hf_added_tokens = true;
  std::string unk_token;
  read_model(c, j, v, unk_token);
  read_added(c, j, v);
  if (v.types.empty()) v.types.assign(v.tokens.size(), BpeTokenType::normal);
  read_text_pipeline(c, j, v);
  if (v.byte_level && v.byte_fallback)
    c.fail("model byte_fallback true with a ByteLevel pre_tokenizer is not supported");
  std::unordered_map<std::string, int32_t> ids;
  for (std::size_t i = 0; i < v.tokens.size(); ++i) ids.emplace(v.tokens[i], static_cast<int32_t>(i));
  if (!unk_token.empty()) {
    const auto it = ids.find(unk_token);
    if (it == ids.end()) c.fail("model unk_token \"" + unk_token + "\" is not in the vocabulary");
    v.unk_id = it->second;
  }
  if (v.byte_fallback)
    for (std::size_t i = 0; i < v.tokens.size(); ++i) {
      const std::string& t = v.tokens[i];
      if (v.types[i] == BpeTokenType::normal && t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>' &&
          std::isxdigit(static_cast<unsigned char>(t[3])) && std::isxdigit(static_cast<unsigned char>(t[4])))
        v.types[i] = BpeTokenType::byte;
    }
  read_post_and_decoder(c, j, v, ids);
  read_config(c, v, ids);
  try {
    return from_vocab(std::move(v));
  } catch (const Error& e) {
    c.fail(e.what());
  }
}

}  // namespace attn::text
