// Training state and checkpoints (include/attn/train/checkpoint.h).
#include <attn/core/autograd.h>
#include <attn/core/random.h>
#include <attn/io/safetensors.h>
#include <attn/ops/basic.h>
#include <attn/train/checkpoint.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <string_view>

namespace attn::train {
namespace {

constexpr const char* kFormat = "attn.checkpoint";
constexpr const char* kModelPrefix = "model.";
constexpr const char* kOptimPrefix = "optim.";
// The __metadata__ entry holding FNV-1a 64 of the kFormat entry's text (version 2 on): the text
// holds the model config (a task model's vocabulary, labels, ...), the training state and every
// tensor's checksum, so together they cover all of the file's content.
constexpr const char* kMetaChecksum = "attn.checkpoint.checksum";

std::string hex64(uint64_t x) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(x));
  return buf;
}

uint64_t parse_hex64(const json::Value& v, const std::string& what) {
  ATTN_CHECK(v.is_string() && v.as_string().size() == 16, "checkpoint: ", what,
             " must be a string of 16 hex digits; got ", json::dump(v));
  uint64_t x = 0;
  for (char c : v.as_string()) {
    int d = -1;
    if (c >= '0' && c <= '9') d = c - '0';
    if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    ATTN_CHECK(d >= 0, "checkpoint: ", what, " must be lowercase hex; got ", json::dump(v));
    x = (x << 4) | static_cast<uint64_t>(d);
  }
  return x;
}

uint64_t checksum(const void* data, std::size_t bytes) {
  return fnv1a64(std::string_view(static_cast<const char*>(data), bytes));
}

const json::Value& member(const json::Value& obj, const char* key) {
  const json::Value* v = obj.find(key);
  ATTN_CHECK(v, "checkpoint: metadata lacks '", key, "'");
  return *v;
}
int64_t int_member(const json::Value& obj, const char* key) {
  const json::Value& v = member(obj, key);
  ATTN_CHECK(v.is_integer() && v.as_int64() >= 0, "checkpoint: metadata '", key,
             "' must be a non-negative integer; got ", json::dump(v));
  return v.as_int64();
}

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

}  // namespace

// ---- random numbers --------------------------------------------------------------------------

uint64_t TrainRng::next() { return mix_seed(seed_, counter_++); }
double TrainRng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

uint64_t step_seed(uint64_t seed, int64_t step, int64_t micro) {
  return mix_seed(mix_seed(seed ^ 0x5eedd5eedull, static_cast<uint64_t>(step)), static_cast<uint64_t>(micro));
}

std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch) {
  ATTN_CHECK(n >= 0, "epoch_order: n must be >= 0; got ", n);
  std::vector<int64_t> order(static_cast<std::size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[static_cast<std::size_t>(i)] = i;
  Rng rng(mix_seed(seed ^ 0x0de7ull, static_cast<uint64_t>(epoch)));
  rng.shuffle(order);
  return order;
}

// ---- save ---------------------------------------------------------------------------------------

void save_checkpoint(const std::string& path, const NamedParams& model, const Optimizer* optimizer,
                     const Schedule* schedule, const TrainState& state, const json::Value& model_config) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, p] : model) {
    ATTN_CHECK(p.defined(), "checkpoint: model parameter '", name, "' is undefined");
    tensors.emplace_back(kModelPrefix + name, p.is_contiguous() ? p.detach() : p.contiguous());
  }
  if (optimizer)
    for (const auto& [name, t] : optimizer->state_tensors())
      tensors.emplace_back(kOptimPrefix + name, t.is_contiguous() ? t.detach() : t.contiguous());

  json::Value sums = json::Value::object();
  for (const auto& [name, t] : tensors)
    sums.set(name, json::Value::string(hex64(checksum(t.raw_data(), t.numel() * dtype_size(t.dtype())))));

  json::Value meta = json::Value::object();
  meta.set("version", json::Value::integer(kCheckpointVersion));
  meta.set("step", json::Value::integer(state.step));
  meta.set("epoch", json::Value::integer(state.epoch));
  meta.set("batch_in_epoch", json::Value::integer(state.batch_in_epoch));
  meta.set("skipped_steps", json::Value::integer(state.skipped_steps));
  meta.set("rng", json::Value::object({{"seed", json::Value::string(hex64(state.rng.seed()))},
                                       {"counter", json::Value::string(hex64(state.rng.counter()))}}));
  if (optimizer)
    meta.set("optimizer", json::Value::object({{"kind", json::Value::string(optimizer->kind())},
                                               {"steps", json::Value::integer(optimizer->steps())},
                                               {"lr", json::Value::number(optimizer->lr())}}));
  else
    meta.set("optimizer", json::Value());
  meta.set("schedule", schedule ? schedule->to_json() : json::Value());
  meta.set("model_config", model_config);
  meta.set("checksums", std::move(sums));
  const std::string text = json::dump(meta);
  io::save_safetensors(path, tensors,
                       {{"format", kFormat}, {kFormat, text}, {kMetaChecksum, hex64(fnv1a64(text))}});
}

