#include <attn/core/config.h>
#include <attn/core/error.h>
#include <attn/data/reader.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/text/utf8.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace attn::data {
namespace {

// The file's bytes with a leading BOM removed, validated as UTF-8.
struct FileText {
  std::string bytes;
  std::size_t start = 0;  // 3 when a BOM was stripped
  std::string_view body() const { return std::string_view(bytes).substr(start); }
};

FileText read_validated(const std::string& path) {
  FileText f;
  f.bytes = io::read_file(path, "data: data file");
  f.start = text::starts_with_bom(f.bytes) ? 3 : 0;
  ATTN_CHECK(f.bytes.size() > f.start, "data: '", path, "' is empty (", f.bytes.size(), " bytes",
             f.start ? ", only a BOM" : "", "); expected at least one example");
  text::require_utf8(f.body(), {path, 1, static_cast<int64_t>(f.start)});
  return f;
}

// One physical line at a time; "\r\n" and "\n" both end a line.
class LineSplitter {
 public:
  explicit LineSplitter(std::string_view s) : s_(s) {}
  bool next(std::string_view* line, int64_t* number) {
    if (pos_ >= s_.size()) return false;
    std::size_t end = s_.find('\n', pos_);
    if (end == std::string_view::npos) end = s_.size();
    std::string_view l = s_.substr(pos_, end - pos_);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    *line = l;
    *number = ++line_;
    pos_ = end + 1;
    return true;
  }

 private:
  std::string_view s_;
  std::size_t pos_ = 0;
  int64_t line_ = 0;
};

// Normalises and cuts one text; nullopt when empty after normalisation.
std::optional<std::string> clean(std::string_view raw, const ReadOptions& o, ReadReport& report,
                                 const std::string& path, int64_t line) {
  std::u32string cps = text::normalize(text::decode_utf8(raw, {path, line, 0}), o.normalize);
  if (cps.empty()) {
    ATTN_CHECK(o.skip_empty, "data: '", path, "' line ", line, ": empty text (skip_empty is off)");
    ++report.empty_skipped;
    return std::nullopt;
  }
  if (static_cast<int64_t>(cps.size()) > o.max_chars) {
    cps.resize(o.max_chars);
    while (!cps.empty() && cps.back() == U' ') cps.pop_back();
    if (report.truncated++ == 0) report.first_truncated = detail::concat(path, " line ", line);
  }
  return text::encode_utf8(cps);
}

void check_options(const ReadOptions& o) {
  ATTN_CHECK(o.max_chars > 0, "data: max_chars must be > 0; got ", o.max_chars);
}

// Maps label strings to class ids (fixed list, or discovered then sorted).
class LabelMap {
 public:
  LabelMap(const TableSpec& spec, const std::string& path) : spec_(spec), path_(path) {
    for (std::size_t i = 0; i < spec.labels.size(); ++i) {
      ATTN_CHECK(ids_.emplace(spec.labels[i], static_cast<int32_t>(i)).second, "data: label '",
                 spec.labels[i], "' appears twice in TableSpec::labels");
    }
  }
  int32_t id(const std::string& label, int64_t line) {
    const auto it = ids_.find(label);
    if (it != ids_.end()) return it->second;
    ATTN_CHECK(spec_.labels.empty(), "data: '", path_, "' line ", line, ": label '", label,
               "' is not one of the ", spec_.labels.size(), " labels [", joined(spec_.labels), "]");
    ATTN_CHECK(spec_.max_classes <= 0 || static_cast<int32_t>(ids_.size()) < spec_.max_classes, "data: '",
               path_, "' line ", line, ": label '", label, "' would be class number ", ids_.size() + 1,
               "; the task allows ", spec_.max_classes, " (seen: ", joined(seen_), ")");
    const int32_t id = static_cast<int32_t>(ids_.size());
    ids_.emplace(label, id);
    seen_.push_back(label);
    return id;
  }
  // Final names; with discovery the ids are re-assigned in sorted order.
  std::vector<std::string> finish(std::vector<Example>& examples) const {
    if (!spec_.labels.empty()) return spec_.labels;
    std::vector<std::string> sorted = seen_;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int32_t> remap(seen_.size());
    for (std::size_t i = 0; i < seen_.size(); ++i) {
      remap[i] =
          static_cast<int32_t>(std::lower_bound(sorted.begin(), sorted.end(), seen_[i]) - sorted.begin());
    }
    for (Example& e : examples) {
      if (e.label >= 0) e.label = remap[e.label];
    }
    return sorted;
  }

