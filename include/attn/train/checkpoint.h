// Training state, its random numbers, and atomic, resumable checkpoints.
//
// A checkpoint is ONE safetensors file (include/attn/io/safetensors.h), so
// weights, optimizer state and metadata are always consistent with each
// other; the writer replaces the file atomically (temporary file in the same
// directory, fsync, rename, fsync of the directory), so a crash during a save
// leaves the previous checkpoint intact.
//
//   tensors:  "model.<param name>"          the weights, in the model's dtype
//             "optim.<slot>.<param name>"   optimizer state (Optimizer::state_tensors)
//   __metadata__["format"] = "attn.checkpoint"
//   __metadata__["attn.checkpoint.checksum"] = "<16 hex FNV-1a 64 of the JSON text below>"
//   __metadata__["attn.checkpoint"] = JSON text:
//     {"version": 2, "step", "epoch", "batch_in_epoch", "skipped_steps",
//      "rng": {"seed": "<16 hex>", "counter": "<16 hex>"},
//      "optimizer": {"kind", "steps", "lr"}, "schedule": {...} or null,
//      "model_config": <any JSON, passed through untouched>,
//      "checksums": {"<tensor name>": "<16 hex FNV-1a 64 of its bytes>", ...}}
//
// Loading validates the file against the live model and optimizer BEFORE
// copying anything: every missing, unexpected, mis-shaped or mis-typed tensor
// is listed in one attn::Error; a truncated file, bad JSON, a wrong version or
// a checksum mismatch (corrupt data) is an attn::Error too, never a crash.
// The metadata checksum covers the config (a task model's vocabulary, labels,
// ...), the training state and the tensor checksums, so one flipped bit
// anywhere in the file is an error that names what does not match. Version 1
// files (tensor checksums only) are refused with a message to retrain.
#pragma once

#include <attn/core/params.h>
#include <attn/io/json.h>
#include <attn/io/safetensors.h>
#include <attn/train/optim.h>
#include <attn/train/schedule.h>

#include <cstdint>
#include <string>
#include <vector>

namespace attn::train {

inline constexpr int kCheckpointVersion = 2;

// Counter-based random numbers for training: output i is a mix of (seed, i),
// so the whole state is (seed, counter) and is saved exactly.
class TrainRng {
 public:
  TrainRng() = default;
  explicit TrainRng(uint64_t seed) : seed_(seed) {}
  uint64_t next();
  double uniform();  // [0, 1), 53 bits
  uint64_t seed() const { return seed_; }
  uint64_t counter() const { return counter_; }
  void restore(uint64_t seed, uint64_t counter) {
    seed_ = seed;
    counter_ = counter;
  }
  bool operator==(const TrainRng&) const = default;

 private:
  uint64_t seed_ = 0;
  uint64_t counter_ = 0;
};

// Deterministic derived seeds: dropout seed of micro-batch `micro` of update
// `step`, and the data order of an epoch (a permutation of [0, n)).
uint64_t step_seed(uint64_t seed, int64_t step, int64_t micro = 0);
std::vector<int64_t> epoch_order(int64_t n, uint64_t seed, int64_t epoch);

struct TrainState {
  int64_t step = 0;            // updates attempted so far (skipped ones included)
  int64_t epoch = 0;           // current epoch
  int64_t batch_in_epoch = 0;  // next batch index within the epoch
  int64_t skipped_steps = 0;   // updates skipped for NaN/Inf gradients
  TrainRng rng;
};

struct LoadedCheckpoint {
  TrainState state;
  json::Value model_config;  // as saved
  json::Value schedule;      // as saved (null when none); schedule_from_json rebuilds it
  double lr = 0;             // the optimizer's lr when saved
};

// Writes model weights, optimizer state (optimizer may be null) and metadata
// to `path` atomically.
void save_checkpoint(const std::string& path, const NamedParams& model, const Optimizer* optimizer,
                     const Schedule* schedule, const TrainState& state,
                     const json::Value& model_config = json::Value());

// Validates `path` against `model` (and `optimizer` when not null; its kind
// must match), then copies weights and state in and returns the metadata.
// Throws attn::Error (see above); on error nothing was modified.
LoadedCheckpoint load_checkpoint(const std::string& path, const NamedParams& model, Optimizer* optimizer);
// The same on a file already open (read_checkpoint_model_config and
// load_checkpoint on one SafeTensorsFile: one open and one mapping per load).
LoadedCheckpoint load_checkpoint(const io::SafeTensorsFile& file, const NamedParams& model,
                                 Optimizer* optimizer);

// The model_config stored in the checkpoint at `path`, without reading any
// tensor (format and version are validated; throws attn::Error otherwise).
json::Value read_checkpoint_model_config(const std::string& path);
json::Value read_checkpoint_model_config(const io::SafeTensorsFile& file);

}  // namespace attn::train
