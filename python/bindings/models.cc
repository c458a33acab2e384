// The model front-ends of the Python package: the same library calls as
// `attn embed`, `attn classify`, `attn generate --model smollm2`,
// `attn explain --json` and `attn train classify` (include/attn/tasks/,
// include/attn/teach/, include/attn/models/text_decoder.h). JSON results travel
// as text (io/json.h dump) and are parsed by the Python side.
#include <attn/io/json.h>
#include <attn/io/model_files.h>
#include <attn/models/bert_rerank.h>
#include <attn/models/generate.h>
#include <attn/models/runtime/scheduler.h>
#include <attn/models/text_decoder.h>
#include <attn/models/text_stream.h>
#include <attn/tasks/classify.h>
#include <attn/tasks/embed.h>
#include <attn/teach/explain.h>
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "convert.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace attn::python {

namespace {

// Thrown from a library callback to stop a long call (Ctrl-C, a closed stream).
struct Stop {
  bool signal = false;  // a Python signal handler raised (the error is set)
};

// Called from library callbacks with the GIL released: runs the Python signal
// handlers (Ctrl-C), throwing Stop when one raised.
void check_signals() {
  nb::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw Stop{true};
}

// Runs fn without the GIL; Stop becomes the pending Python error (KeyboardInterrupt)
// or, for a requested stop, a normal return of `stopped`.
template <typename Fn>
auto interruptible(ErrorKind kind, Fn&& fn) -> decltype(fn()) {
  try {
    return without_gil(kind, std::forward<Fn>(fn));
  } catch (const Stop& s) {
    if (s.signal) throw nb::python_error();
    throw;
  }
}

class Encoder {
 public:
  explicit Encoder(const std::string& name) {
    const std::string dir = name == "minilm" || name == "all-MiniLM-L6-v2" ? "" : name;
    enc_ = without_gil(ErrorKind::runtime, [&] { return &tasks::load_encoder(dir); });
  }
  nb::object encode(const std::vector<std::string>& texts, int64_t batch_size, bool normalize) const {
    models::EmbedOptions o;
    o.batch_size = batch_size;
    o.normalize = normalize;
    models::Embeddings e = without_gil(ErrorKind::value, [&] { return enc_->embed(texts, o); });
    return to_numpy(e.vectors);
  }
  std::vector<int32_t> tokenize(const std::string& text) const {
    return without_gil(ErrorKind::value, [&] { return enc_->encode(text); });
  }
  int64_t dim() const { return enc_->dim(); }
  int64_t max_seq_length() const { return enc_->max_seq_length(); }
  std::string dir() const { return enc_->dir(); }

 private:
  const models::SentenceEncoder* enc_ = nullptr;
};

// A cross-encoder (models/bert_rerank.h): scores of query-document pairs.
class Reranker {
 public:
  explicit Reranker(const std::string& dir) {
    ce_ = without_gil(ErrorKind::runtime, [&] {
      return std::make_unique<models::CrossEncoder>(models::CrossEncoder::load(dir));
    });
  }
  // [N] float32: sigmoid(logit) per pair, or the logits (raw).
  nb::object predict(const std::vector<std::pair<std::string, std::string>>& pairs, int64_t batch_size,
                     bool raw) const {
    std::vector<float> s = without_gil(ErrorKind::value, [&] {
      ATTN_CHECK(!pairs.empty(), "predict: expected at least one (query, document) pair; got none");
      std::vector<models::PairEncoding> enc;
      for (std::size_t i = 0; i < pairs.size(); ++i) {
        try {
          enc.push_back(ce_->encode_pair(pairs[i].first, pairs[i].second));
        } catch (const Error& e) {
          throw Error(detail::concat("predict: pair ", i, ": ", e.what()));
        }
      }
      std::vector<float> out = ce_->logits(enc, batch_size);
      if (!raw)
        for (float& x : out) x = models::sigmoid(x);
      return out;
    });
    return to_numpy(Tensor::from(s, {static_cast<int64_t>(s.size())}));
  }
  // (tokens, [[H, L, L] per layer], logit)
  nb::tuple attention(const std::string& query, const std::string& document) const {
    models::PairAttention a = without_gil(ErrorKind::value, [&] { return ce_->attention(query, document); });
    nb::list layers;
    for (const Tensor& w : a.layers) layers.append(to_numpy(w.select(0, 0).contiguous()));
    return nb::make_tuple(a.tokens, layers, a.logit);
  }
  int64_t max_seq_length() const { return ce_->max_seq_length(); }
  std::string name() const { return ce_->name(); }
  std::string architecture() const { return ce_->architecture(); }

