// English -> Chinese translation: corpus, tokenizers, Translator, BLEU (translation.h).
#include <attn/core/autograd.h>
#include <attn/core/error.h>
#include <attn/data/reader.h>
#include <attn/io/files.h>
#include <attn/models/task_model.h>
#include <attn/models/translation.h>
#include <attn/text/utf8.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <numeric>
#include <sstream>
#include <unordered_map>

namespace attn::models {
namespace {

const json::Value& member(const json::Value& obj, const char* key, const char* where) {
  ATTN_CHECK(obj.is_object(), "translate: ", where, " must be a JSON object; got ",
             json::type_name(obj.type()));
  const json::Value* v = obj.find(key);
  ATTN_CHECK(v != nullptr, "translate: ", where, " has no \"", key, "\"");
  return *v;
}

text::CharTokenizerOptions target_options() {
  text::CharTokenizerOptions o;
  o.group_ascii_alnum = true;  // "Tom", "2019" stay one token
  return o;
}

}  // namespace

// ---- corpus ---------------------------------------------------------------------------------------

ParallelCorpus read_parallel_corpus(const std::string& path, int64_t max_pairs) {
  data::TableSpec spec;
  spec.format = data::TableFormat::tsv;
  spec.header = false;
  spec.text_column = "0";
  spec.pair_column = "1";
  data::Dataset ds = data::read_table(path, spec);  // UTF-8, field counts, normalisation (file:line errors)
  if (max_pairs > 0 && ds.size() > max_pairs) ds.examples.resize(static_cast<std::size_t>(max_pairs));

  // The attribution column, by line (read_table validated the bytes and the field counts).
  const std::string bytes = io::read_file(path, "translate: parallel corpus");
  const std::string_view body = text::strip_bom(bytes);
  std::unordered_map<int64_t, std::string> attribution;
  {
    std::unordered_map<int64_t, bool> wanted;
    for (const auto& e : ds.examples) wanted[e.line] = true;
    int64_t line = 1;
    for (std::size_t start = 0; start <= body.size();) {
      std::size_t end = body.find('\n', start);
      if (end == std::string_view::npos) end = body.size();
      std::string_view l = body.substr(start, end - start);
      if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
      if (wanted.count(line)) {
        const std::size_t t1 = l.find('\t');
        const std::size_t t2 = t1 == std::string_view::npos ? t1 : l.find('\t', t1 + 1);
        attribution[line] = t2 == std::string_view::npos ? "" : std::string(l.substr(t2 + 1));
      }
      ++line;
      start = end + 1;
    }
  }
  ParallelCorpus c;
  c.lines_read = ds.size();
  c.data = data::deduplicate(ds, &c.dedup);
  c.attribution.reserve(c.data.examples.size());
  for (const auto& e : c.data.examples) c.attribution.push_back(attribution[e.line]);
  return c;
}

// ---- tokenizers ------------------------------------------------------------------------------------

TranslationTokenizers TranslationTokenizers::train(const std::vector<std::string>& src_texts,
                                                   const std::vector<std::string>& tgt_texts,
                                                   const TranslationTokenizerOptions& options) {
  ATTN_CHECK(!src_texts.empty() && !tgt_texts.empty(), "translate: no training texts for the tokenizers (",
             src_texts.size(), " source, ", tgt_texts.size(), " target)");
  text::BpeOptions bo;
  bo.vocab_size = options.src_vocab_size;
  bo.lowercase = true;
  bo.min_pair_count = options.min_pair_count;
  bo.min_char_count = options.min_char_freq;
  text::VocabOptions vo;
  vo.min_freq = options.min_char_freq;
  return TranslationTokenizers(text::BpeTokenizer::train(src_texts, bo),
                               text::CharTokenizer::train(tgt_texts, target_options(), vo));
}

json::Value TranslationTokenizers::to_json() const {
  json::Value alphabet = json::Value::array(), merges = json::Value::array();
  for (const auto& c : src_.alphabet()) alphabet.push_back(json::Value::string(c));
  for (const auto& [l, r] : src_.merges())
    merges.push_back(json::Value::array({json::Value::string(l), json::Value::string(r)}));
  json::Value src = json::Value::object();
  src.set("kind", json::Value::string("bpe"));
  src.set("lowercase", json::Value::boolean(src_.lowercase()));
  src.set("vocab_size", json::Value::integer(src_.vocab().size()));
  src.set("alphabet", std::move(alphabet));
  src.set("merges", std::move(merges));
  json::Value tokens = json::Value::array();
  const auto& all = tgt_.vocab().tokens();
  for (std::size_t i = text::Vocab::kNumSpecial; i < all.size(); ++i)
    tokens.push_back(json::Value::string(all[i]));
  json::Value tgt = json::Value::object();
  tgt.set("kind", json::Value::string("char"));
  tgt.set("group_ascii_alnum", json::Value::boolean(tgt_.options().group_ascii_alnum));
  tgt.set("vocab_size", json::Value::integer(tgt_.vocab().size()));
  tgt.set("tokens", std::move(tokens));
  json::Value out = json::Value::object();
  out.set("source_tokenizer", std::move(src));
  out.set("target_tokenizer", std::move(tgt));
  return out;
}

TranslationTokenizers TranslationTokenizers::from_json(const json::Value& data) {
  const json::Value& s = member(data, "source_tokenizer", "the model's data");
  ATTN_CHECK(member(s, "kind", "source_tokenizer").is_string() && s.at("kind").as_string() == "bpe",
             "translate: source_tokenizer.kind: expected \"bpe\"");
  std::vector<std::string> alphabet;
  for (const auto& c : member(s, "alphabet", "source_tokenizer").items()) alphabet.push_back(c.as_string());
  std::vector<std::pair<std::string, std::string>> merges;
  for (const auto& m : member(s, "merges", "source_tokenizer").items()) {
    ATTN_CHECK(m.is_array() && m.size() == 2,
               "translate: source_tokenizer.merges: expected [left, right] pairs");
    merges.emplace_back(m.at(std::size_t{0}).as_string(), m.at(std::size_t{1}).as_string());
  }
  text::BpeTokenizer src =
      text::BpeTokenizer::from_parts(member(s, "lowercase", "source_tokenizer").as_bool(),
                                     std::move(alphabet), std::move(merges), "the model's source_tokenizer");
  const json::Value& t = member(data, "target_tokenizer", "the model's data");
  ATTN_CHECK(member(t, "kind", "target_tokenizer").is_string() && t.at("kind").as_string() == "char",
             "translate: target_tokenizer.kind: expected \"char\"");
  std::vector<std::string> tokens;
  for (const auto& c : member(t, "tokens", "target_tokenizer").items()) tokens.push_back(c.as_string());
  text::CharTokenizerOptions o = target_options();
  o.group_ascii_alnum = member(t, "group_ascii_alnum", "target_tokenizer").as_bool();
  return TranslationTokenizers(std::move(src), text::CharTokenizer(text::Vocab::from_tokens(tokens), o));
}

// ---- Translator ---------------------------------------------------------------------------------

Translator::Translator(std::unique_ptr<EncoderDecoder> model, TranslationTokenizers tokenizers,
                       int64_t max_src_len, int64_t max_tgt_len)
    : model_(std::move(model)),
      tok_(std::move(tokenizers)),
      max_src_len_(max_src_len),
      max_tgt_len_(max_tgt_len) {
  const TransformerConfig& c = model_->config();
  ATTN_CHECK(c.src_vocab == tok_.src().vocab().size(), "translate: the model's src_vocab is ", c.src_vocab,
             " but the source tokenizer has ", tok_.src().vocab().size(), " tokens");
  ATTN_CHECK(c.tgt_vocab == tok_.tgt().vocab().size(), "translate: the model's tgt_vocab is ", c.tgt_vocab,
             " but the target tokenizer has ", tok_.tgt().vocab().size(), " tokens");
  ATTN_CHECK(max_src_len >= 2 && max_src_len <= c.max_len && max_tgt_len >= 2 && max_tgt_len <= c.max_len,
             "translate: max_src_len ", max_src_len, " and max_tgt_len ", max_tgt_len,
             " must be in [2, max_len = ", c.max_len, "]");
  model_->eval();
}

std::unique_ptr<Translator> Translator::load(const std::string& path) {
  const TaskModelFile file = TaskModelFile::open(path, kTranslateTask);  // opened and mapped once
  const TaskModelHeader& h = file.header();
  TranslationTokenizers tok = TranslationTokenizers::from_json(h.data);
  auto model = std::make_unique<EncoderDecoder>(h.config);
  file.load_weights(model->named_parameters());
  return std::make_unique<Translator>(std::move(model), std::move(tok),
                                      member(h.data, "max_src_len", "the model's data").as_int64(),
                                      member(h.data, "max_tgt_len", "the model's data").as_int64());
}

std::vector<int64_t> Translator::encode_source(const std::string& sentence) const {
  const std::string norm = text::normalize_utf8(sentence);
  ATTN_CHECK(!norm.empty(), "translate: the source sentence is empty");
  std::vector<int32_t> ids = tok_.src().encode(norm);
  if (static_cast<int64_t>(ids.size()) > max_src_len_ - 1)
    ids.resize(static_cast<std::size_t>(max_src_len_ - 1));
  std::vector<int64_t> out(ids.begin(), ids.end());
  out.push_back(text::Vocab::kEos);
  return out;
}

std::vector<Translation> Translator::translate(const std::vector<std::string>& sentences,
                                               GenerateOptions options, bool with_alignment) {
  std::vector<std::vector<int64_t>> sources;
  std::vector<Translation> out(sentences.size());
  for (std::size_t i = 0; i < sentences.size(); ++i) {
    out[i].source = sentences[i];
    out[i].src_ids = encode_source(sentences[i]);
    for (int64_t id : out[i].src_ids)
      out[i].src_tokens.push_back(tok_.src().vocab().token(static_cast<int32_t>(id)));
    sources.push_back(out[i].src_ids);
  }
  if (sources.empty()) return out;
  options.bos_id = text::Vocab::kBos;
  options.eos_id = text::Vocab::kEos;
  options.stop_ids.clear();
  options.num_return = 1;
  options.max_new_tokens = std::min<int64_t>(options.max_new_tokens, max_tgt_len_ - 1);
  options.capture_cross_attention = with_alignment;
  const std::vector<Generated> gen = generate(*model_, sources, options);
  ATTN_CHECK(gen.size() == sources.size(), "translate: generate returned ", gen.size(), " results for ",
             sources.size(), " sources");
  for (const Generated& g : gen) {
    Translation& t = out[static_cast<std::size_t>(g.source)];
    t.tgt_ids = g.ids;
    for (int64_t id : g.ids) t.tgt_tokens.push_back(tok_.tgt().vocab().token(static_cast<int32_t>(id)));
    const std::vector<int32_t> ids32(g.ids.begin(), g.ids.end());
    t.text = tok_.tgt().decode(ids32);
    t.stopped = g.stop_token >= 0;
    t.log_prob = g.log_prob;
    t.score = g.score;
    if (with_alignment && g.cross_attention.defined()) {
      const Tensor a = g.cross_attention.contiguous();  // [steps, Ls]
      const int64_t steps = a.size(0), ls = a.size(1);
      const float* p = a.data<float>();
      for (int64_t s = 0; s < steps; ++s) t.alignment.emplace_back(p + s * ls, p + (s + 1) * ls);
    }
  }
  return out;
}

AttentionCapture Translator::capture(const std::vector<int64_t>& src_ids,
                                     const std::vector<int64_t>& tgt_ids) {
  ATTN_CHECK(!src_ids.empty(), "translate: capture needs a non-empty source");
  std::vector<int64_t> tgt_in = {text::Vocab::kBos};
  tgt_in.insert(tgt_in.end(), tgt_ids.begin(), tgt_ids.end());
  const int64_t ls = static_cast<int64_t>(src_ids.size()), lt = static_cast<int64_t>(tgt_in.size());
  NoGradGuard no_grad;
  model_->eval();
  EncoderDecoder::Attention a =
      model_->attention(Tensor::from(src_ids, {1, ls}), {ls}, Tensor::from(tgt_in, {1, lt}));
  return {std::move(a.encoder), std::move(a.decoder), std::move(a.cross)};
}

// ---- evaluation -----------------------------------------------------------------------------------

BleuEvaluation evaluate_bleu(Translator& translator, const data::Dataset& corpus,
                             const std::vector<int64_t>& rows, const GenerateOptions& options,
                             int64_t batch_size) {
  ATTN_CHECK(batch_size > 0, "translate: batch_size must be > 0; got ", batch_size);
  const auto t0 = std::chrono::steady_clock::now();
  BleuEvaluation ev;
  ev.hypotheses.resize(rows.size());
  ev.references.resize(rows.size());
  // Batches of similar source length waste less compute on padding.
  std::vector<std::size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return corpus.examples[rows[a]].text.size() < corpus.examples[rows[b]].text.size();
  });
  for (std::size_t start = 0; start < order.size(); start += static_cast<std::size_t>(batch_size)) {
    const std::size_t end = std::min(order.size(), start + static_cast<std::size_t>(batch_size));
    std::vector<std::string> src;
    for (std::size_t k = start; k < end; ++k) src.push_back(corpus.examples[rows[order[k]]].text);
    const std::vector<Translation> tr = translator.translate(src, options);
    for (std::size_t k = start; k < end; ++k) {
      ev.hypotheses[order[k]] = tr[k - start].text;
      ev.references[order[k]] = corpus.examples[rows[order[k]]].pair;
    }
  }
  text::BleuOptions bo;
  bo.tokenizer = text::BleuTokenizer::zh;
  ev.bleu = text::corpus_bleu(ev.hypotheses, {ev.references}, bo);
  ev.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return ev;
}

}  // namespace attn::models
