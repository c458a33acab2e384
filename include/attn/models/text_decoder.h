// A text decoder on the runtime (issue 37/38), from a GGUF file or a Hugging Face folder: the
// runtime's decoder for any architecture it reads (models/runtime/decoder.h), the model's tokenizer
// (text::load_tokenizer: GGUF tokenizer.ggml.*, or tokenizer.json) and its chat template (GGUF
// tokenizer.chat_template, or tokenizer_config.json's chat_template) rendered by attn's Jinja engine.
// The one text generator of attn: `attn generate`, `attn chat`, the Python Generator and `attn serve`
// run every decoder (SmolLM2 and Gemma 3 included) through it, one decoding loop (runtime::Scheduler).
#pragma once

#include <attn/io/gguf.h>
#include <attn/models/generate.h>
#include <attn/models/runtime/decoder.h>
#include <attn/text/decoder_tokenizer.h>
#include <attn/text/text_piece.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace attn::models {

// How a reply is generated, and its text as it comes.
struct TextOptions {
  int64_t max_new_tokens = 64;
  double temperature = 0;  // 0 = greedy; > 0 samples from softmax(logits / T)
  int64_t top_k = 0;       // sampling: only the K most likely tokens (0 = all)
  double top_p = 1;        // sampling: the smallest set of tokens whose probability reaches P, in (0, 1]
  // The reply as it is produced: each call gets the next piece of text, valid UTF-8 that never splits
  // a character (models::TextStream).
  std::function<void(const std::string&)> on_text;
};

struct TextReply {
  std::vector<int32_t> ids;  // generated tokens, the stop token included when one ended the reply
  bool stopped = false;      // a stop token (TextDecoder::set_stop_tokens) ended it
  // Everything on_text received: ids decoded, control tokens not rendered, always valid UTF-8
  // (models::TextStream): an ill-formed byte sequence the model wrote is U+FFFD, and so is a character
  // that max_new_tokens cut in the middle (ids keeps every generated token).
  std::string text;
  int64_t prompt_tokens = 0;
  double prompt_seconds = 0;    // to the first token (the prompt pass)
  double generate_seconds = 0;  // from the first token to the last
};

struct TextDecoderOptions {
  int64_t max_context = 0;  // 0: the file's context
  // Matrices converted to Q8_0 / Q4_0 blocks at load (runtime::DecoderOptions::quantize).
  runtime::LoadQuant quantize = runtime::LoadQuant::none;
  // Build the greedy picks' screen at load (runtime::Decoder::prepare_greedy_picks on a short text)
  // rather than after the decoder's first 128 picks: for a server, whose requests then all get it.
  bool greedy_screen_at_load = false;
};

class TextDecoder {
 public:
  // path: a .gguf file, or a folder with config.json, safetensors and tokenizer.json.
  static TextDecoder load(const std::string& path, const TextDecoderOptions& options = {});
  TextDecoder(TextDecoder&&) noexcept;
  TextDecoder& operator=(TextDecoder&&) noexcept;
  ~TextDecoder();

  runtime::Decoder& decoder();
  const runtime::Decoder& decoder() const;
  const runtime::DecoderConfig& config() const;
  int64_t capacity() const;  // positions of one sequence

  // The file's chat template over (role, content) turns: its markers may be special tokens, the
  // contents never are. attn::Error when the file has no template or it uses an unsupported construct.
  text::TextPieces chat_pieces(const std::vector<std::pair<std::string, std::string>>& turns,
                               bool add_generation_prompt = true) const;
  // Ids of pieces, with the begin-of-sequence token where the tokenizer wants one.
  std::vector<int32_t> encode(const text::TextPieces& pieces) const;
  // Ids of a text (special-token strings become their tokens).
  std::vector<int32_t> encode_text(const std::string& text) const;
  // The bytes of ids (control tokens not rendered).
  std::string decode(const std::vector<int32_t>& ids) const;
  // One display string per id (valid UTF-8; control tokens rendered).
  std::vector<std::string> token_strings(const std::vector<int32_t>& ids) const;
  void set_stop_tokens(GenerateOptions& g) const;
  const text::DecoderTokenizer& tokenizer() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  explicit TextDecoder(std::unique_ptr<Impl> impl);
};

