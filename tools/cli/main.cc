// attn: one binary, subcommands. Catches every error at main and prints the
// message plus a hint; exits non-zero on failure.
#include <attn/core/config.h>
#include <attn/core/error.h>
#include <attn/version.h>

#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "commands.h"

namespace {

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: attn <command> [options]\n\n"
      "commands:\n"
      "  explain   walk through Attention(Q,K,V) = softmax(QK^T/sqrt(d_k))V step by step\n"
      "  quiz      test yourself on attention: weights, masks, parameters, path lengths\n"
      "  view      see attention: a self-contained HTML viewer page or a terminal heatmap\n"
      "  train     train a model on real data: attn train <task> (run 'attn train' for the tasks)\n"
      "  classify  label texts with a trained classifier and show what [CLS] attended to\n"
      "  translate English -> Chinese with a trained model, and what each character attended to\n"
      "  generate  continue a prompt: SmolLM2 (GGUF, default) or an 'attn train lm' model (--model FILE)\n"
      "  chat      talk to SmolLM2-135M-Instruct, one line per turn (interactive or piped)\n"
      "  embed     sentence embeddings (all-MiniLM-L6-v2) as json, npy or csv\n"
      "  similarity  cosine similarity of two texts (all-MiniLM-L6-v2)\n"
      "  search    semantic search over the lines of a file: attn search --corpus FILE QUERY\n"
      "  attention a pretrained model's attention on a text: attn attention --model minilm TEXT\n"
      "  version   print the version (also: attn --version)\n"
      "  help      this text\n\n"
      "Run 'attn <command> --help' for the options of one command.\n");
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "help" || args[0] == "--help" || args[0] == "-h") {
    usage(stdout);
    return 0;
  }
  if (args[0] == "version" || args[0] == "--version") {
    const std::string_view v = attn::version();
    std::printf("attn %.*s\n", static_cast<int>(v.size()), v.data());
    return 0;
  }
  const std::string cmd = args[0];
  args.erase(args.begin());
  try {
    attn::runtime_config();  // the ATTN_* variables, validated: a bad value is reported here
    for (const auto& c : attn::cli::commands())
      if (cmd == c.name) return c.run(args);
    std::fprintf(stderr, "attn: unknown command '%s'\n\n", cmd.c_str());
    usage(stderr);
    return 2;
  } catch (const attn::Error& e) {
    std::fprintf(stderr, "attn %s: error: %s\n(run 'attn %s --help' for usage)\n", cmd.c_str(), e.what(),
                 cmd.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn %s: unexpected error: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