// ---- load ---------------------------------------------------------------------------------------

namespace {

// The validated attn metadata object of an open checkpoint file.
json::Value checkpoint_metadata(const io::SafeTensorsFile& file, const std::string& path) {
  const io::Metadata& md = file.metadata();
  auto fmt = md.find("format");
  ATTN_CHECK(fmt != md.end() && fmt->second == kFormat, "checkpoint: '", path,
             "' is not an attn checkpoint (__metadata__ format must be \"", kFormat, "\"; got ",
             fmt == md.end() ? std::string("nothing") : "\"" + fmt->second + "\"", ")");
  auto text = md.find(kFormat);
  ATTN_CHECK(text != md.end(), "checkpoint: '", path, "' lacks the '", kFormat, "' metadata entry");
  auto recorded = md.find(kMetaChecksum);
  json::Value meta;
  try {
    meta = json::parse(text->second);
  } catch (const Error& e) {
    if (recorded != md.end()) {
      const uint64_t got = fnv1a64(text->second);
      ATTN_CHECK(hex64(got) == recorded->second, "checkpoint: '", path,
                 "' is corrupt: its metadata (config, vocabulary, labels, training state) has checksum ",
                 hex64(got), ", recorded ", recorded->second);
    }
    throw Error("checkpoint: '" + path + "': bad metadata JSON: " + e.what());
  }
  ATTN_CHECK(meta.is_object(), "checkpoint: '", path, "': metadata must be a JSON object");
  const int64_t version = int_member(meta, "version");
  ATTN_CHECK(version != 1, "checkpoint: '", path,
             "' was written by an older version of attn (checkpoint version 1, whose checksums cover the "
             "tensors only); this build reads version ",
             kCheckpointVersion, ": retrain the model (or rerun the training) with this version");
  ATTN_CHECK(version == kCheckpointVersion, "checkpoint: '", path, "' has version ", version,
             "; this build reads version ", kCheckpointVersion);
  ATTN_CHECK(recorded != md.end(), "checkpoint: '", path, "' lacks the '", kMetaChecksum,
             "' metadata entry (the checksum of its config and training state)");
  const uint64_t got = fnv1a64(text->second);
  ATTN_CHECK(hex64(got) == recorded->second, "checkpoint: '", path,
             "' is corrupt: its metadata (config, vocabulary, labels, training state) has checksum ",
             hex64(got), ", recorded ", recorded->second);
  return meta;
}

}  // namespace

json::Value read_checkpoint_model_config(const std::string& path) {
  return read_checkpoint_model_config(io::SafeTensorsFile::open(path));
}

json::Value read_checkpoint_model_config(const io::SafeTensorsFile& file) {
  return member(checkpoint_metadata(file, file.path()), "model_config");
}

LoadedCheckpoint load_checkpoint(const std::string& path, const NamedParams& model, Optimizer* optimizer) {
  return load_checkpoint(io::SafeTensorsFile::open(path), model, optimizer);
}

