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
#pragma once

#include <attn/core/params.h>
#include <attn/io/json.h>
#include <attn/models/transformer.h>

#include <string>

namespace attn::models {

struct TaskModelHeader {
  std::string task;
  TransformerConfig config;
  json::Value data;  // an object
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
