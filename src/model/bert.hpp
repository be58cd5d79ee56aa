// BERT-family encoders (BERT, DistilBERT, RoBERTa, XLM-RoBERTa) with their masked-LM heads, or
// without one (a sentence-transformers BertModel), on qkv's kernels, in the style of llama2.c's
// run.c: a config, the weights, one forward pass.
//
// Both are post-LN bidirectional encoders (no causal mask):
//   x = LN_emb(word[id] + position[i] (+ token_type[t]))
//   per layer:  x = LN_1(x + Wo Attn(Wq x, Wk x, Wv x))   x = LN_2(x + W2 gelu(W1 x))
//   MLM head:   logits = LN_h(gelu(Wt x)) word^T + bias     (decoder tied to the word embeddings)
// Tensor names as Hugging Face's BertForMaskedLM ("bert." prefix optional, LayerNorm.gamma/beta
// accepted for weight/bias), DistilBertForMaskedLM and (X)LMRobertaForMaskedLM ("roberta."
// prefix optional, the head "lm_head.*"). RoBERTa's positions count from padding_idx + 1 and pad
// tokens sit at padding_idx (HF's create_position_ids_from_input_ids).
// With no head tensors in the file (BertModel, RobertaModel) the encoder gives hidden states only. nn.Linear weights
// are [out, in]; the matmuls read them in place (WeightLayout::OutIn), the tied decoder reads the [V, E] table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "matmul/weights.hpp"
#include "model/interventions.hpp"
#include "model/safetensors.hpp"

namespace qkv {

enum class EncoderArch { Bert, DistilBert, Roberta, XlmRoberta };

struct EncoderConfig {
  EncoderArch arch = EncoderArch::Bert;
  int64_t vocab_size = 0;
  int64_t hidden = 0;        // BERT hidden_size, DistilBERT dim
  int64_t layers = 0;        // num_hidden_layers / n_layers
  int64_t heads = 0;         // num_attention_heads / n_heads
  int64_t intermediate = 0;  // intermediate_size / hidden_dim
  int64_t max_positions = 0;
  int64_t type_vocab_size = 0;  // 0 for DistilBERT (no token types)
  float layer_norm_eps = 1e-12f;
  int64_t pad_token_id = 0;  // RoBERTa: padding_idx, the position of pad tokens (others from pad + 1)

  int64_t head_dim() const { return hidden / heads; }
  bool roberta() const { return arch == EncoderArch::Roberta || arch == EncoderArch::XlmRoberta; }
  // the position ids a sequence of L tokens may use (RoBERTa's first is pad_token_id + 1)
  int64_t max_tokens() const { return roberta() ? max_positions - pad_token_id - 1 : max_positions; }
  const char* name() const {
    switch (arch) {
      case EncoderArch::Bert:
        return "bert";
      case EncoderArch::DistilBert:
        return "distilbert";
      case EncoderArch::Roberta:
        return "roberta";
      case EncoderArch::XlmRoberta:
        return "xlm-roberta";
    }
    return "?";
  }

