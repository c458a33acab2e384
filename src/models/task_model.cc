#include <attn/core/error.h>
#include <attn/io/finite.h>
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

namespace {

TaskModelHeader parse_header(const json::Value& h, const std::string& path,
                             const std::string& expected_task) {
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

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The config's sizes against the stored tensors, before any model is allocated from them.
void check_config_against_tensors(const io::SafeTensorsFile& file, const TransformerConfig& c,
                                  const std::string& path) {
  bool has_pos = false;
  for (const std::string& name : file.names()) {
    const Shape& shape = file.info(name).shape;
    if (ends_with(name, "pos.weight")) {
      has_pos = true;
      ATTN_CHECK(shape == Shape({c.max_len, c.d_model}), "'", path, "': the config says max_len ", c.max_len,
                 " and d_model ", c.d_model, ", so tensor '", name, "' should be ",
                 shape_str({c.max_len, c.d_model}), "; the file holds ", shape_str(shape));
    } else if (ends_with(name, "embed.weight")) {
      ATTN_CHECK(shape.size() == 2 && shape[1] == c.d_model, "'", path, "': the config says d_model ",
                 c.d_model, ", so tensor '", name, "' should be [*, ", c.d_model, "]; the file holds ",
                 shape_str(shape));
    }
  }
  ATTN_CHECK(c.positions != Positions::learned || has_pos, "'", path,
             "': the config asks for learned positions but the file holds no positions table");
  // Layer counts: a stack whose layers the file holds must hold exactly the config's number of them
  // (the model allocates one block per configured layer).
  for (const auto& [stack, want] : {std::pair<std::string, int64_t>{"encoder", c.encoder_layers},
                                    std::pair<std::string, int64_t>{"decoder", c.decoder_layers}}) {
    const std::string prefix = "model." + stack + ".layers.";  // checkpoint names: "model." + parameter
    int64_t held = 0;
    for (const std::string& name : file.names()) {
      if (name.compare(0, prefix.size(), prefix) != 0) continue;
      const std::size_t dot = name.find('.', prefix.size());
      const std::string index = name.substr(prefix.size(), dot - prefix.size());
      if (index.empty() || index.size() > 9 || index.find_first_not_of("0123456789") != std::string::npos)
        continue;
      held = std::max<int64_t>(held, std::stoll(index) + 1);
    }
    ATTN_CHECK(held == 0 || held == want, "'", path, "': the config says ", stack, "_layers ", want,
               "; the file holds ", held, " ", stack, " layers");
  }
}

}  // namespace

TaskModelFile TaskModelFile::open(const std::string& path, const std::string& expected_task) {
  io::SafeTensorsFile file = io::SafeTensorsFile::open(path);
  TaskModelHeader h = parse_header(train::read_checkpoint_model_config(file), path, expected_task);
  check_config_against_tensors(file, h.config, path);
  return TaskModelFile(std::move(file), std::move(h));
}

void TaskModelFile::load_weights(const NamedParams& params) const {
  train::load_checkpoint(file_, params, /*optimizer=*/nullptr);
  for (const auto& [name, p] : params) io::check_finite(p, "'" + path() + "': weight '" + name + "'");
}

TaskModelHeader read_task_model(const std::string& path, const std::string& expected_task) {
  return TaskModelFile::open(path, expected_task).header();
}

void load_task_model_weights(const std::string& path, const NamedParams& params) {
  TaskModelFile::open(path).load_weights(params);
}

}  // namespace attn::models