LoadedCheckpoint load_checkpoint(const io::SafeTensorsFile& file, const NamedParams& model,
                                 Optimizer* optimizer) {
  const std::string& path = file.path();
  const json::Value meta = checkpoint_metadata(file, path);

  // Expected tensors: name -> (live tensor).
  std::vector<std::pair<std::string, Tensor>> expected;
  for (const auto& [name, p] : model) expected.emplace_back(kModelPrefix + name, p);
  const json::Value& opt_meta = member(meta, "optimizer");
  if (optimizer) {
    ATTN_CHECK(opt_meta.is_object(), "checkpoint: '", path, "' holds no optimizer state; expected ",
               optimizer->kind());
    const std::string& kind = member(opt_meta, "kind").as_string();
    ATTN_CHECK(kind == optimizer->kind(), "checkpoint: '", path, "' holds ", kind,
               " optimizer state; the live optimizer is ", optimizer->kind());
    for (const auto& [name, t] : optimizer->state_tensors()) expected.emplace_back(kOptimPrefix + name, t);
  }

  std::vector<std::string> problems;
  std::set<std::string> wanted;
  for (const auto& [name, live] : expected) {
    wanted.insert(name);
    if (!file.contains(name)) {
      problems.push_back("missing '" + name + "' (expected " + dtype_name(live.dtype()) + " " +
                         shape_str(live.shape()) + ")");
      continue;
    }
    const io::TensorInfo& info = file.info(name);
    if (info.shape != live.shape())
      problems.push_back("wrong shape for '" + name + "': file has " + shape_str(info.shape) + ", expected " +
                         shape_str(live.shape()));
    else if (info.dtype != io::st_dtype_of(live.dtype()))
      problems.push_back("wrong dtype for '" + name + "': file has " + io::st_dtype_name(info.dtype) +
                         ", expected " + io::st_dtype_name(io::st_dtype_of(live.dtype())));
  }
  for (const std::string& name : file.names()) {
    const bool ours = starts_with(name, kModelPrefix) || (optimizer && starts_with(name, kOptimPrefix));
    if (!wanted.count(name) && ours) problems.push_back("unexpected '" + name + "'");
    if (!ours && !starts_with(name, kOptimPrefix)) problems.push_back("unexpected '" + name + "'");
  }
  if (!problems.empty()) {
    std::string msg = "checkpoint: '" + path + "' does not match the model (" +
                      std::to_string(problems.size()) + " problem" + (problems.size() == 1 ? "" : "s") + "):";
    for (const auto& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }

  // Integrity: every tensor we read must match its checksum.
  const json::Value& sums = member(meta, "checksums");
  ATTN_CHECK(sums.is_object(), "checkpoint: '", path, "': 'checksums' must be an object");
  for (const auto& [name, live] : expected) {
    const json::Value* s = sums.find(name);
    ATTN_CHECK(s, "checkpoint: '", path, "' has no checksum for '", name, "'");
    const auto bytes = file.bytes(name);
    const uint64_t got = checksum(bytes.data(), bytes.size());
    ATTN_CHECK(got == parse_hex64(*s, "checksum of '" + name + "'"), "checkpoint: '", path,
               "' is corrupt: tensor '", name, "' has checksum ", hex64(got), ", recorded ", s->as_string());
  }

  LoadedCheckpoint out;
  out.state.step = int_member(meta, "step");
  out.state.epoch = int_member(meta, "epoch");
  out.state.batch_in_epoch = int_member(meta, "batch_in_epoch");
  out.state.skipped_steps = int_member(meta, "skipped_steps");
  const json::Value& rng = member(meta, "rng");
  ATTN_CHECK(rng.is_object(), "checkpoint: '", path, "': 'rng' must be an object");
  out.state.rng.restore(parse_hex64(member(rng, "seed"), "rng.seed"),
                        parse_hex64(member(rng, "counter"), "rng.counter"));
  out.model_config = member(meta, "model_config");
  out.schedule = member(meta, "schedule");
  int64_t opt_steps = 0;
  if (optimizer) {
    opt_steps = int_member(opt_meta, "steps");
    out.lr = member(opt_meta, "lr").as_double();
  }

  // Everything validated: copy in (no history is recorded).
  NoGradGuard no_grad;
  for (const auto& [name, p] : model) {
    Tensor dst = p;
    dst.copy_from(file.load(kModelPrefix + name, p.dtype()));
  }
  if (optimizer) {
    NamedParams state;
    for (const auto& [name, t] : optimizer->state_tensors())
      state.emplace_back(name, file.load(kOptimPrefix + name, t.dtype()));
    optimizer->load_state_tensors(state, opt_steps);
    optimizer->set_lr(out.lr);
  }
  return out;
}

}  // namespace attn::train
