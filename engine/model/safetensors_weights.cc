// LoadSafetensorsWeights: Hugging Face tensor names in one or more `*.safetensors` files.

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/common/read_text_file.h"
#include "engine/common/json_nesting.h"
#include "engine/common/status_macros.h"
#include "engine/model/model_weights.h"
#include "engine/model/safetensors_file.h"
#include "engine/model/tensor_names.h"
#include "nlohmann/json.hpp"

namespace rtgen {

namespace {

// Every tensor of every shard, by name.
class ShardSet {
 public:
  absl::Status Add(std::unique_ptr<SafetensorsFile> file) {
    for (const auto& [name, t] : file->tensors()) {
      auto [it, inserted] = index_.emplace(name, std::make_pair(file.get(), &t));
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat("safetensors: tensor '", name,
                                                       "' appears in both ",
                                                       it->second.first->path(), " and ",
                                                       file->path()));
      }
    }
    files_.push_back(std::move(file));
    return absl::OkStatus();
  }

  // Reads `name`, which must have exactly `shape`.
  absl::StatusOr<std::vector<float>> Read(const std::string& name,
                                          const std::vector<int64_t>& shape) const {
    auto it = index_.find(name);
    if (it == index_.end()) {
      return absl::NotFoundError(absl::StrCat("safetensors: missing tensor '", name, "'"));
    }
    const auto& [file, t] = it->second;
    if (t->shape != shape) {
      std::string got, want;
      for (int64_t d : t->shape) absl::StrAppend(&got, got.empty() ? "" : ", ", d);
      for (int64_t d : shape) absl::StrAppend(&want, want.empty() ? "" : ", ", d);
      return absl::InvalidArgumentError(absl::StrCat("safetensors: tensor '", name,
                                                     "' has shape [", got, "], want [", want,
                                                     "]"));
    }
    return file->ReadF32(*t);
  }

  // OK when every tensor is one a Llama model of `num_layers` layers reads (tensor_names.h).
  absl::Status CheckEveryTensorIsUsed(int num_layers) const {
    for (const auto& [name, where] : index_) {
      const std::string file = where.first->path();
      if (absl::Status s = CheckTensorIsUsed(SafetensorsLlamaTensorNames(), num_layers, name);
          !s.ok()) {
        return absl::Status(s.code(), absl::StrCat(s.message(), " (in ", file, ")"));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Matrix> ReadMatrix(const std::string& name, int64_t rows, int64_t cols) const {
    Matrix m;
    m.rows = rows;
    m.cols = cols;
    ASSIGN_OR_RETURN(m.data, Read(name, {rows, cols}));
    return m;
  }

 private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, std::pair<const SafetensorsFile*, const SafetensorsTensor*>> index_;
};

// The shards a sharded checkpoint's index names (the distinct files of its weight_map), each a
// file in `dir`.
absl::StatusOr<std::vector<std::string>> ShardsOfIndex(const std::filesystem::path& dir,
                                                       const std::filesystem::path& index) {
  ASSIGN_OR_RETURN(const std::string text, ReadTextFile(index.string()));
  const std::string where = absl::StrCat("safetensors: ", index.string());
  ASSIGN_OR_RETURN(const nlohmann::json root, ParseJsonChecked(text, where));
  if (root.is_discarded() || !root.is_object() || !root.contains("weight_map") ||
      !root["weight_map"].is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(where, " is not JSON with a weight_map"));
  }
  std::set<std::string> files;
  for (const auto& [tensor, file] : root["weight_map"].items()) {
    const std::string name = file.is_string() ? file.get<std::string>() : "";
    if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": weight_map[\"", tensor, "\"] is not a file name"));
    }
    files.insert(name);
  }
  std::vector<std::string> shards;
  for (const std::string& name : files) {
    std::error_code ec;
    if (!std::filesystem::is_regular_file(dir / name, ec)) {
      return absl::NotFoundError(absl::StrCat(where, " names ", name, ", which is missing"));
    }
    shards.push_back((dir / name).string());
  }
  return shards;
}

