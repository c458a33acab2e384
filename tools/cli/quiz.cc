// `attn quiz`: a self-test on attention. The quiz, its texts, answers files
// and the JSON come from the library (attn/teach/quiz.h); this file reads the
// flags and, in the interactive mode, the answers from stdin.
//
// Modes: interactive (read answers from stdin, one per question; default),
// --answers FILE (the same, from a file, scriptable), --json (the quiz, and
// with --answers the results, as one JSON object), --print-answers (the key,
// in the format --answers reads).
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/teach/quiz.h>
#include <attn/teach/report.h>
#include <unistd.h>

#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"

namespace attn::cli {
namespace {

namespace quiz = teach::quiz;
using quiz::Question;
using quiz::Verdict;

constexpr int64_t kDefaultCount = 5;
constexpr int64_t kMaxCount = 1000;
constexpr int kMaxTries = 3;  // malformed answers in a row before a question counts as wrong

const std::vector<OptionSpec>& quiz_options() {
  static const std::vector<OptionSpec> specs = {
      {"count", "N", "number of questions, 1..1000 (default 5)"},
      {"kind", "KIND",
       "numeric | structure | path | all (default all: the kinds take turns,\n"
       "so every 3 consecutive questions cover all three)"},
      {"seed", "S",
       "make the quiz reproducible: the same seed gives the same questions and\n"
       "numbers (default: a random seed, printed so the quiz can be repeated)"},
      {"answers", "FILE",
       "read the answers from FILE, one per line, instead of asking (blank lines\n"
       "and lines starting with # are skipped); prints each result"},
      {"json", "",
       "print the quiz as one JSON object: questions, expected answers,\n"
       "solutions, and with --answers the results and score"},
      {"print-answers", "", "print the answer key (in the format --answers reads) instead of asking"},
      {"help", "", "this text"},
  };
  return specs;
}

std::string help_text() {
  return "usage: attn quiz [options]\n\n"
         "A self-test on attention with three kinds of questions:\n"
         "  numeric    softmax weights from given scores, q·k/√d_k of small vectors, and what\n"
         "             √d_k does to softmax saturation\n"
         "  structure  which positions a causal or window mask lets a query see, where Q, K, V come\n"
         "             from in cross-attention, parameters and FLOPs of multi-head attention,\n"
         "             encoder / decoder / both for a task, where a classifier reads its label\n"
         "  path       steps between two positions in an RNN against (windowed) self-attention\n"
         "Every expected answer is computed by the attn engine or by arithmetic checked against it.\n"
         "After each answer you see whether it was right and a worked solution; at the end, the score.\n\n"
         "Answers: numbers as decimals (0.24); positions counted from 0 as a list or range (0-2 or\n"
         "0,1,2); multiple choice as a letter (a, b, c) or the choice's text; 'quit' stops.\n\n"
         "Options:\n" +
         format_options(quiz_options()) +
         "\nExamples:\n"
         "  attn quiz\n"
         "  attn quiz --kind numeric --count 3 --seed 7\n"
         "  attn quiz --seed 7 --print-answers > key.txt && attn quiz --seed 7 --answers key.txt\n"
         "  attn quiz --seed 7 --answers mine.txt --json | python3 -m json.tool\n\n"
         "Exit status 0 when the quiz ran (whatever the score); 1 for bad options, an unreadable\n"
         "answers file or a malformed answer in it. More: docs/quiz.md\n";
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

// One question asked on stdin, up to kMaxTries readable answers. Returns false at end
// of input or 'quit'; adds to `answered` and `right`.
bool ask(const teach::Quiz& quiz, std::size_t i, bool echo, int64_t& answered, int64_t& right) {
  const Question& q = quiz.questions[i];
  std::cout << teach::question_text(quiz, i);
  for (int tries = 1; tries <= kMaxTries; ++tries) {
    std::cout << "answer> " << std::flush;
    std::string line;
    if (!io::read_line(std::cin, line, "standard input")) return false;
    if (echo) std::cout << line << "\n";  // piped input: show it, so the transcript reads well
    if (trim(line) == "quit") return false;
    const Verdict v = quiz::check(q, line);
    if (v.valid) {
      ++answered;
      right += v.correct;
      std::cout << teach::result_text(q, v.correct) << teach::solution_text(q);
      return true;
    }
    std::cout << "could not read that: " << v.error << "\n";
    if (tries < kMaxTries)
      std::cout << "Try again (" << kMaxTries - tries << (kMaxTries - tries == 1 ? " try" : " tries")
                << " left).\n";
  }
  std::cout << "No valid answer after " << kMaxTries << " tries; counted as wrong.\n"
            << teach::result_text(q, false) << teach::solution_text(q);
  ++answered;
  return true;
}

// The interactive quiz: one answer per question from stdin.
void interactive(const teach::Quiz& quiz) {
  std::cout << teach::quiz_intro(quiz);
  const bool echo = isatty(STDIN_FILENO) == 0;  // a terminal echoes what is typed
  int64_t right = 0, answered = 0;
  bool stopped = false;
  for (std::size_t i = 0; i < quiz.questions.size() && !stopped; ++i)
    stopped = !ask(quiz, i, echo, answered, right);
  if (stopped)
    std::cout << "\n(stopped after " << answered << " of " << quiz.questions.size() << " questions)\n";
  std::cout << teach::score_text(right, answered);
}

}  // namespace

int run_quiz(const std::vector<std::string>& argv) {
  const Args args(argv, quiz_options());
  if (args.has("help")) {
    std::cout << help_text();
    return 0;
  }
  ATTN_CHECK(!(args.has("print-answers") && args.has("answers")),
             "--print-answers and --answers do not go together: print the key, or check answers");
  ATTN_CHECK(!(args.has("print-answers") && args.has("json")),
             "--print-answers and --json do not go together: the JSON already holds the expected answers");
  teach::QuizOptions o;
  o.count = args.has("count") ? args.integer("count", 1, kMaxCount) : kDefaultCount;
  o.kind = args.has("kind") ? args.str("kind") : "all";
  quiz::parse_kind(o.kind);  // a bad kind fails before the answers file is read
  if (args.has("seed")) {
    o.seed = static_cast<uint64_t>(args.integer("seed", 0, std::numeric_limits<int64_t>::max()));
  } else {
    std::random_device rd;
    o.seed = ((static_cast<uint64_t>(rd()) << 32) ^ rd()) & 0x7fffffffffffffffull;
  }
  // Read the answers before generating, so that a bad file fails fast.
  std::vector<teach::AnswerLine> answers;
  if (args.has("answers")) answers = teach::read_answers(args.str("answers"));
  const teach::Quiz quiz = teach::make_quiz(o);
  if (args.has("print-answers")) {
    std::cout << teach::answer_key(quiz);
    return 0;
  }
  // Check every answer of the file first: a malformed one is an error before any output.
  std::vector<Verdict> verdicts;
  if (args.has("answers")) verdicts = teach::check_answers(quiz, answers, args.str("answers"));
  if (args.has("json")) {
    std::cout << teach::json_text(teach::quiz_json(quiz, answers, verdicts)) << "\n";
  } else if (args.has("answers")) {
    std::cout << teach::answers_transcript(quiz, answers, verdicts);
  } else {
    interactive(quiz);
  }
  return 0;
}

}  // namespace attn::cli
