// The quiz as a whole (attn/teach/quiz.h): generating it from the options,
// the texts a person reads, answers files and the JSON.
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/teach/quiz.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "quiz_internal.h"

namespace attn::teach {
namespace {

constexpr int64_t kMaxCount = 1000;

using quiz::Question;
using quiz::Verdict;

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

const char* form_name(quiz::Form f) {
  return f == quiz::Form::number ? "number" : f == quiz::Form::positions ? "positions" : "choice";
}

json::Value question_json(const Question& q, std::size_t index) {
  json::Value j = json::Value::object();
  put(j, {{"number", jv(index + 1)},
          {"kind", jv(quiz::kind_name(q.kind))},
          {"topic", jv(q.topic)},
          {"text", jv(q.text)}});
  if (q.form == quiz::Form::choice) {
    json::Value c = json::Value::array();
    for (const auto& ch : q.choices) c.push_back(jv(ch.text));
    j.set("choices", std::move(c));
  }
  put(j, {{"answer_form", jv(form_name(q.form))},
          {"how_to_answer", jv(q.how_to_answer())},
          {"tolerance", jv(q.tolerance_text())}});
  if (q.form == quiz::Form::number) put(j, {{"abs_tol", jv(q.abs_tol)}, {"rel_tol", jv(q.rel_tol)}});
  if (q.form == quiz::Form::positions) j.set("max_position", jv(q.max_position));
  put(j, {{"expected", q.expected_json()},
          {"key", jv(q.key())},
          {"solution", jv(q.solution)},
          {"data", q.data}});
  return j;
}

}  // namespace

Quiz make_quiz(const QuizOptions& options) {
  ATTN_CHECK(options.count >= 1 && options.count <= kMaxCount, "--count must be in [1, ", kMaxCount,
             "]; got ", options.count);
  Quiz q;
  q.options = options;
  q.questions = quiz::generate(quiz::parse_kind(options.kind), options.count, options.seed, options.lang);
  q.repeat = "attn quiz --seed " + std::to_string(options.seed) + " --count " +
             std::to_string(options.count) + " --kind " + options.kind +
             (options.lang == Lang::zh ? " --lang zh" : "");
  return q;
}

std::string quiz_intro(const Quiz& quiz) {
  const int64_t count = quiz.options.count;
  const auto kind = quiz::parse_kind(quiz.options.kind);
  if (quiz.options.lang == Lang::zh)
    return "attn quiz：" + std::to_string(count) + " 道题（" +
           (kind ? std::string(quiz::kind_title(*kind, Lang::zh)) + "题" : std::string("全部题型")) +
           "），种子 " + std::to_string(quiz.options.seed) + "\n再做一次同样的测验：" + quiz.repeat +
           "\n题目对应教程的各节：路径长度（1.2 节）、缩放点积注意力与 "
           "softmax、多头注意力、掩码与交叉注意力（attn tutorial 逐节讲解）。\n\n";
  return "attn quiz: " + std::to_string(count) + (count == 1 ? " question" : " questions") + " (" +
         (kind ? std::string(quiz::kind_name(*kind)) : "all kinds") + "), seed " +
         std::to_string(quiz.options.seed) + "\nSame quiz again: " + quiz.repeat +
         "\nThe questions follow the tutorial's sections: path length (section 1.2), scaled dot-product "
         "attention\nand softmax, multi-head attention, masks and cross-attention (attn tutorial walks "
         "them).\n\n";
}

std::string question_text(const Quiz& quiz, std::size_t index) {
  const Question& q = quiz.questions.at(index);
  const bool zh = q.lang == Lang::zh;
  std::string s =
      zh ? "第 " + std::to_string(index + 1) + " 题，共 " + std::to_string(quiz.questions.size()) + " 题  [" +
               quiz::kind_title(q.kind, q.lang) + " · " + q.topic + "]\n" + q.text + "\n"
         : "Question " + std::to_string(index + 1) + " of " + std::to_string(quiz.questions.size()) + "  [" +
               quiz::kind_name(q.kind) + " · " + q.topic + "]\n" + q.text + "\n";
  for (std::size_t c = 0; c < q.choices.size(); ++c)
    s += std::string("  ") + static_cast<char>('a' + c) + ") " + q.choices[c].text + "\n";
  return s + (zh ? "请回答" + q.how_to_answer() + "。\n" : "Answer with " + q.how_to_answer() + ".\n");
}

std::string result_text(const Question& q, bool correct) {
  if (q.lang == Lang::zh) {
    if (correct) return "结果：回答正确（" + q.key() + "）\n";
    const bool exact = q.form != quiz::Form::number || (q.abs_tol == 0 && q.rel_tol == 0);
    return "结果：回答错误，正确答案是 " + q.key() +
           (q.form == quiz::Form::choice ? "（" + q.choices[static_cast<std::size_t>(q.answer)].text + "）"
            : exact                      ? ""
                                         : "（" + q.tolerance_text() + "）") +
           "\n";
  }
  return correct ? "result: right (" + q.key() + ")\n"
                 : "result: wrong: the answer is " + q.key() +
                       (q.form == quiz::Form::choice
                            ? " (" + q.choices[static_cast<std::size_t>(q.answer)].text + ")"
                        : q.tolerance_text() == "exact" ? ""
                                                        : " (" + q.tolerance_text() + ")") +
                       "\n";
}

std::string solution_text(const Question& q) {
  return tr(q.lang, "Worked solution:\n", "详细解答：\n") + quiz::indent_lines(q.solution, "  ") + "\n\n";
}

std::string score_text(int64_t right, int64_t answered, Lang lang) {
  if (lang == Lang::zh)
    return "得分：" + std::to_string(right) + "/" + std::to_string(answered) + "（答对 " +
           std::to_string(right) + " 题，共答 " + std::to_string(answered) + " 题）\n";
  return "score: " + std::to_string(right) + "/" + std::to_string(answered) + "\n";
}

std::string answer_key(const Quiz& quiz) {
  std::string s = quiz.options.lang == Lang::zh
                      ? "# 答案：" + quiz.repeat + "\n# 核对答案：" + quiz.repeat + " --answers FILE\n"
                      : "# answer key of: " + quiz.repeat + "\n# check answers with: " + quiz.repeat +
                            " --answers FILE\n";
  for (std::size_t i = 0; i < quiz.questions.size(); ++i) {
    const Question& q = quiz.questions[i];
    s += "# " + std::to_string(i + 1) + " " + quiz::kind_title(q.kind, q.lang) + " " + q.topic + " (" +
         q.tolerance_text() + ")\n" + q.key() + "\n";
  }
  return s;
}

std::vector<AnswerLine> read_answers(const std::string& path) {
  std::error_code ec;
  ATTN_CHECK(!std::filesystem::is_directory(path, ec), "--answers: expected a readable file; '", path,
             "' is a directory");
  ATTN_CHECK(::access(path.c_str(), R_OK) == 0, "--answers: cannot read '", path,
             "' (no such file or no permission)");
  std::istringstream f(io::read_file(path, "--answers: answers file"));
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

std::vector<Verdict> check_answers(const Quiz& quiz, const std::vector<AnswerLine>& answers,
                                   const std::string& path) {
  const auto& questions = quiz.questions;
  ATTN_CHECK(answers.size() == questions.size(), "--answers: '", path, "' has ", answers.size(),
             " answers; expected ", questions.size(),
             " (one per question; blank lines and lines starting with # are skipped)");
  std::vector<Verdict> verdicts;
  for (std::size_t i = 0; i < questions.size(); ++i) {
    verdicts.push_back(quiz::check(questions[i], answers[i].text));
    ATTN_CHECK(verdicts.back().valid, "--answers: '", path, "' line ", answers[i].line, " (question ", i + 1,
               "): ", verdicts.back().error);
  }
  return verdicts;
}

std::string answers_transcript(const Quiz& quiz, const std::vector<AnswerLine>& answers,
                               const std::vector<Verdict>& verdicts) {
  ATTN_CHECK(answers.size() == quiz.questions.size() && verdicts.size() == quiz.questions.size(),
             "quiz: expected one answer and one verdict per question (", quiz.questions.size(), "); got ",
             answers.size(), " and ", verdicts.size());
  std::string s = quiz_intro(quiz);
  int64_t right = 0;
  for (std::size_t i = 0; i < quiz.questions.size(); ++i) {
    const Question& q = quiz.questions[i];
    s += question_text(quiz, i) + tr(quiz.options.lang, "your answer: ", "你的答案：") + answers[i].text +
         "\n" + result_text(q, verdicts[i].correct) + solution_text(q);
    right += verdicts[i].correct;
  }
  return s + score_text(right, static_cast<int64_t>(quiz.questions.size()), quiz.options.lang);
}

json::Value quiz_json(const Quiz& quiz, const std::vector<AnswerLine>& answers,
                      const std::vector<Verdict>& verdicts) {
  ATTN_CHECK(
      verdicts.size() == answers.size() && (answers.empty() || answers.size() == quiz.questions.size()),
      "quiz: expected no answers or one answer and verdict per question (", quiz.questions.size(), "); got ",
      answers.size(), " answers and ", verdicts.size(), " verdicts");
  json::Value j = json::Value::object();
  put(j, {{"command", jv("quiz")},
          {"lang", jv(lang_name(quiz.options.lang))},
          {"seed", jv(static_cast<int64_t>(quiz.options.seed))},
          {"kind", jv(quiz.options.kind)},
          {"count", jv(quiz.options.count)},
          {"repeat", jv(quiz.repeat)}});
  json::Value qs = json::Value::array();
  int64_t right = 0;
  for (std::size_t i = 0; i < quiz.questions.size(); ++i) {
    json::Value qj = question_json(quiz.questions[i], i);
    if (!verdicts.empty()) {
      qj.set("result",
             json::Value::object({{"answer", jv(answers[i].text)}, {"correct", jv(verdicts[i].correct)}}));
      right += verdicts[i].correct;
    }
    qs.push_back(std::move(qj));
  }
  j.set("questions", std::move(qs));
  if (!verdicts.empty())
    j.set("score", json::Value::object(
                       {{"right", jv(right)}, {"total", jv(static_cast<int64_t>(quiz.questions.size()))}}));
  return j;
}

}  // namespace attn::teach
