// A trained task model in one file (the output of `attn train <task>`, the
// input of `attn classify`, `attn translate`, `attn generate`, ...).
//
// The file is an attn checkpoint (train/checkpoint.h: safetensors, written to a
// temporary name, fsynced and renamed, with per-tensor checksums) that holds the
// model weights and no optimizer state. Its model_config is
//
//   {"format": "attn-task-model", "version": 1,
//    "task": "classify" | "translate" | "lm" | ...,
//    "config": <TransformerConfig JSON>,
//    "data": {task-specific: tokenizer vocabulary, labels, split, max length, ...}}
//
// so one file is enough to rebuild the model, its tokenizer and its labels.
//
// Integrity (checkpoint version 2): the checkpoint's metadata checksum covers
// this model_config (config, vocabulary, labels, split, ...) and every tensor's
// checksum, so a changed bit anywhere is an attn::Error naming what does not
// match, raised before anything is built from the file. Files of checkpoint
// version 1 are refused with a message to retrain. Before any model is built,
// the config is checked against the stored tensors (positions table
// [max_len, d_model], embeddings [*, d_model]), so a wrong size fails fast
// without a large allocation.
//
// Load with TaskModelFile: the file is opened and mapped once, header and
// weights come from the same mapping (a concurrent rewrite of the path cannot
// mix one file's vocabulary with another's weights).
#pragma once

#include <attn/core/params.h>
#include <attn/io/json.h>
#include <attn/io/safetensors.h>
#include <attn/models/transformer.h>

#include <string>

namespace attn::models {

struct TaskModelHeader {
  std::string task;
  TransformerConfig config;
  json::Value data;  // an object
};

// One open task model file: header validated (format, version, task,
// checksum, config against the tensors) at open; weights copied on request.
class TaskModelFile {
 public:
  // With a non-empty expected_task, a file holding another task throws naming both.
  static TaskModelFile open(const std::string& path, const std::string& expected_task = "");
  const TaskModelHeader& header() const { return header_; }
  const std::string& path() const { return file_.path(); }
  // As load_task_model_weights, from the already open file; every weight is
  // also checked to be finite (the error names the tensor and the first index).
  void load_weights(const NamedParams& params) const;

 private:
  TaskModelFile(io::SafeTensorsFile file, TaskModelHeader header)
      : file_(std::move(file)), header_(std::move(header)) {}
  io::SafeTensorsFile file_;
  TaskModelHeader header_;
};

// Writes `params` and the header to `path` atomically (nothing is left behind on error).
void save_task_model(const std::string& path, const std::string& task, const TransformerConfig& config,
                     const json::Value& data, const NamedParams& params);

// Reads and validates the header only (no tensor data is read). With a non-empty
// expected_task, a file holding another task throws attn::Error naming both.
TaskModelHeader read_task_model(const std::string& path, const std::string& expected_task = "");

// Copies the weights from `path` into `params` after validating every name, shape,
// dtype and checksum (all mismatches listed in one error; nothing copied on error).
void load_task_model_weights(const std::string& path, const NamedParams& params);

}  // namespace attn::models
