// BART's config.json and its safetensors weights (BartForConditionalGeneration names), read
// and checked before the model (seq2seq.cpp) is built over them.
#include <stdexcept>
#include <string>

#include "model/config_json.hpp"
#include "model/seq2seq.hpp"
#include "model/tensor_feed.hpp"

namespace qkv {

// ----------------------------------------------------------------------------- config

namespace {

constexpr char kConfigError[] = "BartConfig: ";  // what every config error starts with

[[noreturn]] void config_error(const std::string& msg) { throw std::invalid_argument(kConfigError + msg); }

}  // namespace

BartConfig BartConfig::from_json(std::string_view text) {
  const ConfigJson r(text, kConfigError);
  if (const nlohmann::json* mt = r.member("model_type"); !mt || *mt != "bart") {
    config_error("model_type must be \"bart\", got " + (mt ? json_describe(*mt) : std::string("nothing")));
  }
  if (const nlohmann::json* af = r.member("activation_function"); af && *af != "gelu") {
    config_error("activation_function must be \"gelu\" (exact, erf), got " + json_describe(*af));
  }
  // pre-LN variants (mBART) and a final layer norm per stack are not this layout
  if (r.get_bool("normalize_before", false)) config_error("\"normalize_before\": true (pre-LN) is not supported");
  if (r.get_bool("add_final_layer_norm", false)) config_error("\"add_final_layer_norm\": true is not supported");
  if (!r.get_bool("tie_word_embeddings", true)) config_error("\"tie_word_embeddings\": false is not supported");

  BartConfig c;
  c.vocab_size = r.get_int("vocab_size");
  c.d_model = r.get_int("d_model");
  c.encoder_layers = r.get_int("encoder_layers");
  c.decoder_layers = r.get_int("decoder_layers");
  c.encoder_heads = r.get_int("encoder_attention_heads");
  c.decoder_heads = r.get_int("decoder_attention_heads");
  c.encoder_ffn = r.get_int("encoder_ffn_dim");
  c.decoder_ffn = r.get_int("decoder_ffn_dim");
  c.max_positions = r.get_int("max_position_embeddings");
  c.scale_embedding = r.get_bool("scale_embedding", false);
  auto token = [&](const char* key, int32_t fallback) {
    const int64_t v = r.get_int(key, fallback);
    if (v < 0 || v >= c.vocab_size) {
      config_error(std::string("\"") + key + "\" = " + std::to_string(v) +
                   " is out of range [0, vocab_size = " + std::to_string(c.vocab_size) + ")");
    }
    return int32_t(v);
  };
  if (c.vocab_size < 1) config_error("\"vocab_size\" must be >= 1, got " + std::to_string(c.vocab_size));
  c.pad_token_id = token("pad_token_id", std::min<int64_t>(1, c.vocab_size - 1));
  c.bos_token_id = token("bos_token_id", 0);
  c.eos_token_id = token("eos_token_id", std::min<int64_t>(2, c.vocab_size - 1));
  c.decoder_start_token_id = token("decoder_start_token_id", c.eos_token_id);
  c.validate();
  return c;
}

void BartConfig::validate() const {
  auto in_range = [](const char* key, int64_t v, int64_t hi) { check_config_range(kConfigError, key, v, hi); };
  in_range("vocab_size", vocab_size, 1 << 24);
  in_range("d_model", d_model, 1 << 16);
  in_range("encoder_layers", encoder_layers, 1024);
  in_range("decoder_layers", decoder_layers, 1024);
  in_range("encoder_attention_heads", encoder_heads, 1024);
  in_range("decoder_attention_heads", decoder_heads, 1024);
  in_range("encoder_ffn_dim", encoder_ffn, 1 << 18);
  in_range("decoder_ffn_dim", decoder_ffn, 1 << 18);
  in_range("max_position_embeddings", max_positions, 1 << 20);
  for (auto [key, h] :
       {std::pair{"encoder_attention_heads", encoder_heads}, {"decoder_attention_heads", decoder_heads}}) {
    if (d_model % h != 0) {
      config_error("d_model (" + std::to_string(d_model) + ") must be divisible by " + key + " (" + std::to_string(h) +
                   ")");
    }
  }
}

// ----------------------------------------------------------------------------- weights

namespace {

// Tensors by their BartForConditionalGeneration names, with or without the "model." prefix: get
// checks one and returns its float32 vector, sized and filled when its bytes come through the feed
// (the vector's buffer stays where it is when the vector moves).
class TensorReader {
 public:
  TensorReader(const safetensors::File& f, TensorFeed& feed) : f_(f), feed_(feed) {
    prefix_ = f.find("model.encoder.layernorm_embedding.weight") != nullptr ? "model." : "";
  }
  bool has(const std::string& name) const { return f_.find(prefix_ + name) != nullptr; }
  std::vector<float> get(const std::string& name, std::vector<int64_t> want) const {
    const std::string full = prefix_ + name;
    return read(safetensors::expect_shape(f_.find(full), full, want, "Bart"));
  }
  std::vector<float> read(const safetensors::TensorInfo& t) const {
    if (t.dtype != safetensors::DType::F32 && t.dtype != safetensors::DType::F16 &&
        t.dtype != safetensors::DType::BF16) {
      throw std::invalid_argument("safetensors: tensor \"" + t.name + "\": dtype " + safetensors::dtype_name(t.dtype) +
                                  " cannot be converted to float32 (F32, F16 and BF16 can)");
    }
    std::vector<float> v(size_t(t.numel()));
    feed_.add(f_.offset(t), f_.offset(t) + (t.end - t.begin),
              [&t, out = v.data()](const uint8_t* bytes) { safetensors::to_f32(t, bytes, out); });
    return v;
  }