 private:
  static std::string joined(const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& x : v) s += (s.empty() ? "'" : ", '") + x + "'";
    return s;
  }
  const TableSpec& spec_;
  const std::string& path_;
  std::unordered_map<std::string, int32_t> ids_;
  std::vector<std::string> seen_;
};

struct Record {
  std::vector<std::string> fields;
  int64_t line = 0;
  bool blank = false;
};

std::vector<Record> parse_tsv(std::string_view s) {
  std::vector<Record> out;
  LineSplitter lines(s);
  std::string_view l;
  int64_t n;
  while (lines.next(&l, &n)) {
    Record r;
    r.line = n;
    r.blank = l.find_first_not_of(" \t") == std::string_view::npos && l.find('\t') == std::string_view::npos;
    std::size_t start = 0;
    while (true) {
      const std::size_t tab = l.find('\t', start);
      r.fields.emplace_back(l.substr(start, tab == std::string_view::npos ? l.size() - start : tab - start));
      if (tab == std::string_view::npos) break;
      start = tab + 1;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<Record> parse_csv(std::string_view s, const std::string& path) {
  std::vector<Record> out;
  std::size_t i = 0;
  int64_t line = 1;
  while (i < s.size()) {
    Record r;
    r.line = line;
    bool any_quoted = false;
    while (true) {  // one field per iteration
      std::string field;
      if (i < s.size() && s[i] == '"') {
        any_quoted = true;
        const int64_t open_line = line;
        ++i;
        while (true) {
          ATTN_CHECK(i < s.size(), "data: '", path, "' line ", open_line,
                     ": quoted field is not closed before the end of the file");
          if (s[i] == '"') {
            if (i + 1 < s.size() && s[i + 1] == '"') {
              field += '"';
              i += 2;
              continue;
            }
            ++i;
            break;
          }
          if (s[i] == '\n') ++line;
          field += s[i++];
        }
        const bool end_ok = i == s.size() || s[i] == ',' || s[i] == '\n' ||
                            (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n');
        ATTN_CHECK(end_ok, "data: '", path, "' line ", line,
                   ": after a closing quote expected ',' or the end of "
                   "the line; got '",
                   s[i], "' (a quote inside a quoted field is written \"\")");
      } else {
        while (i < s.size() && s[i] != ',' && s[i] != '\n' &&
               !(s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n')) {
          ATTN_CHECK(s[i] != '"', "data: '", path, "' line ", line,
                     ": a quote inside an unquoted field; RFC 4180 "
                     "needs the whole field in quotes, with \"\" for each quote");
          field += s[i++];
        }
      }
      r.fields.push_back(std::move(field));
      if (i < s.size() && s[i] == ',') {
        ++i;
        continue;
      }
      if (i < s.size() && s[i] == '\r') ++i;
      if (i < s.size() && s[i] == '\n') {
        ++i;
        ++line;
      }
      break;
    }
    r.blank = !any_quoted && r.fields.size() == 1 && r.fields[0].empty();
    out.push_back(std::move(r));
  }
  return out;
}

std::string label_string(const json::Value& v, const std::string& path, int64_t line,
                         const std::string& col) {
  if (v.is_string()) return v.as_string();
  if (v.is_integer()) return std::to_string(v.as_int64());
  if (v.is_bool()) return v.as_bool() ? "true" : "false";
  throw Error(detail::concat("data: '", path, "' line ", line, ": label '", col,
                             "' must be a string, an integer or a boolean; got ", json::type_name(v.type())));
}

}  // namespace

std::string ReadReport::describe() const {
  std::string s =
      detail::concat(records, " records, ", empty_skipped, " empty skipped, ", truncated, " truncated");
  if (truncated > 0) s += " (first: " + first_truncated + ")";
  return s;
}

void ReadReport::add(const ReadReport& o) {
  records += o.records;
  empty_skipped += o.empty_skipped;
  if (truncated == 0) first_truncated = o.first_truncated;
  truncated += o.truncated;
}

std::vector<std::string> Dataset::texts() const {
  std::vector<std::string> v;
  v.reserve(examples.size());
  for (const Example& e : examples) v.push_back(e.text);
  return v;
}

std::vector<std::string> Dataset::pairs() const {
  std::vector<std::string> v;
  v.reserve(examples.size());
  for (const Example& e : examples) v.push_back(e.pair);
  return v;
}

std::vector<int32_t> Dataset::labels() const {
  std::vector<int32_t> v;
  v.reserve(examples.size());
  for (const Example& e : examples) v.push_back(e.label);
  return v;
}

std::vector<int64_t> Dataset::class_counts() const {
  std::vector<int64_t> c(label_names.size(), 0);
  for (const Example& e : examples) {
    if (e.label >= 0 && e.label < static_cast<int32_t>(c.size())) ++c[e.label];
  }
  return c;
}

Dataset read_text_files(const std::vector<LabeledFile>& files, const ReadOptions& options) {
  check_options(options);
  ATTN_CHECK(!files.empty(), "data: read_text_files() got no files");
  Dataset ds;
  const bool labelled = files[0].label >= 0;
  for (const LabeledFile& f : files) {
    ATTN_CHECK((f.label >= 0) == labelled, "data: '", f.path, "' has label ", f.label, " but '",
               files[0].path, "' has ", files[0].label, "; label every file (ids >= 0) or none (-1)");
    if (!labelled) continue;
    if (static_cast<int32_t>(ds.label_names.size()) <= f.label) ds.label_names.resize(f.label + 1);
    const std::string name = f.label_name.empty() ? std::to_string(f.label) : f.label_name;
    ATTN_CHECK(ds.label_names[f.label].empty() || ds.label_names[f.label] == name, "data: label ", f.label,
               " is named both '", ds.label_names[f.label], "' and '", name, "'");
    ds.label_names[f.label] = name;
  }
  for (std::size_t i = 0; i < ds.label_names.size(); ++i) {
    if (ds.label_names[i].empty()) ds.label_names[i] = std::to_string(i);
  }
  for (std::size_t fi = 0; fi < files.size(); ++fi) {
    const LabeledFile& f = files[fi];
    const FileText ft = read_validated(f.path);
    ds.files.push_back(f.path);
    ReadReport rep;
    const std::size_t before = ds.examples.size();
    LineSplitter lines(ft.body());
    std::string_view l;
    int64_t n;
    while (lines.next(&l, &n)) {
      std::optional<std::string> t = clean(l, options, rep, f.path, n);
      if (!t) continue;
      ++rep.records;
      ds.examples.push_back({std::move(*t), "", f.label, static_cast<int32_t>(fi), n});
    }
    ATTN_CHECK(ds.examples.size() > before, "data: '", f.path, "' holds no examples (", rep.empty_skipped,
               " blank lines)");
    ds.report.add(rep);
  }
  return ds;
}

Dataset read_table(const std::string& path, const TableSpec& spec, const ReadOptions& options) {
  check_options(options);
  ATTN_CHECK(!spec.text_column.empty(), "data: TableSpec::text_column is required");
  const FileText ft = read_validated(path);
  Dataset ds;
  ds.files.push_back(path);
  const bool labelled = !spec.label_column.empty();
  const bool paired = !spec.pair_column.empty();
  LabelMap labels(spec, path);
  ReadReport& rep = ds.report;

  const auto add = [&](std::string_view text, std::string_view pair, const std::string* label, int64_t line) {
    ++rep.records;
    std::optional<std::string> t = clean(text, options, rep, path, line);
    if (!t) return;
    std::optional<std::string> p;
    if (paired) {
      p = clean(pair, options, rep, path, line);
      if (!p) return;
    }
    const int32_t id = labelled ? labels.id(*label, line) : -1;
    ds.examples.push_back({std::move(*t), p ? std::move(*p) : std::string(), id, 0, line});
  };

  if (spec.format == TableFormat::jsonl) {
    LineSplitter lines(ft.body());
    std::string_view l;
    int64_t n;
    while (lines.next(&l, &n)) {
      if (l.find_first_not_of(" \t") == std::string_view::npos) {
        ++rep.empty_skipped;
        continue;
      }
      json::Value v;
      try {
        v = json::parse(l);
      } catch (const Error& e) {
        throw Error(detail::concat("data: '", path, "' line ", n, ": ", e.what()));
      }
      ATTN_CHECK(v.is_object(), "data: '", path, "' line ", n, ": expected a JSON object; got ",
                 json::type_name(v.type()));
      const auto field = [&](const std::string& col) -> const json::Value& {
        const json::Value* f = v.find(col);
        if (f == nullptr) {
          std::string keys;
          for (const auto& m : v.members()) keys += (keys.empty() ? "" : ", ") + m.first;
          throw Error(
              detail::concat("data: '", path, "' line ", n, ": no member '", col, "' (members: ", keys, ")"));
        }
        return *f;
      };
      const auto text_of = [&](const std::string& col) -> const std::string& {
        const json::Value& f = field(col);
        ATTN_CHECK(f.is_string(), "data: '", path, "' line ", n, ": member '", col,
                   "' must be a string; got ", json::type_name(f.type()));
        return f.as_string();
      };
      const std::string& text = text_of(spec.text_column);
      const std::string pair = paired ? text_of(spec.pair_column) : std::string();
      const std::string label =
          labelled ? label_string(field(spec.label_column), path, n, spec.label_column) : "";
      add(text, pair, &label, n);
    }
  } else {
    const bool tsv = spec.format == TableFormat::tsv;
    std::vector<Record> records = tsv ? parse_tsv(ft.body()) : parse_csv(ft.body(), path);
    const char* kind = tsv ? "tab-separated" : "comma-separated";
    std::size_t first = 0;
    while (first < records.size() && records[first].blank) ++first;
    ATTN_CHECK(first < records.size(), "data: '", path, "' holds no records (only blank lines)");
    std::vector<std::string> names;
    if (spec.header) names = records[first++].fields;
    const std::size_t width = spec.header ? names.size() : records[first].fields.size();
    const auto column = [&](const std::string& col) -> std::size_t {
      if (spec.header) {
        const auto it = std::find(names.begin(), names.end(), col);
        if (it == names.end()) {
          std::string all;
          for (const std::string& c : names) all += (all.empty() ? "" : ", ") + c;
          throw Error(
              detail::concat("data: '", path, "': no column '", col, "' in the header (columns: ", all, ")"));
        }
        return static_cast<std::size_t>(it - names.begin());
      }
      ATTN_CHECK(!col.empty() && col.size() < 6 && col.find_first_not_of("0123456789") == std::string::npos,
                 "data: '", path, "': without a header, columns are 0-based indices; got '", col, "'");
      const std::size_t idx = std::stoul(col);
      ATTN_CHECK(idx < width, "data: '", path, "': column ", idx, " does not exist; line ",
                 records[first].line, " has ", width, " fields");
      return idx;
    };
    const std::size_t ti = column(spec.text_column);
    const std::size_t pi = paired ? column(spec.pair_column) : 0;
    const std::size_t li = labelled ? column(spec.label_column) : 0;
    for (std::size_t r = first; r < records.size(); ++r) {
      const Record& rec = records[r];
      if (rec.blank) {
        ++rep.empty_skipped;
        continue;
      }
      ATTN_CHECK(rec.fields.size() == width, "data: '", path, "' line ", rec.line, ": expected ", width, " ",
                 kind, " fields (as in ", spec.header ? "the header" : "the first line", "); got ",
                 rec.fields.size());
      add(rec.fields[ti], paired ? rec.fields[pi] : "", labelled ? &rec.fields[li] : nullptr, rec.line);
    }
  }
  ATTN_CHECK(!ds.examples.empty(), "data: '", path, "' holds no examples (", rep.records, " records, ",
             rep.empty_skipped, " empty)");
  if (labelled) ds.label_names = labels.finish(ds.examples);
  return ds;
}

std::string DedupReport::describe() const {
  return detail::concat(duplicates_removed, " duplicates removed, ", conflicting_texts,
                        " texts with conflicting labels (", conflicting_removed, " examples removed)");
}

Dataset deduplicate(const Dataset& dataset, DedupReport* report) {
  DedupReport rep;
  // (text, pair) -> first label, or -2 once conflicting.
  std::unordered_map<std::string, int32_t> label_of;
  const auto key = [](const Example& e) { return e.text + '\0' + e.pair; };
  for (const Example& e : dataset.examples) {
    auto [it, inserted] = label_of.emplace(key(e), e.label);
    if (!inserted && it->second != e.label && it->second != -2) {
      it->second = -2;
      ++rep.conflicting_texts;
    }
  }
  Dataset out;
  out.files = dataset.files;
  out.label_names = dataset.label_names;
  out.report = dataset.report;
  std::unordered_map<std::string, bool> kept;
  for (const Example& e : dataset.examples) {
    const std::string k = key(e);
    if (label_of.at(k) == -2) {
      ++rep.conflicting_removed;
      continue;
    }
    if (!kept.emplace(k, true).second) {
      ++rep.duplicates_removed;
      continue;
    }
    out.examples.push_back(e);
  }
  if (report != nullptr) *report = rep;
  return out;
}

namespace {

// $ATTN_DATA_DIR (read once, in core/config), or "" when it is not set or empty.
const std::string& data_dir_setting() { return runtime_config().data_dir; }

// The repository above the running program (build/<preset>/attn, a test binary):
// the first ancestor folder that holds scripts/fetch-reviews.sh; empty when none does.
std::filesystem::path repo_root() {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return {};
  for (fs::path p = exe.parent_path(); !p.empty() && p != p.parent_path(); p = p.parent_path())
    if (fs::exists(p / "scripts" / "fetch-reviews.sh", ec)) return p;
  return {};
}

}  // namespace

DataDirCandidates data_dir_candidates() {
  DataDirCandidates c;
  const std::string env = data_dir_setting();
  if (!env.empty()) {
    c.dirs = {env};
    c.from_env = true;
    return c;
  }
  c.dirs = {"../shared/data"};
  const std::filesystem::path repo = repo_root();
  if (!repo.empty()) {
    c.dirs.push_back((repo / ".." / "shared" / "data").lexically_normal().string());
    c.dirs.push_back((repo / "data").lexically_normal().string());
  }
  return c;
}

std::string find_data_dir(const std::vector<std::string>& required, const std::string& what,
                          const std::string& hint) {
  namespace fs = std::filesystem;
  const DataDirCandidates c = data_dir_candidates();
  for (const auto& d : c.dirs) {
    bool all = true;
    std::error_code ec;
    for (const auto& r : required) all = all && fs::is_regular_file(fs::path(d) / r, ec);
    if (all) return fs::path(d).lexically_normal().string();
  }
  std::string names, where;
  for (std::size_t i = 0; i < required.size(); ++i)
    names += (i == 0                     ? ""
              : i + 1 == required.size() ? " and "
                                         : ", ") +
             fs::path(required[i]).filename().string();
  for (const auto& d : c.dirs)
    for (const auto& r : required) where += "\n  " + (fs::path(d) / r).lexically_normal().string();
  throw Error("no " + what + " found: looked for " + names + " at" + where +
              (c.from_env ? " (from ATTN_DATA_DIR)" : "") +
              "\nscripts/fetch-reviews.sh downloads the reviews (into <repo>/data); ATTN_DATA_DIR names "
              "another data folder" +
              (hint.empty() ? std::string() : "\n" + hint));
}

std::string default_data_dir() {
  const DataDirCandidates c = data_dir_candidates();
  std::error_code ec;
  for (const auto& d : c.dirs)
    if (std::filesystem::is_directory(d, ec)) return d;
  return c.dirs.front();
}

}  // namespace attn::data
