// English -> Chinese translation with the paper's EncoderDecoder: the parallel
// corpus, the two tokenizers, a trained model bundled with them (Translator),
// decoding to text with cross-attention alignments, and held-out BLEU.
//
// Tokenization: separate vocabularies. English (source) by BPE trained on the
// training split (lower-cased, merges while a pair occurs min_pair_count
// times); Chinese (target) by character (CharTokenizer, ASCII letter/digit runs
// kept as one token, characters rarer than min_char_freq in the training split
// become [UNK]). The scripts share almost nothing (digits, a few Latin names),
// so one shared table would only make the decoder's softmax larger (every
// English subword would be a candidate output). Both use the fixed special ids
// of text/vocab.h: [PAD] 0, [UNK] 1, <s> 4, </s> 5.
//
// The model file (models/task_model.h, task "translate") holds in `data`:
//   {"source_tokenizer": {"kind": "bpe", "lowercase", "alphabet": [...], "merges": [[l, r], ...]},
//    "target_tokenizer": {"kind": "char", "group_ascii_alnum", "tokens": [ids 6..]},
//    "max_src_len", "max_tgt_len", "corpus": {...}, "split": <data::Split JSON>, ...}
// See docs/translate.md.
#pragma once

#include <attn/data/reader.h>
#include <attn/io/json.h>
#include <attn/models/generate.h>
#include <attn/models/transformer.h>
#include <attn/text/bleu.h>
#include <attn/text/bpe.h>
#include <attn/text/tokenizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attn::models {

inline constexpr const char* kTranslateTask = "translate";

// ---- the corpus -------------------------------------------------------------------------------

struct ParallelCorpus {
  data::Dataset data;                    // example.text = source (English), example.pair = target (Chinese)
  std::vector<std::string> attribution;  // per example: the third column ("" when the file has two)
  int64_t lines_read = 0;                // records before deduplication
  data::DedupReport dedup;
};

// Reads "source<TAB>target[<TAB>attribution]" lines (Tatoeba's cmn.txt: a BOM,
// three columns). Errors (attn::Error) name the file and line: missing or empty
// file, a line without a tab or with another field count than the first line,
// invalid UTF-8. Texts are normalised (data/reader.h); identical (source,
// target) pairs are kept once (the first, with its attribution).
// max_pairs > 0 keeps only the first max_pairs pairs of the file (tests, quick runs).
ParallelCorpus read_parallel_corpus(const std::string& path, int64_t max_pairs = 0);

// ---- tokenizers -------------------------------------------------------------------------------

struct TranslationTokenizerOptions {
  int64_t src_vocab_size = 6000;  // BPE vocabulary including specials and alphabet
  int64_t min_pair_count = 2;     // BPE: stop merging below this pair frequency
  int64_t min_char_freq = 2;      // both sides: rarer characters become [UNK]
};

class TranslationTokenizers {
 public:
  TranslationTokenizers(text::BpeTokenizer src, text::CharTokenizer tgt)
      : src_(std::move(src)), tgt_(std::move(tgt)) {}
  // From the training split only (source texts, target texts).
  static TranslationTokenizers train(const std::vector<std::string>& src_texts,
                                     const std::vector<std::string>& tgt_texts,
                                     const TranslationTokenizerOptions& options = {});
  const text::BpeTokenizer& src() const { return src_; }
  const text::CharTokenizer& tgt() const { return tgt_; }

  json::Value to_json() const;  // {"source_tokenizer": ..., "target_tokenizer": ...}
  // Reads the two members of a model file's data object; throws naming what is missing.
  static TranslationTokenizers from_json(const json::Value& data);

 private:
  text::BpeTokenizer src_;
  text::CharTokenizer tgt_;
};

// ---- a trained model ----------------------------------------------------------------------------

// Per layer, batch 1: what one source/target pair attended to.
struct AttentionCapture {
  std::vector<Tensor> encoder;  // per encoder layer: [1, H, Ls, Ls]
  std::vector<Tensor> decoder;  // per decoder layer: [1, H, Lt, Lt] (causal)
  std::vector<Tensor> cross;    // per decoder layer: [1, H, Lt, Ls]
};

struct Translation {
  std::string source;                   // the input as given
  std::vector<int64_t> src_ids;         // BPE ids + </s> (what the encoder read)
  std::vector<std::string> src_tokens;  // one per src_ids ("</s>" last)
  std::vector<int64_t> tgt_ids;         // generated ids, without <s> and </s>
  std::vector<std::string> tgt_tokens;  // one per tgt_ids
  std::string text;                     // detokenised translation
  bool stopped = false;                 // ended with </s> (false: length limit)
  double log_prob = 0, score = 0;       // from generate()
  // [steps, Ls]: head-averaged last-layer cross-attention of the query that
  // produced token t (t < tgt_ids.size(); the last row is </s> when stopped).
  std::vector<std::vector<float>> alignment;
};

class Translator {
 public:
  // Builds the model from a task-model file (task "translate") and loads its weights.
  static std::unique_ptr<Translator> load(const std::string& path);
  // From parts (after training); the model is used in eval mode.
  Translator(std::unique_ptr<EncoderDecoder> model, TranslationTokenizers tokenizers, int64_t max_src_len,
             int64_t max_tgt_len);

  EncoderDecoder& model() { return *model_; }
  const TranslationTokenizers& tokenizers() const { return tok_; }
  int64_t max_src_len() const { return max_src_len_; }
  int64_t max_tgt_len() const { return max_tgt_len_; }

  // Source ids the encoder reads: BPE ids cut to max_src_len - 1, then </s>.
  std::vector<int64_t> encode_source(const std::string& sentence) const;

  // Translates a batch. options.search/beam/length_alpha are used; bos/eos and
  // max_new_tokens are set here (max_new_tokens: max_tgt_len - 1 when options'
  // value is larger). with_alignment fills Translation::alignment.
  std::vector<Translation> translate(const std::vector<std::string>& sentences, GenerateOptions options,
                                     bool with_alignment = false);

  // Every layer's attention for one (source ids, target ids without <s>/</s>):
  // the decoder reads <s> t1 .. tn (teacher forcing), Lt = n + 1.
  AttentionCapture capture(const std::vector<int64_t>& src_ids, const std::vector<int64_t>& tgt_ids);

 private:
  std::unique_ptr<EncoderDecoder> model_;
  TranslationTokenizers tok_;
  int64_t max_src_len_, max_tgt_len_;
};

// ---- evaluation ---------------------------------------------------------------------------------

struct BleuEvaluation {
  text::BleuScore bleu;                 // tokenizer "zh" (sacreBLEU -tok zh)
  std::vector<std::string> hypotheses;  // one per evaluated example
  std::vector<std::string> references;
  double seconds = 0;
};

// Translates corpus examples `rows` in batches of batch_size and scores them
// against their (normalised) targets.
BleuEvaluation evaluate_bleu(Translator& translator, const data::Dataset& corpus,
                             const std::vector<int64_t>& rows, const GenerateOptions& options,
                             int64_t batch_size = 64);

}  // namespace attn::models
