// The English -> Chinese translator as a library recipe: train it (`attn train
// translate`, docs/translate.md) and run it (`attn translate`).
//
// train_translator: reads and deduplicates the Tatoeba pairs, makes a seeded
// train/valid/test split, trains the tokenizers on the training split, trains the
// paper's EncoderDecoder with label smoothing and the Noam warmup schedule
// (train::fit; validation loss after every epoch), scores held-out BLEU
// (sacreBLEU's zh tokenisation), and writes <out>/model.attn, report.json,
// report.md, test_hypotheses.txt and test_references.txt atomically.
//
// translate_sentences: translations with the cross-attention alignment: for each
// generated character, the source (sub)words its decoder query attended to most
// (last decoder layer, averaged over heads). Layers, heads and positions are
// numbered from 0.
#pragma once

#include <attn/io/json.h>
#include <attn/models/translation.h>
#include <attn/tasks/progress.h>
#include <attn/train/comm.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace attn::tasks {

struct TranslateTrainOptions {
  // Tab-separated pairs: English, Chinese[, attribution]; "": tatoeba-cmn/cmn.txt in
  // the data folder (data::find_data_dir).
  std::string data;
  std::string out = "runs/translate";
  double minutes = 15;          // time budget
  int64_t max_steps = 0;        // > 0: stop after this many updates (or the budget, whichever first)
  std::string preset = "tiny";  // micro, tiny, small, base
  int64_t layers = 0;           // > 0: encoder and decoder layers instead of the preset's
  int64_t batch_size = 64, warmup = 400;
  double lr_scale = 0.5, dropout = 0.1;
  models::TranslationTokenizerOptions tokenizer;
  int64_t max_len = 48;    // tokens per sentence incl. <s>/</s>
  int64_t max_pairs = 0;   // > 0: only the first N pairs of the file
  int64_t eval_pairs = 0;  // > 0: BLEU on the first N test pairs
  int64_t beam = 1;        // beam width of the final BLEU (1: greedy)
  double alpha = 0.6;      // length penalty of beam search
  uint64_t seed = 1;
  std::string command;  // the command line, for the report
  Progress progress;
  // Data parallel (mpirun -np N attn train ...; docs/training.md): null or one rank trains alone.
  // With N ranks every rank calls this with the same options; each trains on 1/N of every
  // batch, and rank 0 alone reports progress and writes the outputs (the result is empty on
  // the others). Ranks whose configuration, vocabulary or data differ are refused at start.
  train::Communicator* comm = nullptr;
};

struct TranslateTrainResult {
  json::Value report;     // report.json
  std::string report_md;  // report.md
  std::string summary;    // the BLEU line and the files written
  double bleu = 0;
  std::string model_path;
};

TranslateTrainResult train_translator(const TranslateTrainOptions& options);

inline constexpr const char* kDefaultTranslatorModel = "runs/translate/model.attn";

struct TranslateOptions {
  std::string model = kDefaultTranslatorModel;
  std::vector<std::string> sentences;
  int64_t beam = 4;     // 1: greedy
  double alpha = 0.6;   // length penalty ((5+n)/6)^alpha
  int64_t max_new = 0;  // 0: the model's max length - 1
  int64_t top = 2;      // source tokens listed per character
  bool layers = false;  // also the strongest source token of every decoder layer (teacher-forced)
  // Capture every layer's attention (teacher-forced) of each sentence, as layers does,
  // for an export: the table then lists every decoder layer too.
  bool capture = false;
};

struct TranslateResult {
  std::unique_ptr<models::Translator> translator;
  std::vector<models::Translation> translations;
  std::string search;                     // "greedy" or "beam 4, alpha 0.6"
  std::string text;                       // per sentence: the translation and the alignment table
  json::Value json;                       // one object per sentence (the object itself when there is one)
  models::AttentionCapture last_capture;  // with layers or capture: of the last sentence
};

TranslateResult translate_sentences(const TranslateOptions& options);

}  // namespace attn::tasks
