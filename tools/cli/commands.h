// The registry of subcommands. Each command lives in its own file and
// returns the process exit code; it throws attn::Error on bad input.
#pragma once

#include <attn/models/text_decoder.h>

#include <string>
#include <vector>

#include "args.h"

namespace attn::train {
class Communicator;
}

namespace attn::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

const std::vector<Command>& commands();

int run_explain(const std::vector<std::string>& args);
int run_quiz(const std::vector<std::string>& args);
int run_tutorial(const std::vector<std::string>& args);  // tutorial.cc
int run_view(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_generate(const std::vector<std::string>& args);     // generate.cc
int run_generate_lm(const std::vector<std::string>& args);  // generate.cc: an attn task model file
int run_train_lm(const std::vector<std::string>& args);     // train_lm.cc
int run_train_classify(const std::vector<std::string>& args);
int run_classify(const std::vector<std::string>& args);
int run_translate(const std::vector<std::string>& args);
int run_train_translate(const std::vector<std::string>& args);
// A decoder on the runtime (generate_gguf.cc): smollm2, gemma3, a .gguf or a Hugging Face folder.
int run_generate_gguf(const std::vector<std::string>& args);
// Whether --model names such a decoder (empty: the default, smollm2).
bool is_decoder_model_arg(const std::string& model);
// Shared by the GGUF generate commands (generate_gguf.cc, translate, explain): a command's words split into
// options (for Args, each with the value it takes) and positional words; --max-new, --temperature, --top-k
// and
// --top-p as generation options, the text printed to stdout as it comes.
void split_positional(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs,
                      std::vector<std::string>& options, std::vector<std::string>& positional);
models::TextOptions text_options(const Args& a);
int run_chat(const std::vector<std::string>& args);
int run_embed(const std::vector<std::string>& args);
int run_similarity(const std::vector<std::string>& args);
int run_search(const std::vector<std::string>& args);
int run_attention(const std::vector<std::string>& args);
int run_rerank(const std::vector<std::string>& args);  // rerank_cmd.cc
int run_serve(const std::vector<std::string>& args);   // serve_cmd.cc (unless ATTN_SERVE=OFF)

// `attn train <task>`: one entry per task (train.cc lists them).
const std::vector<Command>& train_tasks();

// ---- data parallel over MPI (train.cc) ----
// The communicator of `mpirun -np N attn train <task>` (N > 1); null in one process.
// Tasks pass it in their options; only rank 0 prints progress and writes files.
train::Communicator* train_communicator();
// ---- end data parallel over MPI

}  // namespace attn::cli
