// attn train <task> [options]: trains a model for one task and writes it as one
// file (include/attn/models/task_model.h). Each task lives in its own file and is
// listed in train_tasks().
#include <attn/core/error.h>
#include <attn/core/precision.h>
#include <attn/train/comm.h>
#if ATTN_HAVE_MPI
#include <attn/train/mpi.h>
#endif

#include <cstdio>
#include <exception>
#include <memory>
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

// ---- data parallel over MPI ----
std::unique_ptr<train::Communicator>& world() {
  static std::unique_ptr<train::Communicator> c;
  return c;
}

// Under mpirun with N > 1 processes: the MPI communicator (MPI is finalised when
// the command returns); an error on any rank prints that rank's message and ends
// the whole job (MPI_Abort), so no rank waits forever for one that gave up.
int run_task(const Command& task, const std::vector<std::string>& args) {
  const int n = train::launcher_world_size();
  if (n <= 1) return task.run(args);
#if ATTN_HAVE_MPI
  world() = train::mpi_communicator();
  struct Finalize {
    ~Finalize() { world().reset(); }
  } finalize;
  try {
    return task.run(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "attn train %s: error (rank %d of %d): %s\n", task.name, world()->rank(),
                 world()->size(), e.what());
    world()->abort(1);
  }
  return 1;  // not reached: abort ends the process
#else
  throw Error("attn train was started by mpirun as one of " + std::to_string(n) +
              " processes, but this attn was built without MPI (ATTN_MPI=OFF); install openmpi-bin and "
              "libopenmpi-dev and rebuild, or run one process");
#endif
}
// ---- end data parallel over MPI

void train_usage(FILE* f) {
  std::fprintf(f, "usage: attn train <task> [options]\n\ntasks:\n");
  for (const auto& t : train_tasks()) std::fprintf(f, "  %-10s %s\n", t.name, t.summary);
  std::fprintf(f, "\nRun 'attn train <task> --help' for the options of one task.\n");
  std::fprintf(f,
               "\nEvery task also takes --precision fp32|bf16: fp32 (default) or bf16 matrix products\n"
               "(bf16 operands, fp32 accumulation, on CPUs with AVX512_BF16; about 2x the GEMM speed).\n");
  std::fprintf(f,
               "\nData parallel: mpirun -np N attn train <task> ... trains one model with N processes\n"
               "(each takes 1/N of every batch; rank 0 prints and writes; docs/training.md).\n");
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

train::Communicator* train_communicator() { return world().get(); }

int run_train(const std::vector<std::string>& args) {
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    train_usage(args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  for (const auto& t : train_tasks())
    if (args[0] == t.name)
      return run_task(t, take_precision(std::vector<std::string>(args.begin() + 1, args.end())));
  std::string names;
  for (const auto& t : train_tasks()) names += std::string(names.empty() ? "" : ", ") + t.name;
  throw Error("unknown task '" + args[0] + "'; expected one of: " + (names.empty() ? "(none built)" : names));
}

}  // namespace attn::cli
