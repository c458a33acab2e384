// The character language model as a library recipe: train it (`attn train lm`)
// and continue a prompt with it (`attn generate --model FILE`). See
// docs/generation.md.
//
// Token stream: every entry (a fortune between '%' lines, or a paragraph of a
// plain file between blank lines) is preceded by </s>; each of its lines is
// the line's characters followed by the newline token U+21B5 "↵". So a prompt
// starts with </s> (the start of an entry) and generation ends at </s>.
#pragma once

#include <attn/io/json.h>
#include <attn/models/generate.h>
#include <attn/tasks/progress.h>
#include <attn/text/tokenizer.h>
#include <attn/train/comm.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace attn::tasks {

// ---- the text ------------------------------------------------------------------------------------

inline constexpr const char* kNewlineToken = "\xE2\x86\xB5";  // U+21B5

struct LmText {
  std::string format;                             // "plain" or "fortune"
  std::vector<std::vector<std::string>> entries;  // entries, each a list of lines
  int64_t lines = 0;                              // lines read from the file
};

// format: "auto" (fortune when a line is exactly "%" or holds an ESC byte), "plain" or
// "fortune" (ANSI colour codes and '%' separator lines removed). Throws attn::Error naming
// the file and line of invalid UTF-8, and when the file cannot be read or holds no text.
LmText read_lm_text(const std::string& path, const std::string& format);

// Character tokenizer options of the language model (spaces kept as U+2581).
text::CharTokenizerOptions lm_tokenizer_options();

// The tokenizer from the vocabulary in a task model's data ("vocab": the ordinary tokens).
text::CharTokenizer lm_tokenizer(const json::Value& data);

// Ids of one entry (or a prompt): </s>, then each line's ids followed by the newline id
// (the last line of a prompt gets no newline when newline_after_last is false).
std::vector<int64_t> lm_encode(const text::CharTokenizer& tok, const std::vector<std::string>& lines,
                               bool newline_after_last);

// The text of one generated id: "\n" for the newline token, " " for U+2581, "" for specials.
std::string lm_piece(const text::CharTokenizer& tok, int64_t id);

// ---- training --------------------------------------------------------------------------------------

struct LmTrainOptions {
  std::string data;             // UTF-8 text to train on (required)
  std::string format = "auto";  // auto, plain or fortune (read_lm_text)
  std::string out = "lm.attn";  // the model file to write
  int64_t steps = 0;            // optimizer steps (0 with minutes 0: 1000)
  double minutes = 0;           // > 0: a time budget (with steps: whichever ends first)
  std::string preset = "tiny";  // tiny or small
  int64_t seq_len = 128;        // tokens per training window, also the model's max_len
  int64_t batch = 16;           // windows per step
  double lr = 2e-3;             // peak rate (warmup, then cosine to 10%)
  double dropout = 0.1;
  int64_t min_freq = 2;        // rarer characters become [UNK]
  double val_fraction = 0.05;  // the last fraction of the token stream is held out
  int64_t eval_windows = 64;   // held-out windows evaluated
  int64_t log_every = 20;      // progress line every N steps
  uint64_t seed = 1;           // initialisation, data order and dropout
  // Checkpoints (train/checkpoint.h; written by rank 0 alone, atomically): every checkpoint_every
  // steps to `checkpoint`; `resume` continues the run saved there (same data and options), on any
  // number of ranks.
  std::string checkpoint;
  int64_t checkpoint_every = 0;
  std::string resume;
  Progress progress;
  // Data parallel (mpirun -np N attn train ...; docs/training.md): null or one rank trains alone.
  // With N ranks every rank calls this with the same options; each trains on 1/N of every
  // batch, and rank 0 alone reports progress and writes the outputs (the result is empty on
  // the others). Ranks whose configuration, vocabulary or data differ are refused at start.
  train::Communicator* comm = nullptr;
};

struct LmTrainResult {
  int64_t steps = 0;
  double loss_before = 0, loss_after = 0;  // held-out mean next-token loss (NaN: too short to evaluate)
  double train_loss = 0;                   // of the last step
  double seconds = 0;
  std::string out;  // the file written
};

// Trains and writes options.out (task "lm"); progress (loss, tokens/s, ETA, the
// held-out loss before and after) goes to options.progress.
LmTrainResult train_lm(const LmTrainOptions& options);

// ---- generation ------------------------------------------------------------------------------------

struct LmGenerateOptions {
  std::string model;                 // a file written by train_lm (required)
  std::string prompt;                // "": the start of a new entry; "\n" separates lines
  models::GenerateOptions generate;  // search, sampling, max_new_tokens, eos_id, seed
  // Called with the text of each sampled character as it is produced (not for beam search).
  std::function<void(const std::string&)> stream;
};

struct LmGenerated {
  std::string text;                  // the continuation (without the prompt)
  int64_t unknown_prompt_chars = 0;  // prompt characters not in the vocabulary ([UNK])
  models::Generated generated;       // ids, log-prob, stop token
};

LmGenerated generate_lm(const LmGenerateOptions& options);

}  // namespace attn::tasks
