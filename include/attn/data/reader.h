// Readers: files on disk -> normalised, labelled examples.
//
// Every reader
//   - fails with attn::Error naming the file when it is missing, unreadable,
//     empty (0 bytes or only a BOM) or holds no example;
//   - strips a UTF-8 BOM at the start of the file and validates the whole file
//     as strict UTF-8 first: invalid bytes are an error naming file, line and
//     byte offset (text/utf8.h), never passed through;
//   - normalises each text (text/normalize.h: controls dropped, whitespace
//     collapsed and trimmed, options for full-width and case);
//   - skips records whose text is empty after normalisation and counts them
//     (ReadOptions::skip_empty = false makes them an error naming the line);
//   - cuts texts longer than ReadOptions::max_chars code points and counts
//     them in ReadReport::truncated (never silently).
// Lines end with "\n" or "\r\n".
//
// Formats:
//   plain text  one example per line; the label is given per file
//               (read_text_files: pos.txt -> 1, neg.txt -> 0).
//   TSV         fields separated by one tab, no quoting; every line has the
//               same number of fields as the header (or the first line).
//   CSV         RFC 4180: comma separated; a field may be enclosed in double
//               quotes and then contain commas, line breaks and "" (a quote);
//               a quote inside an unquoted field, anything but a comma or the
//               line end after a closing quote, and a quote left open at the
//               end of the file are errors naming the line.
//   JSONL       one JSON object per line (attn::json, strict); columns are
//               member names; a label may be a string, an integer or a boolean.
// Labels are strings mapped to class ids (TableSpec::labels, or discovered
// and sorted); a label outside the fixed list, or one class more than
// TableSpec::max_classes allows (a third label in a binary task), is an error
// naming the line.
#pragma once

#include <attn/text/normalize.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attn::data {

struct Example {
  std::string text;    // normalised UTF-8
  std::string pair;    // second text (translation target); empty when the task has one text
  int32_t label = -1;  // class id into Dataset::label_names; -1 when unlabelled
  int32_t file = 0;    // index into Dataset::files
  int64_t line = 0;    // 1-based line where the record starts
};

struct ReadReport {
  int64_t records = 0;          // lines/records read, without header and blank lines
  int64_t empty_skipped = 0;    // blank lines and records whose text was empty after normalisation
  int64_t truncated = 0;        // texts cut to max_chars
  std::string first_truncated;  // "file line N" of the first cut text, for the log
  std::string describe() const;
  void add(const ReadReport& other);
};

struct Dataset {
  std::vector<Example> examples;
  std::vector<std::string> files;
  std::vector<std::string> label_names;  // class id -> label string; empty when unlabelled
  ReadReport report;

  int64_t size() const { return static_cast<int64_t>(examples.size()); }
  std::vector<std::string> texts() const;
  std::vector<std::string> pairs() const;
  std::vector<int32_t> labels() const;
  // Examples per class id (size label_names.size()).
  std::vector<int64_t> class_counts() const;
};

struct ReadOptions {
  text::NormalizeOptions normalize;
  int64_t max_chars = 4096;  // per text, in code points after normalisation (> 0)
  bool skip_empty = true;
};

struct LabeledFile {
  LabeledFile(std::string path_, int32_t label_ = -1, std::string label_name_ = "")
      : path(std::move(path_)), label(label_), label_name(std::move(label_name_)) {}
  std::string path;
  int32_t label;           // class id of every line; -1 = unlabelled
  std::string label_name;  // name for label_names; "" = the id in decimal
};

// Plain text, one example per line. All files labelled or all unlabelled.
Dataset read_text_files(const std::vector<LabeledFile>& files, const ReadOptions& options = {});

enum class TableFormat { tsv, csv, jsonl };

struct TableSpec {
  TableFormat format = TableFormat::tsv;
  bool header = true;               // TSV/CSV: the first record names the columns (JSONL: always by key)
  std::string text_column;          // a header name, or a 0-based index ("0") when header == false
  std::string pair_column;          // optional second text ("" = none)
  std::string label_column;         // optional ("" = unlabelled)
  std::vector<std::string> labels;  // fixed label strings -> ids 0..n-1; empty = discover
  int32_t max_classes = 0;          // when discovering: the most distinct labels allowed (2: binary); 0 = any
};

Dataset read_table(const std::string& path, const TableSpec& spec, const ReadOptions& options = {});

struct DedupReport {
  int64_t duplicates_removed = 0;   // later copies of an identical (text, pair, label)
  int64_t conflicting_texts = 0;    // distinct (text, pair) seen with more than one label
  int64_t conflicting_removed = 0;  // examples removed because their text has conflicting labels
  std::string describe() const;
};

// Keeps the first example of every distinct (text, pair); removes every copy
// of a (text, pair) that carries different labels. Order is preserved. Run it
// before splitting so that no text can be in both training and test data.
Dataset deduplicate(const Dataset& dataset, DedupReport* report = nullptr);

// The one data-folder lookup (the reviews, the Tatoeba pairs, benchmarks' text).
// Folders looked at, in order: $ATTN_DATA_DIR alone when it is set (an explicit
// setting is never silently passed over); else ../shared/data (from the working
// directory), <repo>/../shared/data and <repo>/data, where <repo> is the first
// folder above the running program that holds scripts/fetch-reviews.sh.
struct DataDirCandidates {
  std::vector<std::string> dirs;
  bool from_env = false;  // dirs is {$ATTN_DATA_DIR}
};
DataDirCandidates data_dir_candidates();

// The first candidate folder holding every file in `required` (paths relative to
// the folder, e.g. "reviews-zh/pos.txt"). Throws attn::Error "no <what> found"
// naming every path looked at, scripts/fetch-reviews.sh and `hint` (what else the
// caller accepts, e.g. "or give --data FILE") when none does.
std::string find_data_dir(const std::vector<std::string>& required, const std::string& what,
                          const std::string& hint = "");

// The first candidate folder that exists, else the first candidate.
std::string default_data_dir();

}  // namespace attn::data
