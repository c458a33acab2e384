// One model's tensors over one safetensors file or its shards (include/attn/io/safetensors_set.h).
#include <attn/core/error.h>
#include <attn/io/files.h>
#include <attn/io/json.h>
#include <attn/io/safetensors_set.h>
#include <sys/stat.h>

#include <algorithm>

namespace attn::io {
namespace {

bool regular_file(const std::string& p) {
  struct stat sb {};
  return ::stat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
}

// A shard's file name as the index gives it: a plain name inside the folder.
void check_shard_name(const std::string& index, const std::string& tensor, const std::string& file) {
  ATTN_CHECK(!file.empty() && file.find('/') == std::string::npos && file.find('\\') == std::string::npos &&
                 file != "." && file != "..",
             index, ": weight_map[\"", tensor, "\"] is \"", file,
             "\"; expected the file name of a shard in the same folder (no path)");
}

}  // namespace

bool SafeTensorsSet::folder_has_weights(const std::string& dir) {
  return regular_file(dir + "/model.safetensors") || regular_file(dir + "/model.safetensors.index.json");
}

SafeTensorsSet SafeTensorsSet::open_file(const std::string& path) {
  SafeTensorsSet s;
  s.source_ = path;
  s.files_.push_back(SafeTensorsFile::open(path));
  for (const std::string& n : s.files_[0].names()) s.where_.emplace(n, 0);
  return s;
}

SafeTensorsSet SafeTensorsSet::open_folder(const std::string& dir) {
  const std::string index = dir + "/model.safetensors.index.json";
  if (!regular_file(index)) {
    ATTN_CHECK(
        regular_file(dir + "/model.safetensors"), dir,
        " holds no weights; expected model.safetensors or shards listed in model.safetensors.index.json");
    return open_file(dir + "/model.safetensors");
  }
  json::Value v;
  try {
    v = json::parse(read_file(index, "safetensors index"));
  } catch (const Error& e) {
    throw Error(detail::concat(index, ": malformed JSON: ", e.what()));
  }
  ATTN_CHECK(v.is_object(), index, ": expected a JSON object; got ", json::type_name(v.type()));
  const json::Value* map = v.find("weight_map");
  ATTN_CHECK(map != nullptr && map->is_object() && map->size() > 0, index,
             ": expected \"weight_map\", an object of tensor name -> shard file name");
  SafeTensorsSet s;
  s.source_ = index;
  std::map<std::string, std::size_t> shard_of_file;
  for (const json::Value::Member& m : map->members()) {
    ATTN_CHECK(m.second.is_string(), index, ": weight_map[\"", m.first, "\"] must be a file name; got ",
               json::type_name(m.second.type()));
    const std::string& file = m.second.as_string();
    check_shard_name(index, m.first, file);
    auto it = shard_of_file.find(file);
    if (it == shard_of_file.end()) {
      ATTN_CHECK(static_cast<int>(s.files_.size()) < kMaxShards, index, ": more than ", kMaxShards,
                 " shard files");
      const std::string path = dir + "/" + file;
      ATTN_CHECK(regular_file(path), index, ": shard \"", file, "\" (of tensor \"", m.first,
                 "\") is not in the folder");
      s.files_.push_back(SafeTensorsFile::open(path));
      it = shard_of_file.emplace(file, s.files_.size() - 1).first;
    }
    ATTN_CHECK(s.files_[it->second].contains(m.first), index, ": tensor \"", m.first,
               "\" is not in its shard ", file);
    ATTN_CHECK(s.where_.emplace(m.first, it->second).second, index, ": tensor \"", m.first,
               "\" is listed twice");
  }
  for (std::size_t f = 0; f < s.files_.size(); ++f)
    for (const std::string& n : s.files_[f].names()) {
      const auto it = s.where_.find(n);
      ATTN_CHECK(it != s.where_.end() && it->second == f, index, ": shard ", s.files_[f].path(),
                 " holds tensor \"", n, "\", which the index ",
                 it == s.where_.end() ? "does not name" : "places in another shard");
    }
  return s;
}

std::vector<std::string> SafeTensorsSet::names() const {
  std::vector<std::string> out;
  out.reserve(where_.size());
  for (const auto& [n, f] : where_) out.push_back(n);
  return out;
}

bool SafeTensorsSet::contains(const std::string& name) const { return where_.count(name) != 0; }

const SafeTensorsFile& SafeTensorsSet::file_of(const std::string& name) const {
  const auto it = where_.find(name);
  ATTN_CHECK(it != where_.end(), source_, ": no tensor named \"", name, "\"");
  return files_[it->second];
}

const TensorInfo& SafeTensorsSet::info(const std::string& name) const { return file_of(name).info(name); }

Tensor SafeTensorsSet::load(const std::string& name, DType to) const { return file_of(name).load(name, to); }

}  // namespace attn::io
