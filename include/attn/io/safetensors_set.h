// The weights of a Hugging Face model folder: one model.safetensors, or shards listed by
// model.safetensors.index.json ({"metadata": {...}, "weight_map": {"tensor name": "shard file"}}), read as
// one set of tensors by name.
//
// Opening a sharded folder checks the index before any tensor is read: a JSON object whose weight_map maps
// every name to a plain file name in the folder (no "/" or "..", at most kMaxShards distinct files); every
// shard opens (io::SafeTensorsFile validates each header); each tensor the index names is in its shard,
// and no tensor is in two shards. A shard that is truncated, a tensor the index names that its shard lacks,
// or a shard tensor the index does not name are attn::Errors naming the index, the shard and the tensor.
#pragma once

#include <attn/core/tensor.h>
#include <attn/io/safetensors.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attn::io {

class SafeTensorsSet {
 public:
  static constexpr int kMaxShards = 4096;
  // `dir` holds model.safetensors or model.safetensors.index.json (the index wins when both are there);
  // throws attn::Error naming the folder and what it expected when it holds neither.
  static SafeTensorsSet open_folder(const std::string& dir);
  // A single file.
  static SafeTensorsSet open_file(const std::string& path);
  // True when `dir` holds model.safetensors or model.safetensors.index.json.
  static bool folder_has_weights(const std::string& dir);

  // Every tensor name, sorted.
  std::vector<std::string> names() const;
  bool contains(const std::string& name) const;
  // Throw naming the source when `name` is absent.
  const TensorInfo& info(const std::string& name) const;
  Tensor load(const std::string& name, DType to = DType::f32) const;
  // The index file, or the single file: what errors name.
  const std::string& source() const { return source_; }
  // The shard files in order (one for a single file).
  const std::vector<SafeTensorsFile>& files() const { return files_; }

 private:
  std::string source_;
  std::vector<SafeTensorsFile> files_;
  std::map<std::string, std::size_t> where_;  // tensor name -> index into files_
  const SafeTensorsFile& file_of(const std::string& name) const;
};

}  // namespace attn::io
