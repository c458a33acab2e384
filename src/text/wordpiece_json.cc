// WordPieceTokenizer::from_tokenizer_json: Hugging Face's tokenizer.json of a BERT WordPiece model
// (include/attn/text/wordpiece.h).
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/text/wordpiece.h>

#include <string>
#include <vector>

namespace attn::text {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) {
  throw Error(detail::concat("tokenizer.json: ", path, ": ", what));
}

std::string type_of(const json::Value* v) {
  if (v == nullptr || v->is_null()) return "";
  const json::Value* t = v->is_object() ? v->find("type") : nullptr;
  return t != nullptr && t->is_string() ? t->as_string() : std::string("?");
}

void read_normalizer(const json::Value& root, const std::string& path, WordPieceOptions& o) {
  const json::Value* n = root.find("normalizer");
  const std::string type = type_of(n);
  if (type.empty()) {  // no normalizer: the text as it is
    o.lowercase = false;
    o.strip_accents = false;
    o.clean_text = false;
    o.handle_chinese_chars = false;
    return;
  }
  if (type != "BertNormalizer")
    fail(path, "normalizer \"" + type + "\" is not supported for WordPiece; expected BertNormalizer");
  const auto flag = [&](const char* key, bool fallback) {
    const json::Value* v = n->find(key);
    if (v == nullptr || v->is_null()) return fallback;
    if (!v->is_bool()) fail(path, std::string("normalizer.") + key + " must be true or false");
    return v->as_bool();
  };
  o.clean_text = flag("clean_text", true);
  o.handle_chinese_chars = flag("handle_chinese_chars", true);
  o.lowercase = flag("lowercase", true);
  if (const json::Value* v = n->find("strip_accents"); v != nullptr && !v->is_null()) {
    if (!v->is_bool()) fail(path, "normalizer.strip_accents must be true, false or null");
    o.strip_accents = v->as_bool();
  }
}

// [CLS] / [SEP] from BertProcessing's "cls"/"sep" pairs or TemplateProcessing's "single" template.
void read_post_processor(const json::Value& root, const std::string& path, WordPieceOptions& o) {
  const json::Value* p = root.find("post_processor");
  const std::string type = type_of(p);
  if (type.empty()) return;  // the defaults [CLS] / [SEP]
  if (type == "BertProcessing") {
    for (auto [key, dst] : {std::pair{"cls", &o.cls_token}, std::pair{"sep", &o.sep_token}}) {
      const json::Value* v = p->find(key);
      if (v == nullptr || !v->is_array() || v->size() != 2 || !v->at(std::size_t{0}).is_string())
        fail(path, std::string("post_processor.") + key + " must be [token, id]");
      *dst = v->at(std::size_t{0}).as_string();
    }
    return;
  }
  if (type != "TemplateProcessing")
    fail(path, "post_processor \"" + type +
                   "\" is not supported for WordPiece; expected BertProcessing or TemplateProcessing");
  const json::Value* single = p->find("single");
  if (single == nullptr || !single->is_array() || single->size() != 3)
    fail(path, "post_processor.single must be the template [CLS] $A [SEP] (3 pieces)");
  std::vector<std::string> parts;
  for (const json::Value& piece : single->items()) {
    const json::Value* sp = piece.is_object() ? piece.find("SpecialToken") : nullptr;
    const json::Value* seq = piece.is_object() ? piece.find("Sequence") : nullptr;
    if (sp != nullptr && sp->is_object() && sp->find("id") && sp->find("id")->is_string())
      parts.push_back(sp->find("id")->as_string());
    else if (seq != nullptr)
      parts.push_back("$A");
    else
      fail(path, "post_processor.single holds a piece that is neither a SpecialToken nor a Sequence");
  }
  if (parts[1] != "$A" || parts[0] == "$A" || parts[2] == "$A")
    fail(path, "post_processor.single must be the template [CLS] $A [SEP]; got " + parts[0] + " " + parts[1] +
                   " " + parts[2]);
  o.cls_token = parts[0];
  o.sep_token = parts[2];
}

std::vector<std::string> read_vocab(const json::Value& model, const std::string& path) {
  const json::Value* vocab = model.find("vocab");
  if (vocab == nullptr || !vocab->is_object() || vocab->size() == 0)
    fail(path, "model.vocab must be a non-empty object of token -> id");
  std::vector<std::string> out(vocab->size());
  std::vector<bool> seen(vocab->size(), false);
  for (const json::Value::Member& m : vocab->members()) {
    if (!m.second.is_integer() || m.second.as_int64() < 0 ||
        m.second.as_int64() >= static_cast<int64_t>(out.size()))
      fail(path, "model.vocab[\"" + m.first + "\"] must be an id in [0, " + std::to_string(out.size()) + ")");
    const auto id = static_cast<std::size_t>(m.second.as_int64());
    if (seen[id]) fail(path, "model.vocab gives id " + std::to_string(id) + " to two tokens");
    seen[id] = true;
    out[id] = m.first;
  }
  return out;
}

}  // namespace

WordPieceTokenizer WordPieceTokenizer::from_tokenizer_json(const std::string& path, int64_t max_length) {
  json::Value root;
  try {
    root = json::parse(io::read_file(path, "tokenizer.json"));
  } catch (const Error& e) {
    fail(path, std::string("malformed JSON: ") + e.what());
  }
  if (!root.is_object()) fail(path, "expected a JSON object");
  const json::Value* model = root.find("model");
  if (type_of(model) != "WordPiece")
    fail(path, "model \"" + type_of(model) + "\" is not WordPiece (this reader takes BERT's WordPiece)");
  WordPieceOptions o;
  o.max_length = max_length;
  if (const json::Value* v = model->find("unk_token"); v != nullptr && v->is_string())
    o.unk_token = v->as_string();
  if (const json::Value* v = model->find("continuing_subword_prefix"); v != nullptr && v->is_string())
    o.continuing_prefix = v->as_string();
  if (const json::Value* v = model->find("max_input_chars_per_word"); v != nullptr && !v->is_null()) {
    if (!v->is_integer() || v->as_int64() < 1 || v->as_int64() > (1 << 20))
      fail(path, "model.max_input_chars_per_word must be an integer in [1, 2^20]");
    o.max_input_chars_per_word = static_cast<int>(v->as_int64());
  }
  read_normalizer(root, path, o);
  const std::string pre = type_of(root.find("pre_tokenizer"));
  if (pre != "BertPreTokenizer")
    fail(path, "pre_tokenizer \"" + pre + "\" is not supported for WordPiece; expected BertPreTokenizer");
  read_post_processor(root, path, o);
  try {
    return from_vocab(read_vocab(*model, path), std::move(o));
  } catch (const Error& e) {
    fail(path, e.what());
  }
}

}  // namespace attn::text