 private:
  std::unique_ptr<models::CrossEncoder> ce_;
};

class Classifier {
 public:
  explicit Classifier(const std::string& path) {
    model_ = without_gil(ErrorKind::runtime, [&] { return models::TextClassifier::load(path); });
  }
  // JSON text: [classification_json, ...]
  std::string predict(const std::vector<std::string>& texts, int64_t top, bool heads, int64_t batch_size) {
    std::lock_guard<std::mutex> lock(busy_);
    return without_gil(ErrorKind::value, [&] {
      ATTN_CHECK(!texts.empty(), "predict: expected at least one text; got none");
      ATTN_CHECK(top >= 1, "predict: top must be >= 1; got ", top);
      const std::vector<models::Classification> cs = model_->classify(texts, true, batch_size);
      tasks::ClassifyFormat f;
      f.top = top;
      f.heads = heads;
      json::Value all = json::Value::array();
      for (std::size_t i = 0; i < cs.size(); ++i)
        all.push_back(tasks::classification_json(texts[i], cs[i], model_->labels(), f));
      return json::dump(all);
    });
  }
  std::vector<std::string> labels() const { return model_->labels(); }
  int64_t max_len() const { return model_->max_len(); }

 private:
  std::mutex busy_;
  std::unique_ptr<models::TextClassifier> model_;
};

class Generator {
 public:
  // Every decoder on models::TextDecoder (the runtime): "smollm2", "gemma3", a .gguf or a Hugging Face
  // folder (models::resolve_decoder_model).
  // quantize ("none", "q8_0", "q4_0"; runtime::parse_load_quant): the f32 / f16 / bf16 matrices
  // converted at load.
  Generator(const std::string& name, int64_t max_context, const std::string& quantize) {
    const models::runtime::LoadQuant quant =
        without_gil(ErrorKind::value, [&] { return models::runtime::parse_load_quant(quantize); });
    without_gil(ErrorKind::runtime, [&] {
      models::TextDecoderOptions o;
      o.max_context = max_context;
      o.quantize = quant;
      dec_ = std::make_unique<models::TextDecoder>(
          models::TextDecoder::load(models::resolve_decoder_model(name).path, o));
      return 0;
    });
  }
  // (text, ids, stopped, prompt_tokens, prompt_seconds, generate_seconds). on_text(piece) is called
  // with the GIL held for every piece; a true return stops generation early.
  nb::tuple generate(const std::string& prompt, int64_t max_new_tokens, double temperature, int64_t top_k,
                     double top_p, uint64_t seed, bool chat, std::optional<std::string> system,
                     std::optional<nb::callable> on_text) {
    std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
    if (!lock.owns_lock())
      throw std::runtime_error(
          "Generator: another generate() on this model is running (a stream not yet "
          "finished or closed); finish or close it first");
    if (max_new_tokens < 0) throw nb::value_error("max_new_tokens must be >= 0");
    if (!(temperature >= 0)) throw nb::value_error("temperature must be >= 0");
    if (top_k < 0) throw nb::value_error("top_k must be >= 0");
    if (!(top_p > 0 && top_p <= 1)) throw nb::value_error("top_p must be in (0, 1]");
    models::TextOptions o;
    o.max_new_tokens = max_new_tokens;
    o.temperature = temperature;
    o.top_k = top_k;
    o.top_p = top_p;
    bool stopped_by_caller = false;
    o.on_text = [&](const std::string& piece) {
      nb::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw Stop{true};
      if (on_text) {
        bool stop = false;
        try {
          stop = nb::cast<bool>((*on_text)(nb::bytes(piece.data(), piece.size())));
        } catch (nb::python_error& e) {
          e.restore();  // raised again once the call has unwound
          throw Stop{true};
        }
        if (stop) {
          stopped_by_caller = true;
          throw Stop{false};
        }
      }
    };
    models::TextReply r;
    try {
      r = interruptible(ErrorKind::value, [&] {
        const std::vector<int32_t> ids = prompt_ids(prompt, chat, system);
        ATTN_CHECK(!ids.empty(), "generate: the prompt encodes to no tokens");
        ATTN_CHECK(static_cast<int64_t>(ids.size()) <= capacity(), "generate: the prompt has ", ids.size(),
                   " tokens; the context holds ", capacity());
        return models::decoder_generate_text(*dec_, ids, o, seed);
      });
    } catch (const Stop&) {
      // stopped_by_caller: a closed stream; nothing to return
    }
    return nb::make_tuple(nb::bytes(r.text.data(), r.text.size()), r.ids, r.stopped || stopped_by_caller,
                          r.prompt_tokens, r.prompt_seconds, r.generate_seconds);
  }
  // Every prompt at once through the runtime's continuous batching (models/runtime/scheduler.h):
  // [(text, ids, stopped)] in the prompts' order. Prompt i samples from Rng(mix_seed(seed, i)).
  nb::list generate_batch(const std::vector<std::string>& prompts, int64_t max_new_tokens, double temperature,
                          int64_t top_k, double top_p, uint64_t seed, bool chat,
                          std::optional<std::string> system) {
    std::unique_lock<std::mutex> lock(busy_, std::try_to_lock);
    if (!lock.owns_lock())
      throw std::runtime_error(
          "Generator: another generate() on this model is running; finish or close it first");
    if (max_new_tokens < 1) throw nb::value_error("max_new_tokens must be >= 1");
    if (!(temperature >= 0)) throw nb::value_error("temperature must be >= 0");
    if (top_k < 0) throw nb::value_error("top_k must be >= 0");
    if (!(top_p > 0 && top_p <= 1)) throw nb::value_error("top_p must be in (0, 1]");
    const auto results = interruptible(ErrorKind::value, [&] {
      std::vector<std::vector<int32_t>> ids;
      for (std::size_t i = 0; i < prompts.size(); ++i) {
        ids.push_back(prompt_ids(prompts[i], chat, system));
        ATTN_CHECK(!ids.back().empty(), "generate_batch: prompt ", i, " encodes to no tokens");
        ATTN_CHECK(static_cast<int64_t>(ids.back().size()) <= capacity(), "generate_batch: prompt ", i,
                   " has ", ids.back().size(), " tokens; the context holds ", capacity());
      }
      models::GenerateOptions g = models::request_options(max_new_tokens, temperature, top_k, top_p);
      g.seed = seed;
      dec_->set_stop_tokens(g);
      return models::runtime::generate_batch(dec_->decoder(), ids, g);
    });
    nb::list out;
    const auto decode = [this](const std::vector<int32_t>& v) { return dec_->decode(v); };
    for (const auto& r : results) {
      models::TextStream text(decode);
      for (int32_t id : r.ids) text.push(id);
      text.finish();
      out.append(nb::make_tuple(nb::bytes(text.text().data(), text.text().size()), r.ids,
                                r.reason == models::runtime::FinishReason::stop));
    }
    return out;
  }
  int64_t capacity() const { return dec_->capacity(); }

