#include <attn/core/error.h>
#include <attn/models/task_model.h>
#include <attn/train/checkpoint.h>

namespace attn::models {

namespace {
constexpr const char* kFormat = "attn-task-model";
constexpr int64_t kVersion = 1;
}  // namespace

void save_task_model(const std::string& path, const std::string& task, const TransformerConfig& config,
                     const json::Value& data, const NamedParams& params) {
  ATTN_CHECK(!task.empty(), "save_task_model: task name must not be empty");
  ATTN_CHECK(data.is_object() || data.is_null(), "save_task_model: data must be a JSON object; got ",
             json::dump(data));
  json::Value header = json::Value::object();
  header.set("format", json::Value::string(kFormat));
  header.set("version", json::Value::integer(kVersion));
  header.set("task", json::Value::string(task));
  header.set("config", config.to_json());
  header.set("data", data.is_null() ? json::Value::object() : data);
  train::TrainState state;
  train::save_checkpoint(path, params, /*optimizer=*/nullptr, /*schedule=*/nullptr, state, header);
}

TaskModelHeader read_task_model(const std::string& path, const std::string& expected_task) {
  const json::Value h = train::read_checkpoint_model_config(path);
  const json::Value* fmt = h.is_object() ? h.find("format") : nullptr;
  ATTN_CHECK(fmt && fmt->is_string() && fmt->as_string() == kFormat, "'", path,
             "' is an attn checkpoint but not a task model (expected model_config.format \"", kFormat,
             "\"; got ", fmt ? json::dump(*fmt) : std::string("nothing"), ")");
  const json::Value* ver = h.find("version");
  ATTN_CHECK(ver && ver->is_integer() && ver->as_int64() == kVersion, "'", path, "': task model version ",
             ver ? json::dump(*ver) : std::string("missing"), "; this build reads version ", kVersion);
  const json::Value* task = h.find("task");
  ATTN_CHECK(task && task->is_string() && !task->as_string().empty(), "'", path,
             "': task model lacks a task name");
  ATTN_CHECK(expected_task.empty() || task->as_string() == expected_task, "'", path, "' is a '",
             task->as_string(), "' model; expected a '", expected_task, "' model");
  const json::Value* config = h.find("config");
  ATTN_CHECK(config && config->is_object(), "'", path, "': task model lacks its config object");
  const json::Value* data = h.find("data");
  ATTN_CHECK(data && data->is_object(), "'", path, "': task model lacks its data object");
  TaskModelHeader out;
  out.task = task->as_string();
  out.config = TransformerConfig::from_json(*config);
  out.data = *data;
  return out;
}

void load_task_model_weights(const std::string& path, const NamedParams& params) {
  train::load_checkpoint(path, params, /*optimizer=*/nullptr);
}

}  // namespace attn::models
