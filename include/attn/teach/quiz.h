// `attn quiz` as library functions: a self-test on attention. Questions come
// from a seeded generator (the same seed gives the same quiz); every expected
// answer is computed by the engine (attn::attention with weight capture, masks,
// log-sum-exp) or by arithmetic cross-checked against it. Positions in
// questions, answers and JSON are numbered from 0.
//
// The library makes the quiz, checks answers and writes every text and the
// JSON; reading answers from a person (stdin) is the caller's job.
#pragma once

#include <attn/io/json.h>
#include <attn/teach/lang.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attn::teach {
namespace quiz {

enum class Kind { numeric, structure, path };
const char* kind_name(Kind k);
// "numeric" | "structure" | "path" -> the kind; "all" -> nullopt. Throws otherwise.
std::optional<Kind> parse_kind(const std::string& s);

enum class Form {
  number,     // a decimal number within abs_tol (or rel_tol of the expected value)
  positions,  // a set of positions counted from 0: "0-3", "1,2,4", "2"
  choice,     // a letter a, b, c... or the text of a choice (or one of its aliases)
};

struct Choice {
  std::string text;                  // in the quiz's language
  std::vector<std::string> aliases;  // other accepted answers in either language ("encoder", "编码器")
};

struct Question {
  Lang lang = Lang::en;  // the language of text, choices, solution and the checker's messages
  Kind kind = Kind::numeric;
  std::string topic;  // e.g. "softmax-weight"
  std::string text;   // the question as a person reads it (may hold '\n')
  Form form = Form::number;

  double number = 0;   // Form::number: the exact expected value
  double abs_tol = 0;  // accepted |answer - number| (0: see rel_tol)
  double rel_tol = 0;  // accepted |answer - number| / |number|
  int decimals = 2;    // digits of the key

  std::vector<int64_t> positions;  // Form::positions: sorted, from 0
  int64_t max_position = 0;        // answers must lie in [0, max_position]

  std::vector<Choice> choices;  // Form::choice
  int answer = -1;              // index into choices

  std::string solution;                      // the worked solution (may hold '\n')
  json::Value data = json::Value::object();  // the question's inputs, for --json

  // The expected answer as text that check() accepts ("0.24", "0-3", "b").
  std::string key() const;
  // How to answer and the tolerance, e.g. "a number; right within ±0.01".
  std::string how_to_answer() const;
  std::string tolerance_text() const;  // "±0.01", "within 0.1%", "exact"
  json::Value expected_json() const;
};

struct Verdict {
  bool valid = false;    // the answer could be read
  bool correct = false;  // ... and is right
  std::string error;     // why it could not be read (when !valid)
};
// Reads `answer` in the question's form and compares it with the expected
// answer. Never throws: a malformed answer gives valid = false and a message
// (in q.lang). Answers are read in either language whatever q.lang is:
// full-width digits and punctuation (０．７６, －３, Ａ), 、 and ， between
// positions ("0、2、3"), 到/至/~ in ranges, a trailing ％ (24% = 0.24), a
// leading 约/≈, Chinese choice texts and synonyms (仅编码器, 编码器解码器, ...),
// and 是/对 or 否/错 for a choice whose aliases hold "yes" or "no".
Verdict check(const Question& q, const std::string& answer);
// The answer with full-width forms (U+FF01..U+FF5E) made ASCII, the
// ideographic space a space, 、 a comma, 。 a dot and minus signs '-'; trimmed.
std::string normalize_answer(const std::string& answer);

// `count` questions of `kind` (all kinds in turn when nullopt) from `seed`, in
// `lang`. The language never changes the draws: the same seed gives the same
// numbers, positions and choice order in both languages.
std::vector<Question> generate(std::optional<Kind> kind, int64_t count, uint64_t seed, Lang lang = Lang::en);
// The kind's name in `lang` ("numeric" | "数值", ...).
const char* kind_title(Kind k, Lang lang);

}  // namespace quiz

// ---- a whole quiz -----------------------------------------------------------------

struct QuizOptions {
  int64_t count = 5;         // 1..1000 questions
  std::string kind = "all";  // numeric | structure | path | all (the kinds take turns)
  uint64_t seed = 0;         // the same seed gives the same questions and numbers
  Lang lang = Lang::en;      // the language of questions, feedback and solutions
};

struct Quiz {
  QuizOptions options;
  std::vector<quiz::Question> questions;
  std::string repeat;  // the command that gives the same quiz: "attn quiz --seed S --count N --kind K"
};

// Generates the quiz. Throws attn::Error for a count outside 1..1000 or an unknown kind.
Quiz make_quiz(const QuizOptions& options);

// The texts a person reads.
std::string quiz_intro(const Quiz& quiz);  // what the quiz is and how to repeat it, then a blank line
// "Question 2 of 5  [kind · topic]", the question, its choices and how to answer.
std::string question_text(const Quiz& quiz, std::size_t index);
// "result: right (0.24)" or "result: wrong: the answer is ..." (one line; in q.lang:
// "结果：回答正确（0.24）" / "结果：回答错误，正确答案是 ...").
std::string result_text(const quiz::Question& q, bool correct);
std::string solution_text(const quiz::Question& q);  // the worked solution, then a blank line
std::string score_text(int64_t right, int64_t answered, Lang lang = Lang::en);  // "score: 3/5" | "得分：3/5…"
// The answer key, in the format read_answers reads (with # comment lines).
std::string answer_key(const Quiz& quiz);

// One answer of an answers file: its line number (from 1, as editors count) and text.
struct AnswerLine {
  int64_t line = 0;
  std::string text;
};
// The answers of a file: one per non-blank line not starting with '#' (a UTF-8
// byte order mark and CRLF line ends are accepted). Throws when it cannot be read.
std::vector<AnswerLine> read_answers(const std::string& path);
// Checks one answer per question; throws attn::Error naming the file (`path`),
// the line and the question when the count differs or an answer cannot be read.
std::vector<quiz::Verdict> check_answers(const Quiz& quiz, const std::vector<AnswerLine>& answers,
                                         const std::string& path);
// The transcript of a quiz answered from a file: intro, every question with
// the answer given, its result and solution, and the score.
std::string answers_transcript(const Quiz& quiz, const std::vector<AnswerLine>& answers,
                               const std::vector<quiz::Verdict>& verdicts);
// The quiz as one JSON object; with answers (and their verdicts) the results and score.
json::Value quiz_json(const Quiz& quiz, const std::vector<AnswerLine>& answers = {},
                      const std::vector<quiz::Verdict>& verdicts = {});

}  // namespace attn::teach