 private:
  // The prompt's ids: with chat, the file's chat template over (system,) user (special-token strings in
  // the texts stay text); else the raw prompt (its special-token strings become their tokens).
  std::vector<int32_t> prompt_ids(const std::string& prompt, bool chat,
                                  const std::optional<std::string>& system) {
    if (!chat) return dec_->encode_text(prompt);
    std::vector<std::pair<std::string, std::string>> turns;
    if (system) turns.emplace_back("system", *system);
    turns.emplace_back("user", prompt);
    return dec_->encode(dec_->chat_pieces(turns, true));
  }

  std::mutex busy_;
  std::unique_ptr<models::TextDecoder> dec_;
};

teach::Sentence sentence_of(const std::optional<std::vector<std::string>>& words,
                            std::optional<uint64_t> seed) {
  teach::Sentence s;
  if (words) s.words = *words;
  if (seed) s.seed = *seed;
  return s;
}

// (text, json) of one explain mode, chosen as `attn explain` does.
nb::tuple explain(const std::string& mode, std::optional<std::vector<std::string>> sentence,
                  std::optional<uint64_t> seed, std::string query, std::vector<double> scores,
                  std::vector<std::string> tokens, int64_t heads, int64_t n, int64_t d, int64_t batch,
                  bool causal, std::string mask, int64_t length, int64_t window, std::string model,
                  std::string text, std::optional<int64_t> layer, int64_t head, std::string word,
                  int64_t dims, const std::string& lang_name) {
  const teach::Lang lang = without_gil(ErrorKind::value, [&] { return teach::parse_lang(lang_name); });
  teach::Report r = without_gil(ErrorKind::value, [&] {
    if (mode == "scores") {
      teach::ScoresOptions o;
      o.scores = scores;
      o.tokens = tokens;
      o.lang = lang;
      return teach::softmax_scores(o);
    }
    if (mode == "cost") {
      teach::CostOptions o;
      o.n = n;
      o.d = d;
      o.heads = heads;
      o.batch = batch;
      o.causal = causal;
      o.lang = lang;
      return teach::cost(o);
    }
    if (mode == "mask") {
      teach::MaskOptions o;
      o.sentence = sentence_of(sentence, seed);
      o.kind = mask;
      o.length = length;
      o.window = window;
      o.causal = causal;
      o.lang = lang;
      return teach::mask(o);
    }
    if (mode == "model") {
      teach::ModelOptions o;
      o.path = model;
      o.sentence = text;
      o.layer = layer;
      o.head = head;
      o.word = word;
      o.show_dims = dims;
      o.lang = lang;
      return teach::explain_model(o);
    }
    if (mode == "multi-head") {
      teach::MultiHeadOptions o;
      o.sentence = sentence_of(sentence, seed);
      o.query = query;
      o.heads = heads;
      o.lang = lang;
      return teach::multi_head(o);
    }
    ATTN_CHECK(mode == "walkthrough", "explain: unknown mode '", mode, "'");
    teach::WalkthroughOptions o;
    o.sentence = sentence_of(sentence, seed);
    o.query = query;
    o.lang = lang;
    return teach::walkthrough(o);
  });
  return nb::make_tuple(r.text, teach::json_text(r.json));
}

// (summary, report_md, report json text, model_path, test_accuracy, baseline_test_accuracy)
nb::tuple train_classifier(tasks::ClassifyTrainOptions o, std::optional<nb::callable> progress) {
  if (progress) {
    o.progress.write = [&progress](const std::string& text) {
      nb::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw Stop{true};
      try {
        (*progress)(text);
      } catch (nb::python_error& e) {
        e.restore();
        throw Stop{true};
      }
    };
  } else {
    o.progress.write = [](const std::string&) { check_signals(); };
  }
  const tasks::ClassifyTrainResult r =
      interruptible(ErrorKind::value, [&] { return tasks::train_classifier(o); });
  return nb::make_tuple(r.summary, r.report_md, json::dump(r.report), r.model_path, r.test_accuracy,
                        r.baseline_test_accuracy);
}

}  // namespace

