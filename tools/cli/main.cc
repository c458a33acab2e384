// attn: one binary, subcommands. Catches every error at main and prints the
// message plus a hint; exits non-zero on failure.
#include <attn/core/config.h>
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/version.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "commands.h"

namespace {

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: attn [--max-input-mb N] <command> [options]\n\n"
      "commands:\n"
      "  explain   walk through Attention(Q,K,V) = softmax(QK^T/sqrt(d_k))V step by step\n"
      "  quiz      test yourself on attention: weights, masks, parameters, path lengths\n"
      "  tutorial  the self-attention tutorial section by section, computed (--lang zh|en)\n"
      "  view      see attention: a self-contained HTML viewer page or a terminal heatmap\n"
      "  train     train a model on real data: attn train <task> (run 'attn train' for the tasks)\n"
      "  classify  label texts with a trained classifier and show what [CLS] attended to\n"
      "  translate English -> Chinese with a trained model, and what each character attended to\n"
      "  generate  continue a prompt: SmolLM2 (GGUF, default) or an 'attn train lm' model (--model FILE)\n"
      "  chat      talk to SmolLM2-135M-Instruct, one line per turn (interactive or piped)\n"
      "  embed     sentence embeddings (all-MiniLM-L6-v2) as json, npy or csv\n"
      "  similarity  cosine similarity of two texts (all-MiniLM-L6-v2)\n"
      "  search    semantic search over the lines of a file: attn search --corpus FILE QUERY\n"
      "  rerank    score documents against a query with a cross-encoder: attn rerank --model DIR Q DOC...\n"
      "  attention a pretrained model's attention on a text: attn attention --model minilm TEXT\n"
#ifdef ATTN_HAVE_SERVE
      "  serve     an OpenAI-compatible HTTP server: attn serve --embed minilm --generate smollm2\n"
#endif
      "  version   print the version (also: attn --version)\n"
      "  help      this text\n\n"
      "Run 'attn <command> --help' for the options of one command.\n\n"
      "global option (before the command):\n"
      "  --max-input-mb N  largest input file read whole, in MiB, 1..1048576 (default 256): data sets,\n"
      "                    --file, --corpus, stdin, exports, --answers, vocabularies, configs, splits\n");
}

// Standard output, flushed and checked once for every command: a write that failed (a full disk,
// /dev/full, a closed pipe) is an error, never a silent exit 0.
int finish(int rc, const std::string& cmd) {
  // A write that failed earlier (stdio writes whenever its buffer fills) left its errno; keep it when
  // it is one a write gives, for the message.
  const int earlier = errno;
  const bool write_errno = earlier == ENOSPC || earlier == EDQUOT || earlier == EFBIG || earlier == EIO ||
                           earlier == EPIPE || earlier == EBADF;
  errno = 0;
  std::cout.flush();  // synced with stdio: this flushes stdout too, and may fail first
  const int cout_err = errno;
  const bool flushed = std::fflush(stdout) == 0;
  const int err = errno ? errno : cout_err ? cout_err : write_errno ? earlier : 0;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return rc;
  std::fprintf(stderr, "attn%s%s: error: cannot write to standard output: %s\n", cmd.empty() ? "" : " ",
               cmd.c_str(), err ? std::strerror(err) : "a write failed");
  return rc != 0 ? rc : 1;
}

// Model files are memory-mapped. When one is truncated or rewritten in place while attn runs, the
// next read of a page that is gone raises SIGBUS: report it as an error (exit 1) instead of dying
// with a bare signal. Only async-signal-safe calls here.
extern "C" void on_mapped_file_fault(int) {
  static const char msg[] =
      "attn: error: a model file that attn was reading (memory-mapped) was truncated or overwritten in place "
      "while in use (SIGBUS); replace model files by writing a new file and renaming it over the old one\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
  _exit(1);
}

void report_mapped_file_faults() {
  struct sigaction sa {};
  sa.sa_handler = on_mapped_file_fault;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGBUS, &sa, nullptr);
}

// The global options before the command; throws attn::Error for a bad one.
void take_global_options(std::vector<std::string>& args) {
  while (!args.empty() && args[0].rfind("--max-input-mb", 0) == 0) {
    std::string v;
    if (args[0] == "--max-input-mb") {
      ATTN_CHECK(args.size() >= 2, "--max-input-mb: expected a number of MiB after it; got nothing");
      v = args[1];
      args.erase(args.begin(), args.begin() + 2);
    } else if (args[0].rfind("--max-input-mb=", 0) == 0) {
      v = args[0].substr(15);
      args.erase(args.begin());
    } else {
      return;
    }
    char* end = nullptr;
    errno = 0;
    const long long mb = std::strtoll(v.c_str(), &end, 10);
    ATTN_CHECK(!v.empty() && v[0] >= '0' && v[0] <= '9' && end && *end == '\0' && errno == 0 && mb >= 1 &&
                   mb <= 1048576,
               "--max-input-mb: expected a whole number of MiB in [1, 1048576]; got '", v, "'");
    attn::io::set_default_read_limit(static_cast<uint64_t>(mb) << 20);
  }
}

int run(std::vector<std::string> args) {
  try {
    take_global_options(args);
  } catch (const attn::Error& e) {
    std::fprintf(stderr, "attn: error: %s\n(run 'attn help' for usage)\n", e.what());
    return 2;
  }
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

}  // namespace

int main(int argc, char** argv) {
  report_mapped_file_faults();
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string cmd;  // for the message of a failed write: the command after the global options
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--max-input-mb") {
      ++i;
    } else if (args[i].rfind("--", 0) != 0) {
      cmd = args[i];
      break;
    } else if (args[i].rfind("--max-input-mb=", 0) != 0) {
      break;
    }
  }
  const int rc = run(std::move(args));
  return finish(rc, cmd);
}