  // A Hugging Face config.json with model_type "bert", "distilbert", "roberta" or "xlm-roberta";
  // hidden_act/activation must be "gelu", position_embedding_type "absolute". Throws
  // std::invalid_argument ("EncoderConfig: ...") naming the key.
  static EncoderConfig from_json(std::string_view text);
  void validate() const;
};

struct EncoderLayerWeights {
  const float *q_b, *k_b, *v_b, *o_b;  // [E] each
  WeightMatrix q, k, v, o;             // [E, E] OutIn
  const float *ln1_w, *ln1_b;          // [E]  attention.output.LayerNorm / sa_layer_norm
  WeightMatrix ffn1, ffn2;             // [I, E] and [E, I] OutIn
  const float *ffn1_b, *ffn2_b;        // [I], [E]
  const float *ln2_w, *ln2_b;          // [E]  output.LayerNorm / output_layer_norm
};

struct EncoderWeights {
  const float* word = nullptr;   // [V, E]
  const float* pos = nullptr;    // [P, E]
  const float* types = nullptr;  // [T, E] (BERT only)
  const float *emb_ln_w = nullptr, *emb_ln_b = nullptr;
  std::vector<EncoderLayerWeights> layers;
  WeightMatrix head_dense;  // [E, E] OutIn  (cls.predictions.transform.dense / vocab_transform)
  const float* head_dense_b = nullptr;
  const float *head_ln_w = nullptr, *head_ln_b = nullptr;
  WeightMatrix decoder;              // the word table as K = E, N = V, OutIn
  const float* decoder_b = nullptr;  // [V]
};

// Per-call buffers for forward(), grown to the largest call so far.
struct EncoderScratch {
  std::vector<float> x, t, q, k, v, qh, kh, vh, ctx, ctxh, h;
  std::vector<uint8_t> mask;
};

struct EncoderBuild;  // bert_weights.cpp

class Encoder {
 public:
  // config.json text + safetensors bytes. F32 / F16 / BF16 tensors are converted once to one
  // float32 buffer the model keeps (the bytes are only read during the call). int8: the layers'
  // six matrices are then quantized to Q8 (matmul/weights.hpp; the GEMM multiplies integers,
  // gemm_q8.cpp); embeddings, norms, biases and the MLM head stay float32. Throws
  // std::invalid_argument naming a missing tensor or one whose shape does not match the config.
  static Encoder load(std::string_view config_json, const uint8_t* safetensors_bytes, size_t size, bool int8 = false);
  Encoder(Encoder&&) = default;  // the weights point into data_, whose buffer moves with it
  Encoder(const Encoder&) = delete;
  Encoder& operator=(const Encoder&) = delete;

  const EncoderConfig& config() const { return config_; }
  // false for a checkpoint without the MLM head tensors: forward() then takes logits == nullptr
  bool has_mlm_head() const { return w_.decoder_b != nullptr; }
  void set_threads(int threads) { threads_ = threads < 1 ? 1 : threads; }
  int threads() const { return threads_; }

  // B sequences of L tokens (padded to the same length):
  //   ids [B, L]; token_types [B, L] or nullptr (all 0; must be nullptr or all 0 for DistilBERT);
  //   attention_mask [B, L] or nullptr (all 1): 0 marks a padding key no query may attend to
  //   (padded positions still get outputs, as in Hugging Face); every row needs one 1.
  //   logits [B, L, V] or nullptr (must be nullptr without an MLM head); attentions [layers, B, H, L, L] or nullptr;
  //   hidden [B, L, E] or nullptr (the last layer's output);
  //   iv: head interventions (model/interventions.hpp) or nullptr; they need B = 1.
  // Throws std::invalid_argument / std::length_error naming `forward` and the argument.
  void forward(const int32_t* ids, int64_t B, int64_t L, const int32_t* token_types, const uint8_t* attention_mask,
               EncoderScratch& scratch, float* logits, float* attentions = nullptr, float* hidden = nullptr,
               const HeadInterventions* iv = nullptr) const;

 private:
  friend struct EncoderBuild;
  Encoder() = default;
  EncoderConfig config_;
  std::vector<float> data_;  // every tensor, float32, in file order (int8: but the layers' matrices)
  // int8: the layers' matrices as Q8, one after another
  std::vector<int8_t> q8_data_;
  std::vector<uint16_t> q8_scales_;
  EncoderWeights w_;
  int threads_ = 1;
};

// Encoder::load while the file streams in: head holds the file's first head_size bytes (its
// 8-byte length and whole JSON header; every tensor is checked against the config then), then
// the file's bytes are fed in order from its first and each tensor converted as it completes,
// so the file is never held whole (model/tensor_feed.hpp). The same Encoder, bit for bit.
class EncoderStream {
 public:
  EncoderStream(std::string_view config_json, const uint8_t* head, size_t head_size, uint64_t file_size,
                bool int8 = false);
  ~EncoderStream();
  EncoderStream(const EncoderStream&) = delete;
  EncoderStream& operator=(const EncoderStream&) = delete;
  void feed(const uint8_t* bytes, size_t n);
  Encoder finish();  // throws std::invalid_argument when the file has not all arrived

 private:
  std::unique_ptr<EncoderBuild> b_;
};

}  // namespace qkv
