// `attn generate --model FILE.gguf "prompt"` for the architectures that run on the runtime's decoder
// alone (qwen2, qwen3, phi3, gemma2, a SentencePiece llama such as Mistral: models/text_decoder.h).
// Tokens are printed as they are produced.
#include <attn/core/error.h>
#include <attn/core/parallel.h>
#include <attn/io/gguf.h>
#include <attn/models/llama.h>
#include <attn/models/text_decoder.h>

#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& specs() {
  static const std::vector<OptionSpec> s = {
      {"model", "PATH", "a .gguf (qwen2, qwen3, phi3, gemma2, llama) or a Hugging Face decoder folder"},
      {"max-new", "N", "tokens to generate at most (default 64)"},
      {"temperature", "T", "0 = greedy (default); > 0 samples from softmax(logits / T)"},
      {"top-k", "K", "sample only among the K most likely tokens (0 = all, default)"},
      {"top-p", "P", "sample only among the smallest set of tokens whose probability reaches P (default 1)"},
      {"seed", "S", "random seed for sampling (default 0)"},
      {"chat", "", "wrap the prompt in the file's chat template as one user turn"},
      {"system", "TEXT", "with --chat: a system message put before the user turn"},
      {"max-context", "N", "positions of the sequence (default 4096; at most the model's context)"},
      {"quantize", "TYPE",
       "q8_0 or q4_0: the f32 / f16 / bf16 matrices (not the embeddings) converted at load (default none)"},
      {"threads", "N", "worker threads (default: all cores or ATTN_NUM_THREADS)"},
      {"stats", "", "print prompt and generation speed (tokens/s) to stderr"},
      {"help", "", "this text"},
  };
  return s;
}

}  // namespace

bool is_decoder_model_arg(const std::string& model) {
  if (models::is_decoder_folder(model)) return true;
  if (model.size() < 5 || model.compare(model.size() - 5, 5, ".gguf") != 0) return false;
  try {
    const io::GgufFile f = io::GgufFile::open(model);
    if (!f.has("general.architecture")) return false;
    const std::string arch = f.get_string("general.architecture");
    if (arch == "gemma3") return false;
    if (arch == "llama" && models::LlamaModel::can_load(f)) return false;  // the one-sequence engine
    for (const std::string& a : models::runtime::decoder_architectures())
      if (a == arch) return true;
    return false;
  } catch (const Error&) {
    return false;  // the Llama path reports the problem
  }
}

int run_generate_decoder(const std::vector<std::string>& args) {
  std::vector<std::string> options, positional;
  split_positional(args, specs(), options, positional);
  const Args a(options, specs());
  if (a.has("help")) {
    std::printf(
        "usage: attn generate --model FILE.gguf [options] \"PROMPT\"\n\n"
        "Continues PROMPT with the model of FILE (on the runtime's decoder), printing tokens as they are\n"
        "produced. Greedy unless --temperature > 0.\n\n%s",
        format_options(specs()).c_str());
    return 0;
  }
  ATTN_CHECK(positional.size() == 1, "expected one prompt argument (quote it); got ", positional.size());
  if (a.has("threads")) set_num_threads(static_cast<int>(a.integer("threads", 1, 1024)));
  models::TextDecoderOptions o;
  o.max_context = a.has("max-context") ? a.integer("max-context", 1, int64_t{1} << 30) : 4096;
  if (a.has("quantize")) o.quantize = models::runtime::parse_load_quant(a.str("quantize"));
  models::TextDecoder model = models::TextDecoder::load(a.str("model"), o);
  const models::LlamaTextOptions t = text_options(a);
  std::vector<int32_t> ids;
  if (a.has("chat")) {
    std::vector<std::pair<std::string, std::string>> turns;
    if (a.has("system")) turns.emplace_back("system", a.str("system"));
    turns.emplace_back("user", positional[0]);
    ids = model.encode(model.chat_pieces(turns, true));
  } else {
    ids = model.encode_text(positional[0]);
  }
  const uint64_t seed = a.has("seed") ? static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX)) : 0;
  const models::LlamaReply r = models::decoder_generate_text(model, ids, t, seed);
  std::fflush(stdout);
  if (a.has("stats")) {
    const std::size_t n = r.ids.size();
    std::fprintf(stderr,
                 "\n[%s: prompt %lld tokens, first token after %.3f s; generated %zu tokens, %.1f tokens/s; "
                 "weights %.1f MiB (%s)]\n",
                 model.config().arch.c_str(), static_cast<long long>(r.prompt_tokens), r.prompt_seconds, n,
                 n > 1 ? (n - 1) / r.generate_seconds : 0.0,
                 static_cast<double>(model.decoder().weight_bytes()) / (1 << 20),
                 models::runtime::load_quant_name(o.quantize));
  }
  std::printf("\n");
  return 0;
}

}  // namespace attn::cli
