// Throughput of the text pipeline on the real corpus (not a test):
// read + validate + normalise the reviews, deduplicate, split, train the
// character vocabulary, tokenise every review, batch at L = 100; train BPE on
// the English side of the Tatoeba pairs and encode it.
//
//   build/release/bench/text_throughput [DATA_DIR]     (default $ATTN_DATA_DIR or ../shared/data)
#include <attn/data/batch.h>
#include <attn/data/reader.h>
#include <attn/data/split.h>
#include <attn/text/bpe.h>
#include <attn/text/tokenizer.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <numeric>

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
  using namespace attn;
  try {
    const std::string dir = argc > 1 ? argv[1] : data::default_data_dir();
    double t = now_s();
    const data::Dataset raw = data::read_text_files(
        {{dir + "/reviews-zh/neg.txt", 0, "neg"}, {dir + "/reviews-zh/pos.txt", 1, "pos"}});
    const double t_read = now_s() - t;
    std::printf("read reviews: %lld lines in %.3f s = %.0f lines/s (%s)\n",
                static_cast<long long>(raw.size()), t_read, raw.size() / t_read,
                raw.report.describe().c_str());
    data::DedupReport rep;
    const data::Dataset ds = data::deduplicate(raw, &rep);
    std::printf("dedup: %s -> %lld examples\n", rep.describe().c_str(), static_cast<long long>(ds.size()));
    const data::Split split = data::make_split(ds);
    std::printf("split: %s\n", split.describe().c_str());
    std::vector<std::string> train;
    for (const int64_t i : split.train) train.push_back(ds.examples[i].text);
    t = now_s();
    const text::CharTokenizer tok = text::CharTokenizer::train(train, {}, {2, 0});
    std::printf("char vocab (min_freq 2): %lld tokens in %.3f s\n",
                static_cast<long long>(tok.vocab().size()), now_s() - t);
    t = now_s();
    const data::EncodedDataset enc = data::encode_dataset(ds, tok);
    const double t_tok = now_s() - t;
    std::printf(
        "tokenise all reviews: %lld lines, %lld tokens in %.3f s = %.0f lines/s, %.2f Mtokens/s; "
        "[UNK] %.3f%%\n",
        static_cast<long long>(enc.size()), static_cast<long long>(enc.total_tokens), t_tok,
        enc.size() / t_tok, enc.total_tokens / t_tok / 1e6,
        100.0 * enc.unknown_tokens / static_cast<double>(enc.total_tokens));
    std::vector<int64_t> all(enc.size());
    std::iota(all.begin(), all.end(), 0);
    t = now_s();
    int64_t cut = 0;
    for (const auto& rows : data::epoch_batches(all, 32, 1, 0)) cut += data::make_batch(enc, rows).truncated;
    std::printf("batch all at B=32, L=100: %.3f s, %lld of %lld sequences cut\n", now_s() - t,
                static_cast<long long>(cut), static_cast<long long>(enc.size()));

    const std::string cmn = dir + "/tatoeba-cmn/cmn.txt";
    if (!std::filesystem::exists(cmn)) {
      std::printf("(no %s: BPE part skipped)\n", cmn.c_str());
      return 0;
    }
    data::TableSpec spec;
    spec.header = false;
    spec.text_column = "0";
    spec.pair_column = "1";
    const data::Dataset pairs = data::read_table(cmn, spec);
    const std::vector<std::string> en = pairs.texts();
    for (const int64_t vocab : {2000, 8000}) {
      t = now_s();
      text::BpeOptions o;
      o.vocab_size = vocab;
      const text::BpeTokenizer bpe = text::BpeTokenizer::train(en, o);
      const double t_train = now_s() - t;
      t = now_s();
      int64_t tokens = 0, chars = 0;
      for (const std::string& s : en) {
        tokens += static_cast<int64_t>(bpe.encode(s).size());
        chars += static_cast<int64_t>(s.size());
      }
      const double t_enc = now_s() - t;
      std::printf(
          "bpe vocab %lld (%zu merges): train %.2f s; encode %zu sentences %.3f s = %.0f lines/s; "
          "%.3f tokens per byte\n",
          static_cast<long long>(bpe.vocab().size()), bpe.merges().size(), t_train, en.size(), t_enc,
          en.size() / t_enc, static_cast<double>(tokens) / chars);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "text_throughput: %s\n(hint: pass the data folder or set ATTN_DATA_DIR)\n",
                 e.what());
    return 1;
  }
  return 0;
}