void bind_models(nb::module_& m) {
  nb::class_<Encoder>(m, "SentenceEncoder")
      .def(nb::init<const std::string&>(), "name"_a)
      .def("encode", &Encoder::encode, "texts"_a, "batch_size"_a, "normalize"_a)
      .def("tokenize", &Encoder::tokenize, "text"_a)
      .def_prop_ro("dim", &Encoder::dim)
      .def_prop_ro("max_seq_length", &Encoder::max_seq_length)
      .def_prop_ro("dir", &Encoder::dir);
  nb::class_<Reranker>(m, "Reranker")
      .def(nb::init<const std::string&>(), "dir"_a)
      .def("predict", &Reranker::predict, "pairs"_a, "batch_size"_a, "raw"_a)
      .def("attention", &Reranker::attention, "query"_a, "document"_a)
      .def_prop_ro("max_seq_length", &Reranker::max_seq_length)
      .def_prop_ro("name", &Reranker::name)
      .def_prop_ro("architecture", &Reranker::architecture);
  nb::class_<Classifier>(m, "TextClassifier")
      .def(nb::init<const std::string&>(), "path"_a)
      .def("predict", &Classifier::predict, "texts"_a, "top"_a, "heads"_a, "batch_size"_a)
      .def_prop_ro("labels", &Classifier::labels)
      .def_prop_ro("max_len", &Classifier::max_len);
  nb::class_<Generator>(m, "Generator")
      .def(nb::init<const std::string&, int64_t, const std::string&>(), "name"_a, "max_context"_a,
           "quantize"_a)
      .def("generate", &Generator::generate, "prompt"_a, "max_new_tokens"_a, "temperature"_a, "top_k"_a,
           "top_p"_a, "seed"_a, "chat"_a, "system"_a.none(), "on_text"_a.none())
      .def("generate_batch", &Generator::generate_batch, "prompts"_a, "max_new_tokens"_a, "temperature"_a,
           "top_k"_a, "top_p"_a, "seed"_a, "chat"_a, "system"_a.none())
      .def_prop_ro("capacity", &Generator::capacity);
  m.def("explain", &explain, "mode"_a, "sentence"_a.none(), "seed"_a.none(), "query"_a, "scores"_a,
        "tokens"_a, "heads"_a, "n"_a, "d"_a, "batch"_a, "causal"_a, "mask"_a, "length"_a, "window"_a,
        "model"_a, "text"_a, "layer"_a.none(), "head"_a, "word"_a, "dims"_a, "lang"_a = "en");

  nb::class_<tasks::ClassifyTrainOptions> opts(m, "ClassifyTrainOptions");
  opts.def(nb::init<>());
#define ATTN_FIELD(name) opts.def_rw(#name, &tasks::ClassifyTrainOptions::name)
  ATTN_FIELD(pos);
  ATTN_FIELD(neg);
  ATTN_FIELD(data);
  ATTN_FIELD(format);
  ATTN_FIELD(text_column);
  ATTN_FIELD(label_column);
  ATTN_FIELD(out);
  ATTN_FIELD(preset);
  ATTN_FIELD(minutes);
  ATTN_FIELD(epochs);
  ATTN_FIELD(max_epochs);
  ATTN_FIELD(seed);
  ATTN_FIELD(max_len);
  ATTN_FIELD(max_chars);
  ATTN_FIELD(min_freq);
  ATTN_FIELD(layers);
  ATTN_FIELD(d_model);
  ATTN_FIELD(heads);
  ATTN_FIELD(d_ff);
  ATTN_FIELD(dropout);
  ATTN_FIELD(lr);
  ATTN_FIELD(weight_decay);
  ATTN_FIELD(clip);
  ATTN_FIELD(batch_size);
  ATTN_FIELD(patience);
  ATTN_FIELD(eval_every);
  ATTN_FIELD(command);
#undef ATTN_FIELD
  m.def("train_classifier", &train_classifier, "options"_a, "progress"_a.none());
}

}  // namespace attn::python
