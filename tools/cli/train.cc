// attn train <task> [options]: trains a model for one task and writes it as one
// file (include/attn/models/task_model.h). Each task lives in its own file and is
// listed in train_tasks().
#include <attn/core/error.h>
#include <attn/core/precision.h>

#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"

namespace attn::cli {

const std::vector<Command>& train_tasks() {
  static const std::vector<Command> list = {
      {"lm", "a character language model on any UTF-8 text (for attn generate)", run_train_lm},
      {"classify", "text classifier (Chinese reviews by default) + naive Bayes baseline", run_train_classify},
      {"translate", "English -> Chinese Transformer on Tatoeba pairs, held-out BLEU", run_train_translate},
  };
  return list;
}

namespace {

void train_usage(FILE* f) {
  std::fprintf(f, "usage: attn train <task> [options]\n\ntasks:\n");
  for (const auto& t : train_tasks()) std::fprintf(f, "  %-10s %s\n", t.name, t.summary);
  std::fprintf(f, "\nRun 'attn train <task> --help' for the options of one task.\n");
  std::fprintf(f,
               "\nEvery task also takes --precision fp32|bf16: fp32 (default) or bf16 matrix products\n"
               "(bf16 operands, fp32 accumulation, on CPUs with AVX512_BF16; about 2x the GEMM speed).\n");
}

// Removes `--precision P` / `--precision=P` from a task's arguments and applies it.
std::vector<std::string> take_precision(const std::vector<std::string>& args) {
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string value;
    if (args[i] == "--precision") {
      ATTN_CHECK(i + 1 < args.size(), "--precision needs a value: fp32 or bf16");
      value = args[++i];
    } else if (args[i].rfind("--precision=", 0) == 0) {
      value = args[i].substr(12);
    } else {
      rest.push_back(args[i]);
      continue;
    }
    set_matmul_precision(parse_matmul_precision(value));
  }
  return rest;
}

}  // namespace

int run_train(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    train_usage(args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  for (const auto& t : train_tasks())
    if (args[0] == t.name)
      return t.run(take_precision(std::vector<std::string>(args.begin() + 1, args.end())));
  std::string names;
  for (const auto& t : train_tasks()) names += std::string(names.empty() ? "" : ", ") + t.name;
  throw Error("unknown task '" + args[0] + "'; expected one of: " + (names.empty() ? "(none built)" : names));
}

}  // namespace attn::cli
