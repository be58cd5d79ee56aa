// A GGUF file (gguf.hpp) read as the Hugging Face checkpoint it was converted from, for the
// architectures qkv runs: "llama", "qwen2", "qwen3", "gemma3" and "gpt2". The config.json the
// models read is made from the metadata ({arch}.block_count, .embedding_length, .attention.*,
// .rope.*, .context_length, .feed_forward_length, ...), and the tensors are indexed under the
// names the loaders look up (token_embd.weight -> model.embed_tokens.weight, blk.N.attn_q.weight
// -> model.layers.N.self_attn.q_proj.weight, ...), each marked with what llama.cpp's converter
// did to it: the interleaved rows of the "llama" architecture's q and k, GPT-2's transposed
// Conv1D matrices, Gemma's norms stored as 1 + w. The weight loader undoes these on load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/gguf.hpp"
#include "model/safetensors.hpp"

namespace qkv::gguf {

// config.json for the file's architecture (general.architecture); throws
// std::invalid_argument "gguf: ..." for another architecture or a key missing or malformed.
std::string hf_config_json(const File& file);

// The file's tensors under Hugging Face names, its offsets and bytes (the index the weight
// loaders read; safetensors::File::index). Throws for a tensor of a type the loaders cannot
// read (Q4_1, Q2_K, ...), naming it, and for what qkv does not run (rope_freqs: Llama 3.1's
// rope scaling as factors).
safetensors::File hf_index(const File& file);

// The weights of a checkpoint, safetensors or GGUF (told apart by GGUF's magic): parsed
// whole, or from its first `available` bytes while it streams in.
safetensors::File open_weights(const uint8_t* data, size_t size);
safetensors::File open_weights_header(const uint8_t* data, size_t available, uint64_t size);

}  // namespace qkv::gguf
