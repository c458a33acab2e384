// `attn quiz`: a self-test on attention. Questions come from a seeded
// generator (quiz_generate.cc); every expected answer is computed by the
// engine or by arithmetic cross-checked against it (see quiz_internal.h).
//
// Modes: interactive (read answers from stdin, one per question; default),
// --answers FILE (the same, from a file, scriptable), --json (the quiz, and
// with --answers the results, as one JSON object), --print-answers (the key,
// in the format --answers reads).
#include <attn/core/error.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "args.h"
#include "commands.h"
#include "quiz_internal.h"

namespace attn::cli {
namespace {

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
         "Answers: numbers as decimals (0.24); positions counted from 1 as a list or range (1-3 or\n"
         "1,2,3); multiple choice as a letter (a, b, c) or the choice's text; 'quit' stops.\n\n"
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

// The answers of FILE: one per non-blank line not starting with '#', with line numbers.
struct AnswerLine {
  int64_t line;
  std::string text;
};
std::vector<AnswerLine> read_answers(const std::string& path) {
  std::error_code ec;
  ATTN_CHECK(!std::filesystem::is_directory(path, ec), "--answers: expected a readable file; '", path,
             "' is a directory");
  std::ifstream f(path);
  ATTN_CHECK(f.is_open(), "--answers: cannot read '", path, "' (no such file or no permission)");
  std::vector<AnswerLine> out;
  int64_t n = 0;
  for (std::string l; std::getline(f, l);) {
    ++n;
    if (n == 1 && l.compare(0, 3, "\xEF\xBB\xBF") == 0) l.erase(0, 3);  // a UTF-8 byte order mark
    const std::string t = trim(l);  // also drops the '\r' of CRLF line ends
    if (t.empty() || t[0] == '#') continue;
    out.push_back({n, t});
  }
  ATTN_CHECK(!f.bad(), "--answers: error while reading '", path, "'");
  return out;
}

std::string header(const Question& q, std::size_t index, std::size_t count) {
  std::string s = "Question " + std::to_string(index + 1) + " of " + std::to_string(count) + "  [" +
                  quiz::kind_name(q.kind) + " · " + q.topic + "]\n" + q.text + "\n";
  for (std::size_t c = 0; c < q.choices.size(); ++c)
    s += std::string("  ") + static_cast<char>('a' + c) + ") " + q.choices[c].text + "\n";
  return s + "Answer with " + q.how_to_answer() + ".\n";
}

std::string result_text(const Question& q, bool correct) {
  return correct ? "result: right (" + q.key() + ")\n"
                 : "result: wrong: the answer is " + q.key() +
                       (q.form == quiz::Form::choice
                            ? " (" + q.choices[static_cast<std::size_t>(q.answer)].text + ")"
                        : q.tolerance_text() == "exact" ? ""
                                                        : " (" + q.tolerance_text() + ")") +
                       "\n";
}

std::string solution_text(const Question& q) {
  return "Worked solution:\n" + quiz::indent_lines(q.solution, "  ") + "\n\n";
}

Json question_json(const Question& q, std::size_t index) {
  Json j = Json::object();
  j.set("number", static_cast<int64_t>(index + 1))
      .set("kind", quiz::kind_name(q.kind))
      .set("topic", q.topic)
      .set("text", q.text);
  if (q.form == quiz::Form::choice) {
    Json c = Json::array();
    for (const auto& ch : q.choices) c.push(ch.text);
    j.set("choices", std::move(c));
  }
  j.set("answer_form", q.form == quiz::Form::number      ? "number"
                       : q.form == quiz::Form::positions ? "positions"
                                                         : "choice")
      .set("how_to_answer", q.how_to_answer())
      .set("tolerance", q.tolerance_text());
  if (q.form == quiz::Form::number) j.set("abs_tol", q.abs_tol).set("rel_tol", q.rel_tol);
  if (q.form == quiz::Form::positions) j.set("max_position", q.max_position);
  j.set("expected", q.expected_json()).set("key", q.key()).set("solution", q.solution).set("data", q.data);
  return j;
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
  const int64_t count = args.has("count") ? args.integer("count", 1, kMaxCount) : kDefaultCount;
  const std::string kind_text = args.has("kind") ? args.str("kind") : "all";
  const std::optional<quiz::Kind> kind = quiz::parse_kind(kind_text);
  uint64_t seed = 0;
  if (args.has("seed")) {
    seed = static_cast<uint64_t>(args.integer("seed", 0, std::numeric_limits<int64_t>::max()));
  } else {
    std::random_device rd;
    seed = ((static_cast<uint64_t>(rd()) << 32) ^ rd()) & 0x7fffffffffffffffull;
  }
  // Read the answers before generating, so that a bad file fails fast.
  std::vector<AnswerLine> answers;
  if (args.has("answers")) answers = read_answers(args.str("answers"));

  const std::vector<Question> questions = quiz::generate(kind, count, seed);
  const std::string repeat = "attn quiz --seed " + std::to_string(seed) + " --count " +
                             std::to_string(count) + " --kind " + kind_text;

  if (args.has("print-answers")) {
    std::cout << "# answer key of: " << repeat << "\n# check answers with: " << repeat << " --answers FILE\n";
    for (std::size_t i = 0; i < questions.size(); ++i) {
      const Question& q = questions[i];
      std::cout << "# " << i + 1 << " " << quiz::kind_name(q.kind) << " " << q.topic << " ("
                << q.tolerance_text() << ")\n"
                << q.key() << "\n";
    }
    return 0;
  }

  // Check every answer of the file first: a malformed one is an error before any output.
  std::vector<Verdict> verdicts;
  if (args.has("answers")) {
    ATTN_CHECK(answers.size() == questions.size(), "--answers: '", args.str("answers"), "' has ",
               answers.size(), " answers; expected ", questions.size(),
               " (one per question; blank lines and lines starting with # are skipped)");
    for (std::size_t i = 0; i < questions.size(); ++i) {
      verdicts.push_back(quiz::check(questions[i], answers[i].text));
      ATTN_CHECK(verdicts.back().valid, "--answers: '", args.str("answers"), "' line ", answers[i].line,
                 " (question ", i + 1, "): ", verdicts.back().error);
    }
  }

  if (args.has("json")) {
    Json j = Json::object();
    j.set("command", "quiz")
        .set("seed", static_cast<int64_t>(seed))
        .set("kind", kind_text)
        .set("count", count)
        .set("repeat", repeat);
    Json qs = Json::array();
    int64_t right = 0;
    for (std::size_t i = 0; i < questions.size(); ++i) {
      Json qj = question_json(questions[i], i);
      if (!verdicts.empty()) {
        Json r = Json::object();
        r.set("answer", answers[i].text).set("correct", verdicts[i].correct);
        qj.set("result", std::move(r));
        right += verdicts[i].correct;
      }
      qs.push(std::move(qj));
    }
    j.set("questions", std::move(qs));
    if (!verdicts.empty()) {
      Json s = Json::object();
      s.set("right", right).set("total", static_cast<int64_t>(questions.size()));
      j.set("score", std::move(s));
    }
    std::cout << j.dump(2) << "\n";
    return 0;
  }

  std::cout << "attn quiz: " << count << (count == 1 ? " question" : " questions") << " ("
            << (kind ? std::string(quiz::kind_name(*kind)) : "all kinds") << "), seed " << seed
            << "\nSame quiz again: " << repeat << "\n\n";
  int64_t right = 0, answered = 0;
  if (args.has("answers")) {
    for (std::size_t i = 0; i < questions.size(); ++i) {
      const Question& q = questions[i];
      std::cout << header(q, i, questions.size()) << "your answer: " << answers[i].text << "\n"
                << result_text(q, verdicts[i].correct) << solution_text(q);
      right += verdicts[i].correct;
    }
    answered = static_cast<int64_t>(questions.size());
  } else {
    const bool echo_off = isatty(STDIN_FILENO) != 0;  // a terminal echoes what is typed
    bool eof = false;
    for (std::size_t i = 0; i < questions.size() && !eof; ++i) {
      const Question& q = questions[i];
      std::cout << header(q, i, questions.size());
      bool done = false;
      for (int tries = 1; tries <= kMaxTries && !done; ++tries) {
        std::cout << "answer> " << std::flush;
        std::string line;
        if (!std::getline(std::cin, line)) {
          eof = true;
          break;
        }
        if (!echo_off) std::cout << line << "\n";  // piped input: show it, so the transcript reads well
        if (trim(line) == "quit") {
          eof = true;
          break;
        }
        const Verdict v = quiz::check(q, line);
        if (!v.valid) {
          std::cout << "could not read that: " << v.error << "\n";
          if (tries < kMaxTries) {
            std::cout << "Try again (" << kMaxTries - tries << (kMaxTries - tries == 1 ? " try" : " tries")
                      << " left).\n";
          } else {
            std::cout << "No valid answer after " << kMaxTries << " tries; counted as wrong.\n"
                      << result_text(q, false) << solution_text(q);
            ++answered;
          }
          continue;
        }
        done = true;
        ++answered;
        right += v.correct;
        std::cout << result_text(q, v.correct) << solution_text(q);
      }
    }
    if (eof) std::cout << "\n(stopped after " << answered << " of " << questions.size() << " questions)\n";
  }
  std::cout << "score: " << right << "/" << answered << "\n";
  return 0;
}

}  // namespace attn::cli
