// attn train <task> [options]: trains a model for one task and writes it as one
// file (include/attn/models/task_model.h). Each task lives in its own file and is
// listed in train_tasks().
#include <attn/core/error.h>

#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"

namespace attn::cli {

const std::vector<Command>& train_tasks() {
  static const std::vector<Command> list = {
      {"classify", "text classifier (Chinese reviews by default) + naive Bayes baseline", run_train_classify},
  };
  return list;
}

namespace {

void train_usage(FILE* f) {
  std::fprintf(f, "usage: attn train <task> [options]\n\ntasks:\n");
  for (const auto& t : train_tasks()) std::fprintf(f, "  %-10s %s\n", t.name, t.summary);
  std::fprintf(f, "\nRun 'attn train <task> --help' for the options of one task.\n");
}

}  // namespace

int run_train(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    train_usage(args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  for (const auto& t : train_tasks())
    if (args[0] == t.name) return t.run(std::vector<std::string>(args.begin() + 1, args.end()));
  std::string names;
  for (const auto& t : train_tasks()) names += std::string(names.empty() ? "" : ", ") + t.name;
  throw Error("unknown task '" + args[0] + "'; expected one of: " + (names.empty() ? "(none built)" : names));
}

}  // namespace attn::cli