 private:
  const safetensors::File& f_;
  TensorFeed& feed_;
  std::string prefix_;
};

BartAttentionWeights read_attention(const TensorReader& r, const std::string& p, int64_t E) {
  BartAttentionWeights a;
  a.q_w = r.get(p + "q_proj.weight", {E, E});
  a.q_b = r.get(p + "q_proj.bias", {E});
  a.k_w = r.get(p + "k_proj.weight", {E, E});
  a.k_b = r.get(p + "k_proj.bias", {E});
  a.v_w = r.get(p + "v_proj.weight", {E, E});
  a.v_b = r.get(p + "v_proj.bias", {E});
  a.o_w = r.get(p + "out_proj.weight", {E, E});
  a.o_b = r.get(p + "out_proj.bias", {E});
  return a;
}

BartLayerWeights read_layer(const TensorReader& r, const std::string& p, int64_t E, int64_t F, bool decoder) {
  BartLayerWeights w;
  w.self_attn = read_attention(r, p + "self_attn.", E);
  w.self_attn_ln_w = r.get(p + "self_attn_layer_norm.weight", {E});
  w.self_attn_ln_b = r.get(p + "self_attn_layer_norm.bias", {E});
  if (decoder) {
    w.cross_attn = read_attention(r, p + "encoder_attn.", E);
    w.cross_attn_ln_w = r.get(p + "encoder_attn_layer_norm.weight", {E});
    w.cross_attn_ln_b = r.get(p + "encoder_attn_layer_norm.bias", {E});
  }
  w.fc1_w = r.get(p + "fc1.weight", {F, E});
  w.fc1_b = r.get(p + "fc1.bias", {F});
  w.fc2_w = r.get(p + "fc2.weight", {E, F});
  w.fc2_b = r.get(p + "fc2.bias", {E});
  w.final_ln_w = r.get(p + "final_layer_norm.weight", {E});
  w.final_ln_b = r.get(p + "final_layer_norm.bias", {E});
  return w;
}

}  // namespace

BartWeights BartWeights::from_safetensors(const BartConfig& c, const safetensors::File& file, TensorFeed& feed) {
  c.validate();
  const int64_t E = c.d_model, V = c.vocab_size, P = c.max_positions + 2;
  TensorReader r(file, feed);
  BartWeights w;
  w.shared = r.get(r.has("shared.weight") ? "shared.weight" : "encoder.embed_tokens.weight", {V, E});
  if (const safetensors::TensorInfo* t = file.find("final_logits_bias")) {
    w.final_logits_bias = r.read(safetensors::expect_shape(t, "final_logits_bias", {1, V}, "Bart"));
  } else {
    w.final_logits_bias.assign(size_t(V), 0.0f);
  }
  w.enc_pos = r.get("encoder.embed_positions.weight", {P, E});
  w.dec_pos = r.get("decoder.embed_positions.weight", {P, E});
  w.enc_ln_emb_w = r.get("encoder.layernorm_embedding.weight", {E});
  w.enc_ln_emb_b = r.get("encoder.layernorm_embedding.bias", {E});
  w.dec_ln_emb_w = r.get("decoder.layernorm_embedding.weight", {E});
  w.dec_ln_emb_b = r.get("decoder.layernorm_embedding.bias", {E});
  for (int64_t l = 0; l < c.encoder_layers; ++l) {
    w.encoder.push_back(read_layer(r, "encoder.layers." + std::to_string(l) + ".", E, c.encoder_ffn, false));
  }
  for (int64_t l = 0; l < c.decoder_layers; ++l) {
    w.decoder.push_back(read_layer(r, "decoder.layers." + std::to_string(l) + ".", E, c.decoder_ffn, true));
  }
  return w;
}

}  // namespace qkv
