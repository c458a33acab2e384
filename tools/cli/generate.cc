// attn generate --model FILE "prompt": continues a prompt with a language
// model trained by `attn train lm` (tasks::generate_lm, include/attn/tasks/lm.h),
// streaming characters as they are sampled. See docs/generation.md.
#include <attn/core/error.h>
#include <attn/models/generate.h>
#include <attn/tasks/lm.h>
#include <attn/text/vocab.h>

#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

const std::vector<OptionSpec>& generate_options() {
  static const std::vector<OptionSpec> specs = {
      {"model", "FILE", "a model file written by 'attn train lm' (required)"},
      {"prompt", "TEXT",
       "the prompt (or give it as the one positional argument; default: empty,\nthe start "
       "of a new entry)"},
      {"max-new", "N", "most characters to generate (default 100; also limited by the model's max_len)"},
      {"temperature", "T", "sampling temperature > 0 (default 0.8)"},
      {"top-k", "K", "sample among the K most likely characters (default 20; 0 = all)"},
      {"top-p", "P", "nucleus: the smallest set with probability >= P (default 0.9; 1 = all)"},
      {"seed", "S", "sampling seed (default 1): the same seed gives the same text"},
      {"greedy", "", "always take the most likely character (no sampling)"},
      {"beam", "N", "beam search with N beams (printed at the end, not streamed)"},
      {"length-alpha", "A", "beam search length penalty ((5+n)/6)^A (default 0.6)"},
      {"no-stop", "", "do not stop at the end-of-entry token </s>"},
      {"help", "", "this text"},
  };
  return specs;
}

std::string help_text() {
  return "usage: attn generate --model FILE [\"prompt\"] [--max-new N] [--temperature T] [--top-k K]\n"
         "                     [--top-p P] [--seed S] [--greedy | --beam N]\n\n"
         "Continues the prompt with a character language model ('attn train lm') and\n"
         "prints the characters as they are produced. Sampling: softmax(logits / T),\n"
         "cut to the top-k characters, then to the nucleus of probability top-p,\n"
         "renormalised; seeded, so a seed reproduces its text. Generation ends at the\n"
         "end-of-entry token </s>, after --max-new characters or at the model's max_len.\n\n"
         "Options:\n" +
         format_options(generate_options()) +
         "\nExample:\n"
         "  attn generate --model tang.attn \"床前\" --max-new 100 --temperature 0.8 --top-k 20 --top-p 0.9 "
         "--seed 1\n";
}

// Splits off the one positional argument (the prompt); the rest goes to Args.
std::vector<std::string> split_positional(const std::vector<std::string>& raw,
                                          const std::vector<OptionSpec>& specs, std::string* prompt,
                                          bool* has_prompt) {
  std::vector<std::string> args;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    const std::string& a = raw[i];
    if (a.size() < 2 || a.compare(0, 2, "--") != 0) {
      ATTN_CHECK(!*has_prompt, "expected one prompt; got '", *prompt, "' and '", a, "'");
      *prompt = a;
      *has_prompt = true;
      continue;
    }
    args.push_back(a);
    if (a.find('=') == std::string::npos)
      for (const auto& o : specs)
        if ("--" + o.name == a && !o.metavar.empty() && i + 1 < raw.size()) args.push_back(raw[++i]);
  }
  return args;
}

models::GenerateOptions parse_generate(const Args& a) {
  models::GenerateOptions o;
  o.eos_id = a.has("no-stop") ? -1 : text::Vocab::kEos;
  o.max_new_tokens = a.has("max-new") ? a.integer("max-new", 0, 1000000) : 100;
  o.seed = a.has("seed") ? static_cast<uint64_t>(a.integer("seed", 0, INT64_MAX)) : 1;
  if (a.has("beam")) {
    o.search = models::SearchKind::beam;
    o.beam = a.integer("beam", 1, 1000);
    if (a.has("length-alpha")) o.length_alpha = parse_number(a.str("length-alpha"), "--length-alpha");
  } else if (a.has("greedy")) {
    o.search = models::SearchKind::greedy;
  } else {
    o.search = models::SearchKind::sample;
    o.temperature = a.has("temperature") ? parse_number(a.str("temperature"), "--temperature") : 0.8;
    o.top_k = a.has("top-k") ? a.integer("top-k", 0, 100000000) : 20;
    o.top_p = a.has("top-p") ? parse_number(a.str("top-p"), "--top-p") : 0.9;
  }
  return o;
}

}  // namespace

int run_generate_lm(const std::vector<std::string>& raw) {
  std::string positional;
  bool has_positional = false;
  const Args a(split_positional(raw, generate_options(), &positional, &has_positional), generate_options());
  if (a.has("help")) {
    std::fputs(help_text().c_str(), stdout);
    return 0;
  }
  ATTN_CHECK(a.has("model"), "--model FILE is required (a model file written by 'attn train lm')");
  ATTN_CHECK(!(has_positional && a.has("prompt")), "give the prompt once: as an argument or with --prompt");
  ATTN_CHECK(!(a.has("greedy") && a.has("beam")), "--greedy and --beam exclude each other");
  tasks::LmGenerateOptions o;
  o.model = a.str("model");
  o.prompt = a.has("prompt") ? a.str("prompt") : positional;
  o.generate = parse_generate(a);
  bool started = false;
  o.stream = [&](const std::string& piece) {
    if (!started) std::fputs(o.prompt.c_str(), stdout), started = true;
    std::fputs(piece.c_str(), stdout);
    std::fflush(stdout);
  };
  const tasks::LmGenerated g = tasks::generate_lm(o);
  if (g.unknown_prompt_chars > 0)
    std::fprintf(stderr, "note: %lld prompt character(s) are not in the model's vocabulary ([UNK])\n",
                 static_cast<long long>(g.unknown_prompt_chars));
  if (!started) std::fputs(o.prompt.c_str(), stdout);
  if (o.generate.search == models::SearchKind::beam) std::fputs(g.text.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  std::fprintf(stderr, "(%zu characters, %s, log-prob %.3f)\n", g.generated.ids.size(),
               g.generated.stop_token >= 0 ? "ended at </s>" : "length limit", g.generated.log_prob);
  return 0;
}

// One command for both kinds of language model: a decoder on the runtime (SmolLM2 by default, Gemma 3,
// any GGUF or Hugging Face decoder: generate_gguf.cc) or a model file written by 'attn train lm' (above).
int run_generate(const std::vector<std::string>& args) {
  std::string model;
  bool help = false;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") help = true;
    if (args[i] == "--model" && i + 1 < args.size()) model = args[i + 1];
    if (args[i].rfind("--model=", 0) == 0) model = args[i].substr(8);
  }
  if (help && model.empty()) {
    std::fputs(
        "attn generate runs either kind of language model:\n"
        "  --model smollm2 | FILE.gguf   a pretrained GGUF decoder (the default: SmolLM2; also Gemma 3,\n"
        "                                Qwen2, Qwen3, Phi-3, Gemma 2, Mistral and other Llama files)\n"
        "  --model FILE                  a character LM written by 'attn train lm'\n\n",
        stdout);
    run_generate_gguf({"--help"});
    std::fputs("\n", stdout);
    return run_generate_lm({"--help"});
  }
  return is_decoder_model_arg(model) ? run_generate_gguf(args) : run_generate_lm(args);
}

}  // namespace attn::cli
