#include <attn/core/error.h>
#include <attn/core/random.h>
#include <attn/data/split.h>
#include <attn/io/files.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <unordered_set>

namespace attn::data {
namespace {

std::string hex64(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
  return buf;
}

uint64_t parse_hex64(const std::string& s, const char* what) {
  ATTN_CHECK(s.size() == 18 && s.rfind("0x", 0) == 0 &&
                 s.find_first_not_of("0123456789abcdef", 2) == std::string::npos,
             "split: ", what, " must be \"0x\" and 16 lower-case hex digits; got \"", s, "\"");
  return std::stoull(s.substr(2), nullptr, 16);
}

const char* const kNames[3] = {"train", "valid", "test"};

}  // namespace

uint64_t dataset_hash(const Dataset& dataset) {
  uint64_t h = kFnvOffset;
  for (const Example& e : dataset.examples) {
    const uint32_t label = static_cast<uint32_t>(e.label);
    const char lb[4] = {static_cast<char>(label & 0xFF), static_cast<char>((label >> 8) & 0xFF),
                        static_cast<char>((label >> 16) & 0xFF), static_cast<char>(label >> 24)};
    h = fnv1a64(std::string_view(lb, 4), h);
    h = fnv1a64(e.text, h);
    h = fnv1a64(std::string_view("\0", 1), h);
    h = fnv1a64(e.pair, h);
    h = fnv1a64(std::string_view("\0", 1), h);
  }
  return h;
}

Split make_split(const Dataset& dataset, const SplitOptions& o) {
  const double f[3] = {o.train, o.valid, o.test};
  for (int i = 0; i < 3; ++i) {
    ATTN_CHECK(std::isfinite(f[i]) && f[i] >= 0 && f[i] <= 1, "split: the ", kNames[i],
               " fraction must be in [0, 1]; got ", f[i]);
  }
  ATTN_CHECK(std::fabs(f[0] + f[1] + f[2] - 1.0) < 1e-9, "split: fractions must sum to 1; got ", f[0], " + ",
             f[1], " + ", f[2], " = ", f[0] + f[1] + f[2]);
  ATTN_CHECK(dataset.size() > 0, "split: the dataset is empty");
  Split s;
  s.method = kSplitMethod;
  s.seed = o.seed;
  std::copy(f, f + 3, s.fractions);
  s.num_examples = dataset.size();
  s.input_hash = dataset_hash(dataset);
  bool labelled = !dataset.label_names.empty();
  for (const Example& e : dataset.examples) labelled = labelled && e.label >= 0;
  s.stratified = o.stratify && labelled;

  std::vector<std::vector<int64_t>> groups(s.stratified ? dataset.label_names.size() : 1);
  for (int64_t i = 0; i < dataset.size(); ++i) {
    groups[s.stratified ? dataset.examples[i].label : 0].push_back(i);
  }
  Rng rng(o.seed);
  for (std::vector<int64_t>& g : groups) {
    rng.shuffle(g);
    const int64_t n = static_cast<int64_t>(g.size());
    const int64_t n_valid = std::llround(static_cast<double>(n) * f[1]);
    const int64_t n_test = std::min<int64_t>(n - n_valid, std::llround(static_cast<double>(n) * f[2]));
    const int64_t n_train = n - n_valid - n_test;
    s.train.insert(s.train.end(), g.begin(), g.begin() + n_train);
    s.valid.insert(s.valid.end(), g.begin() + n_train, g.begin() + n_train + n_valid);
    s.test.insert(s.test.end(), g.begin() + n_train + n_valid, g.end());
  }
  std::sort(s.train.begin(), s.train.end());
  std::sort(s.valid.begin(), s.valid.end());
  std::sort(s.test.begin(), s.test.end());
  return s;
}

void check_split(const Split& s, const Dataset& dataset) {
  ATTN_CHECK(s.num_examples == dataset.size(), "split: made for ", s.num_examples,
             " examples; the dataset has ", dataset.size());
  const uint64_t h = dataset_hash(dataset);
  ATTN_CHECK(s.input_hash == h, "split: made for data with hash ", hex64(s.input_hash),
             "; this dataset hashes to ", hex64(h),
             " (different files, order, normalisation or deduplication)");
  std::vector<char> seen(dataset.size(), 0);
  const std::vector<int64_t>* lists[3] = {&s.train, &s.valid, &s.test};
  for (int k = 0; k < 3; ++k) {
    for (std::size_t i = 0; i < lists[k]->size(); ++i) {
      const int64_t idx = (*lists[k])[i];
      ATTN_CHECK(idx >= 0 && idx < dataset.size(), "split: ", kNames[k], " index ", idx, " out of range [0, ",
                 dataset.size(), ")");
      ATTN_CHECK(i == 0 || (*lists[k])[i - 1] < idx, "split: ", kNames[k],
                 " indices are not strictly increasing at ", "position ", i);
      ATTN_CHECK(!seen[idx], "split: example ", idx, " is in ", kNames[k], " and in an earlier list");
      seen[idx] = 1;
    }
  }
  const auto missing = std::find(seen.begin(), seen.end(), 0);
  ATTN_CHECK(missing == seen.end(), "split: example ", missing - seen.begin(), " is in no list");
}

int64_t count_text_overlap(const Dataset& dataset, const std::vector<int64_t>& a,
                           const std::vector<int64_t>& b) {
  std::unordered_set<std::string> in_a;
  for (const int64_t i : a) in_a.insert(dataset.examples.at(i).text + '\0' + dataset.examples.at(i).pair);
  int64_t n = 0;
  for (const int64_t i : b) n += in_a.count(dataset.examples.at(i).text + '\0' + dataset.examples.at(i).pair);
  return n;
}

std::vector<int64_t> class_counts(const Dataset& dataset, const std::vector<int64_t>& indices) {
  std::vector<int64_t> c(dataset.label_names.size(), 0);
  for (const int64_t i : indices) {
    const int32_t l = dataset.examples.at(i).label;
    if (l >= 0 && l < static_cast<int32_t>(c.size())) ++c[l];
  }
  return c;
}

std::string Split::describe() const {
  char pct[64];
  std::snprintf(pct, sizeof pct, "%g/%g/%g", fractions[0] * 100, fractions[1] * 100, fractions[2] * 100);
  return detail::concat(method, (stratified ? " stratified" : " unstratified"), " seed=", hex64(seed), " ",
                        pct, " of ", num_examples, " (hash ", hex64(input_hash), "): train ", train.size(),
                        ", valid ", valid.size(), ", test ", test.size());
}

namespace {
// Everything but the checksum (version 2).
json::Value split_body(const Split& s);
std::string checksum_of(const Split& s) { return hex64(fnv1a64(json::dump(split_body(s)))); }
}  // namespace

json::Value Split::to_json() const {
  json::Value o = split_body(*this);
  o.set("checksum", json::Value::string(checksum_of(*this)));
  return o;
}

namespace {
json::Value split_body(const Split& s) {
  const auto& method = s.method;
  const auto& seed = s.seed;
  const auto& fractions = s.fractions;
  const auto& stratified = s.stratified;
  const auto& num_examples = s.num_examples;
  const auto& input_hash = s.input_hash;
  const auto& train = s.train;
  const auto& valid = s.valid;
  const auto& test = s.test;
  const auto list = [](const std::vector<int64_t>& v) {
    json::Value a = json::Value::array();
    for (const int64_t i : v) a.push_back(json::Value::integer(i));
    return a;
  };
  json::Value o = json::Value::object();
  o.set("format", json::Value::string("attn-split"));
  o.set("version", json::Value::integer(2));
  o.set("method", json::Value::string(method));
  o.set("seed", json::Value::string(hex64(seed)));
  json::Value fr = json::Value::array();
  for (const double f : fractions) fr.push_back(json::Value::number(f));
  o.set("fractions", fr);
  o.set("stratified", json::Value::boolean(stratified));
  o.set("num_examples", json::Value::integer(num_examples));
  o.set("input_hash", json::Value::string(hex64(input_hash)));
  json::Value counts = json::Value::object();
  counts.set("train", json::Value::integer(static_cast<int64_t>(train.size())));
  counts.set("valid", json::Value::integer(static_cast<int64_t>(valid.size())));
  counts.set("test", json::Value::integer(static_cast<int64_t>(test.size())));
  o.set("counts", counts);
  o.set("train", list(train));
  o.set("valid", list(valid));
  o.set("test", list(test));
  return o;
}
}  // namespace

Split Split::from_json(const json::Value& v) {
  ATTN_CHECK(v.is_object(), "split: expected a JSON object; got ", json::type_name(v.type()));
  ATTN_CHECK(v.find("format") && v.at("format").is_string() && v.at("format").as_string() == "attn-split",
             "split: not an attn split (\"format\" must be \"attn-split\")");
  const int64_t version = v.at("version").as_int64();
  ATTN_CHECK(version == 1 || version == 2, "split: version ", version, " is not supported (expected 1 or 2)");
  Split s;
  s.method = v.at("method").as_string();
  s.seed = parse_hex64(v.at("seed").as_string(), "seed");
  const json::Value& fr = v.at("fractions");
  ATTN_CHECK(fr.is_array() && fr.size() == 3, "split: \"fractions\" must be an array of 3 numbers");
  for (std::size_t i = 0; i < 3; ++i) s.fractions[i] = fr.at(i).as_double();
  s.stratified = v.at("stratified").as_bool();
  s.num_examples = v.at("num_examples").as_int64();
  s.input_hash = parse_hex64(v.at("input_hash").as_string(), "input_hash");
  std::vector<int64_t>* lists[3] = {&s.train, &s.valid, &s.test};
  for (int k = 0; k < 3; ++k) {
    for (const json::Value& i : v.at(kNames[k]).items()) lists[k]->push_back(i.as_int64());
    const int64_t count = v.at("counts").at(kNames[k]).as_int64();
    ATTN_CHECK(count == static_cast<int64_t>(lists[k]->size()), "split: counts.", kNames[k], " says ", count,
               " but the list holds ", lists[k]->size());
  }
  // Version 2 carries a checksum over all the other fields (version 1 files, which have none, still read).
  if (version >= 2) {
    const json::Value* sum = v.find("checksum");
    ATTN_CHECK(sum && sum->is_string(), "split: version 2 lacks its \"checksum\"");
    const std::string got = checksum_of(s);
    ATTN_CHECK(got == sum->as_string(), "split: the content is corrupt: its checksum is ", got, ", recorded ",
               sum->as_string(), " (a changed seed, fraction, hash or index)");
  }
  return s;
}

void Split::save(const std::string& path) const {
  io::write_file_atomically(path, json::dump(to_json()) + '\n', "split");
}

Split Split::load(const std::string& path) {
  const std::string bytes = io::read_file(path, "split: split file");
  try {
    return from_json(json::parse(bytes));
  } catch (const Error& e) {
    throw Error(detail::concat("split: '", path, "': ", e.what()));
  }
}

bool Split::operator==(const Split& o) const {
  return method == o.method && seed == o.seed && std::equal(fractions, fractions + 3, o.fractions) &&
         stratified == o.stratified && num_examples == o.num_examples && input_hash == o.input_hash &&
         train == o.train && valid == o.valid && test == o.test;
}

}  // namespace attn::data
