// An encoder-decoder transformer in the Hugging Face BART layout on qkv's kernels: the
// encoder's bidirectional self-attention, the decoder's causal self-attention (through the KV
// cache when generating) and the decoder-to-encoder cross-attention, whose keys and values
// are computed once per input and reused for every generated token (CrossKV).
//
// BART (model_type "bart"): post-LN (x = LN(x + sublayer(x))), layernorm_embedding after the
// embeddings, learned positions read at row p + 2, exact (erf) GELU, nn.Linear weights
// [out, in], the LM head tied to model.shared plus final_logits_bias. Tensor names as
// BartForConditionalGeneration ("model." prefix optional, as BartModel).
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "kv_cache.hpp"
#include "model/gpt2.hpp"  // SamplingOptions, Rng, sample()
#include "model/interventions.hpp"
#include "model/safetensors.hpp"

namespace qkv {

class TensorFeed;  // model/tensor_feed.hpp

struct BartConfig {
  int64_t vocab_size = 0;
  int64_t d_model = 0;
  int64_t encoder_layers = 0, decoder_layers = 0;
  int64_t encoder_heads = 0, decoder_heads = 0;  // encoder_/decoder_attention_heads
  int64_t encoder_ffn = 0, decoder_ffn = 0;      // encoder_/decoder_ffn_dim
  int64_t max_positions = 0;                     // max_position_embeddings (the tables hold 2 more rows)
  bool scale_embedding = false;                  // embeddings * sqrt(d_model)
  int32_t pad_token_id = 1, bos_token_id = 0, eos_token_id = 2, decoder_start_token_id = 2;
  float layer_norm_eps = 1e-5f;  // HF BART's nn.LayerNorm default

  // Parses a Hugging Face BART config.json and validates it. Throws
  // std::invalid_argument("BartConfig: ...") naming the key.
  static BartConfig from_json(std::string_view text);
  void validate() const;
};

// q/k/v/out projections, nn.Linear layout: weight [E, E] (out, in), bias [E].
struct BartAttentionWeights {
  std::vector<float> q_w, q_b, k_w, k_b, v_w, v_b, o_w, o_b;
};

struct BartLayerWeights {
  BartAttentionWeights self_attn;
  std::vector<float> self_attn_ln_w, self_attn_ln_b;    // [E]
  BartAttentionWeights cross_attn;                      // encoder_attn (decoder layers only)
  std::vector<float> cross_attn_ln_w, cross_attn_ln_b;  // encoder_attn_layer_norm (decoder only)
  std::vector<float> fc1_w, fc1_b;                      // [F, E], [F]
  std::vector<float> fc2_w, fc2_b;                      // [E, F], [E]
  std::vector<float> final_ln_w, final_ln_b;            // [E]
};

struct BartWeights {
  std::vector<float> shared;                      // [V, E] token embeddings of both stacks, and the LM head
  std::vector<float> final_logits_bias;           // [V] (zeros when the checkpoint lacks it)
  std::vector<float> enc_pos, dec_pos;            // [P + 2, E] learned positions
  std::vector<float> enc_ln_emb_w, enc_ln_emb_b;  // layernorm_embedding [E]
  std::vector<float> dec_ln_emb_w, dec_ln_emb_b;
  std::vector<BartLayerWeights> encoder, decoder;

  // Finds and checks every tensor of a parsed safetensors file (its header may be all that has
  // arrived), each vector sized; `feed` (started by the caller, then fed the file's bytes) fills
  // them, converted to float32, as the bytes come. The embedding table is model.shared.weight or,
  // failing that, model.encoder.embed_tokens.weight. Throws std::invalid_argument for a missing
  // tensor, a wrong shape or dtype, naming it and both shapes.
  static BartWeights from_safetensors(const BartConfig& config, const safetensors::File& file, TensorFeed& feed);
};

// The cross-attention keys and values of every decoder layer, computed once from the
// encoder's output: k, v [decoder_layers, H, Ls, D].
struct CrossKV {
  int64_t length = 0;  // Ls
  std::vector<float> k, v;
};

// Scratch buffers for decode(), grown to the largest call.
// Head interventions (model/interventions.hpp) for each attention kind, each optional.
struct BartInterventions {
  const HeadInterventions* encoder = nullptr;  // encoder self-attention
  const HeadInterventions* decoder = nullptr;  // decoder causal self-attention
  const HeadInterventions* cross = nullptr;    // decoder-to-encoder cross-attention
};

struct BartScratch {
  std::vector<float> x, xb, q, k, v, att, hb;
};

class Bart {
 public:
  Bart(BartConfig config, BartWeights weights);  // checks every weight's size
  static Bart load(std::string_view config_json, const uint8_t* safetensors_bytes, size_t size);
  // The same while the file streams in (its header first; then its bytes, fed in order; the same
  // Bart, bit for bit, from finish).
  class Stream {
   public:
    Stream(std::string_view config_json, const uint8_t* head, size_t head_size, uint64_t file_size);
    ~Stream();
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    void feed(const uint8_t* bytes, size_t n);
    Bart finish();  // throws std::invalid_argument when the file has not all arrived