absl::StatusOr<std::vector<std::string>> ListShards(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(dir, ec)) return std::vector<std::string>{dir};
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat("safetensors: no such directory ", dir));
  }
  // A sharded checkpoint's index names its shards, as transformers reads it: Mistral's downloads
  // also hold a consolidated.safetensors of the same weights in Mistral's own names. Without
  // one, model.safetensors alone (an adapter_model.safetensors beside it is no shard of it).
  const fs::path index = fs::path(dir) / "model.safetensors.index.json";
  if (fs::is_regular_file(index, ec)) return ShardsOfIndex(dir, index);
  const fs::path single = fs::path(dir) / "model.safetensors";
  if (fs::is_regular_file(single, ec)) return std::vector<std::string>{single.string()};
  std::vector<std::string> shards;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && e.path().extension() == ".safetensors" &&
        name.rfind("consolidated", 0) != 0) {
      shards.push_back(e.path().string());
    }
  }
  if (ec) return absl::InvalidArgumentError(absl::StrCat("safetensors: cannot list ", dir));
  if (shards.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "safetensors: no *.safetensors files (besides consolidated*) in ", dir));
  }
  std::sort(shards.begin(), shards.end());
  return shards;
}

}  // namespace

absl::StatusOr<ModelWeights> LoadSafetensorsWeights(const std::string& dir,
                                                    const ModelConfig& config) {
  RETURN_IF_ERROR(config.Validate());
  ASSIGN_OR_RETURN(std::vector<std::string> paths, ListShards(dir));
  ShardSet shards;
  for (const std::string& path : paths) {
    ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::Open(path));
    RETURN_IF_ERROR(shards.Add(std::move(file)));
  }
  RETURN_IF_ERROR(shards.CheckEveryTensorIsUsed(config.num_layers));
  const int64_t hidden = config.hidden_size;
  const int64_t q_dim = static_cast<int64_t>(config.num_heads) * config.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(config.num_kv_heads) * config.head_dim;
  const int64_t ffn = config.intermediate_size;
  ModelWeights w;
  ASSIGN_OR_RETURN(w.token_embedding,
                   shards.ReadMatrix("model.embed_tokens.weight", config.vocab_size, hidden));
  // Layer by layer, not resized to num_layers first: a file whose layer count is corrupt
  // (billions) is then refused at its first missing tensor instead of exhausting memory.
  for (int i = 0; i < config.num_layers; ++i) {
    LayerWeights& l = w.layers.emplace_back();
    const std::string p = absl::StrCat("model.layers.", i, ".");
    ASSIGN_OR_RETURN(l.attn_norm, shards.Read(p + "input_layernorm.weight", {hidden}));
    ASSIGN_OR_RETURN(l.wq, shards.ReadMatrix(p + "self_attn.q_proj.weight", q_dim, hidden));
    ASSIGN_OR_RETURN(l.wk, shards.ReadMatrix(p + "self_attn.k_proj.weight", kv_dim, hidden));
    ASSIGN_OR_RETURN(l.wv, shards.ReadMatrix(p + "self_attn.v_proj.weight", kv_dim, hidden));
    ASSIGN_OR_RETURN(l.wo, shards.ReadMatrix(p + "self_attn.o_proj.weight", hidden, q_dim));
    ASSIGN_OR_RETURN(l.ffn_norm, shards.Read(p + "post_attention_layernorm.weight", {hidden}));
    ASSIGN_OR_RETURN(l.w_gate, shards.ReadMatrix(p + "mlp.gate_proj.weight", ffn, hidden));
    ASSIGN_OR_RETURN(l.w_up, shards.ReadMatrix(p + "mlp.up_proj.weight", ffn, hidden));
    ASSIGN_OR_RETURN(l.w_down, shards.ReadMatrix(p + "mlp.down_proj.weight", hidden, ffn));
  }
  ASSIGN_OR_RETURN(w.final_norm, shards.Read("model.norm.weight", {hidden}));
  if (!config.tie_word_embeddings) {
    ASSIGN_OR_RETURN(w.lm_head, shards.ReadMatrix("lm_head.weight", config.vocab_size, hidden));
  }
  RETURN_IF_ERROR(w.CheckShapes(config));
  return w;
}

}  // namespace rtgen