// One way to name a decoder: "smollm2" (SmolLM2-135M-Instruct) and "gemma3" (Gemma-3-270M) are the
// installed packages' files (io/model_files.h); anything else is a .gguf path or a Hugging Face folder.
struct DecoderModelName {
  std::string path;  // the file or folder
  std::string id;    // the known name, else the file's or folder's name without .gguf
};
// attn::Error naming where it looked when a known name's package or the path is missing.
DecoderModelName resolve_decoder_model(const std::string& name);
// Whether name is one of the known decoder names above.
bool is_known_decoder_name(const std::string& name);

// Whether path is a Hugging Face folder of a decoder the runtime reads (config.json's model_type llama,
// mistral, qwen2, qwen3, phi3, gemma2 or gemma3_text); false for anything else (an encoder folder, a
// file), without throwing.
bool is_decoder_folder(const std::string& path);

// Generates up to options.max_new_tokens after prompt_ids (non-empty, at most capacity()) on the
// runtime (one request through runtime::Scheduler: chunked prefill, then one token per step), greedy
// or sampled from Rng(seed), streaming the text to options.on_text through models::TextStream; stops
// at a stop token (set_stop_tokens) or when the context is full. prompt_seconds is the time to the
// first token.
TextReply decoder_generate_text(TextDecoder& model, const std::vector<int32_t>& prompt_ids,
                                const TextOptions& options, uint64_t seed = 0);

// Requests one after another on one model with one KV cache kept between them (room for one sequence of
// capacity() positions): blocks an earlier request wrote stay in the prefix cache, so a prompt that starts
// with an earlier prompt and its reply (the conversation so far) prefills only what is new.
class DecoderSession {
 public:
  explicit DecoderSession(TextDecoder& model);  // the model outlives the session
  ~DecoderSession();
  DecoderSession(const DecoderSession&) = delete;
  DecoderSession& operator=(const DecoderSession&) = delete;

  // As decoder_generate_text, on this session's cache.
  TextReply generate(const std::vector<int32_t>& prompt_ids, const TextOptions& options, uint64_t seed);
  void clear();                       // forgets every cached block
  int64_t cached_tokens() const;      // prompt tokens the last generate() took from the cache
  int64_t kv_bytes_reserved() const;  // what the cache holds now (runtime::KvAccounting::reserved)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A conversation with a chat model (`attn chat`): each turn is the file's chat template of the user's
// text, appended to the conversation's tokens (the replies exactly as generated, each closed as the
// template closes an assistant turn), and answered on a DecoderSession, so only the new turn is prefilled.
class DecoderChat {
 public:
  // system: the system message (empty: the template's default). Turn t samples from
  // Rng(mix_seed(seed, t)). attn::Error when the template cannot continue a conversation (it does not
  // write an assistant reply right after its generation prompt).
  DecoderChat(TextDecoder& model, std::string system, TextOptions options, uint64_t seed);
  ~DecoderChat();

  struct Turn {
    // The turn did not fit after the conversation so far: the conversation was cleared and the turn
    // answered as the first of a new one, unless too_long.
    bool context_full = false;
    // The turn (templated, with the system prompt, plus 2 tokens of reply) does not fit even an empty
    // context: nothing was generated; turn_tokens and the model's capacity() say by how much.
    bool too_long = false;
    int64_t turn_tokens = 0;    // the templated turn's tokens
    int64_t cached_tokens = 0;  // tokens of the conversation so far that were not prefilled again
    TextReply reply;
  };
  Turn say(const std::string& user_text);
  void reset();            // starts a new conversation
  int64_t tokens() const;  // the conversation's tokens so far
  int64_t kv_bytes_reserved() const { return session_.kv_bytes_reserved(); }  // the conversation's cache

 private:
  std::vector<int32_t> turn_ids(const std::string& user_text) const;
  TextDecoder& model_;
  DecoderSession session_;
  std::string system_, closing_;
  TextOptions options_;
  uint64_t seed_ = 0;
  int64_t turns_ = 0;
  std::vector<int32_t> history_;
};

}  // namespace attn::models