    struct Build;  // seq2seq.cpp (load() builds one too)

   private:
    std::unique_ptr<Build> b_;
  };

  const BartConfig& config() const { return config_; }
  void set_threads(int threads) { threads_ = threads < 1 ? 1 : threads; }
  int threads() const { return threads_; }

  // Encoder: ids [Ls] -> out [Ls, E]; attentions, if not null: [encoder_layers, H, Ls, Ls].
  // iv: interventions on the encoder's heads, or null. hidden_states, if not null:
  // [encoder_layers + 1, Ls, E], HF's encoder_hidden_states: [0] the embeddings after
  // layernorm_embedding, [l] layer l - 1's output (the last: out; BART has no final norm).
  void encode(const int32_t* ids, int64_t Ls, float* out, float* attentions = nullptr,
              const HeadInterventions* iv = nullptr, float* hidden_states = nullptr) const;

  // The decoder layers' cross-attention keys and values of an encoder output [Ls, E].
  CrossKV cross_kv(const float* encoder_out, int64_t Ls) const;

  // Decoder on L tokens at positions [pos0, pos0 + L). With caches (one per decoder layer,
  // holding pos0 positions) the self-attention keys/values are appended and the queries attend
  // through them; without, pos0 must be 0. logits [L, V] when all_logits, else [1, V] (the
  // last token). self_attentions, if not null: [decoder_layers, H, L, pos0 + L];
  // cross_attentions, if not null: [decoder_layers, H, L, Ls]. hidden_states, if not null:
  // [decoder_layers + 1, L, E], HF's decoder_hidden_states (as encode's, for the decoder).
  void decode(const int32_t* ids, int64_t L, int64_t pos0, std::vector<KVCache>* caches, const CrossKV& cross,
              BartScratch& scratch, float* logits, bool all_logits, float* self_attentions, float* cross_attentions,
              const BartInterventions& iv = {},  // iv: decoder, cross
              float* hidden_states = nullptr) const;

  // The whole model without caches: src [Ls], tgt [Lt] (decoder input ids) -> logits [Lt, V];
  // each attention and hidden-state output is optional (shapes as encode() and decode()); none
  // of them changes a bit of the logits.
  void forward(const int32_t* src, int64_t Ls, const int32_t* tgt, int64_t Lt, float* logits,
               float* encoder_attentions = nullptr, float* decoder_attentions = nullptr,
               float* cross_attentions = nullptr, const BartInterventions& iv = {},
               float* encoder_hidden_states = nullptr, float* decoder_hidden_states = nullptr) const;

 private:
  void check_ids(const char* fn, const char* arg, const int32_t* ids, int64_t L, int64_t pos0) const;

  BartConfig config_;
  BartWeights weights_;
  int threads_ = 1;
};

// Generation for one input: the encoder runs and the cross K/V are computed once, at
// construction; each step() runs one decoder token through the self-attention KV caches.
class BartSession {
 public:
  // encoder_attentions, if not null: [encoder_layers, H, Ls, Ls].
  // encoder_iv: interventions on the encoder's heads (a head mask), or null.
  BartSession(const Bart& model, const int32_t* src, int64_t Ls, float* encoder_attentions = nullptr,
              const HeadInterventions* encoder_iv = nullptr);

  // One decoder token at position(): logits [V]; self_attentions, if not null:
  // [decoder_layers, H, position() + 1]; cross_attentions, if not null: [decoder_layers, H, Ls].
  // Throws std::length_error past max_positions.
  // iv: interventions on the decoder's self- and cross-attention heads (head masks).
  void step(int32_t id, float* logits, float* self_attentions = nullptr, float* cross_attentions = nullptr,
            const BartInterventions& iv = {});

  int64_t position() const { return position_; }
  int64_t source_length() const { return cross_.length; }
  const CrossKV& cross() const { return cross_; }

 private:
  const Bart& model_;
  CrossKV cross_;
  std::vector<KVCache> caches_;
  BartScratch scratch_;
  int64_t position_ = 0;
};

// Generates up to max_new tokens for src, starting the decoder at decoder_start_token_id and
// stopping after eos_token_id (included). use_cache: through BartSession; otherwise the
// decoder reruns over the whole prefix for each token (the reference; the encoder still runs
// once). Returns the generated ids (without the start token).
std::vector<int32_t> generate_seq2seq(const Bart& model, const std::vector<int32_t>& src, int64_t max_new,
                                      const SamplingOptions& options, uint64_t seed, bool use_cache);

}  // namespace qkv
