// Loading a BERT-family encoder's weights (bert.hpp): every tensor found by its Hugging Face
// name and checked against the config, then converted into one float32 buffer (int8: the layers'
// matrices quantized) from a whole file (Encoder::load) or as it streams in (EncoderStream).
#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

#include "attention.hpp"
#include "matmul/matmul.hpp"
#include "model/bert.hpp"
#include "model/config_json.hpp"
#include "model/layers.hpp"
#include "model/tensor_feed.hpp"

namespace qkv {

namespace {

// Finds tensors by their Hugging Face names (with the spellings checkpoints use) and converts
// them into one float32 buffer: a first pass records (tensor, offset), a second converts.
class Gather {
 public:
  Gather(const safetensors::File& f, std::vector<float>& data) : f_(f), data_(data) {}

  // Offset of `name` (tried as given, with "bert."/"distilbert." stripped off, and LayerNorm's
  // gamma/beta spelling) once converted; checks the shape and that it converts to float32.
  size_t want(const std::string& name, std::vector<int64_t> shape, bool optional = false) {
    const safetensors::TensorInfo* t = find(name);
    if (!t && optional) return npos;
    check(t, name, shape);
    const size_t at = total_;
    todo_.push_back({t, at});
    total_ += size_t(t->numel());
    return at;
  }

  // A tensor that is not put in the buffer (an int8 layer's matrix, read once to be quantized):
  // its index in apart(), in the order asked.
  size_t want_apart(const std::string& name, std::vector<int64_t> shape) {
    const safetensors::TensorInfo* t = find(name);
    check(t, name, shape);
    apart_.push_back(t);
    return apart_.size() - 1;
  }

  bool has(const std::string& name) const { return find(name) != nullptr; }

  // Sizes the buffer, and has `feed` convert each tensor into it as its bytes complete (and
  // hand each apart one to `apart_done` with its bytes).
  void stream_into(TensorFeed& feed, std::function<void(size_t, const uint8_t*)> apart_done) {
    data_.assign(total_, 0.0f);
    for (const auto& [t, at] : todo_) {
      feed.add(f_.offset(*t), f_.offset(*t) + (t->end - t->begin),
               [this, t = t, at = at](const uint8_t* bytes) { safetensors::to_f32(*t, bytes, data_.data() + at); });
    }
    for (size_t i = 0; i < apart_.size(); ++i) {
      const safetensors::TensorInfo* t = apart_[i];
      feed.add(f_.offset(*t), f_.offset(*t) + (t->end - t->begin),
               [apart_done, i](const uint8_t* bytes) { apart_done(i, bytes); });
    }
  }
  const std::vector<const safetensors::TensorInfo*>& apart() const { return apart_; }

  static constexpr size_t npos = size_t(-1);

 private:
  void check(const safetensors::TensorInfo* t, const std::string& name, const std::vector<int64_t>& shape) const {
    safetensors::expect_shape(t, name, shape, "Encoder");
    if (t->dtype != safetensors::DType::F32 && t->dtype != safetensors::DType::F16 &&
        t->dtype != safetensors::DType::BF16) {
      throw std::invalid_argument("safetensors: tensor \"" + t->name + "\": dtype " +
                                  safetensors::dtype_name(t->dtype) +
                                  " cannot be converted to float32 (F32, F16 and BF16 can)");
    }
  }

  const safetensors::TensorInfo* find(const std::string& name) const {
    std::vector<std::string> names{name};
    for (const char* prefix : {"bert.", "distilbert.", "roberta."}) {  // BertModel / ...Model checkpoints lack it
      if (name.rfind(prefix, 0) == 0) names.push_back(name.substr(std::string(prefix).size()));
    }
    for (size_t i = 0, n = names.size(); i < n; ++i) {
      for (auto [a, b] :
           {std::pair{"LayerNorm.weight", "LayerNorm.gamma"}, std::pair{"LayerNorm.bias", "LayerNorm.beta"}}) {
        const size_t p = names[i].find(a);
        if (p != std::string::npos)
          names.push_back(names[i].substr(0, p) + b + names[i].substr(p + std::string(a).size()));
      }
    }
    for (const std::string& n : names) {
      if (const safetensors::TensorInfo* t = f_.find(n)) return t;
    }
    return nullptr;
  }

  const safetensors::File& f_;
  std::vector<float>& data_;
  std::vector<std::pair<const safetensors::TensorInfo*, size_t>> todo_;
  std::vector<const safetensors::TensorInfo*> apart_;
  size_t total_ = 0;
};

WeightMatrix out_in(const float* p, int64_t in, int64_t out) {
  WeightMatrix m;
  m.type = WeightType::F32;
  m.layout = WeightLayout::OutIn;
  m.K = in;
  m.N = out;
  m.data = p;
  return m;
}

// An nn.Linear weight [out, in] at p rewritten in place as [in, out] (InOut), through scratch.
// The GEMM copies the weights it reads into panels on every call; from InOut that copy is of
// whole rows, from OutIn a 4 x 4 transpose per 16 values. The layers' matrices are read so once
// per forward: at 16-64 tokens per sentence the copy was a fixed ~10 ms of a MiniLM forward
// (bench/encoder/minilm.mjs), which the transpose here made cheaper.
WeightMatrix in_out(float* p, int64_t in, int64_t out, std::vector<float>& scratch) {
  scratch.assign(p, p + in * out);
  for (int64_t n = 0; n < out; ++n)
    for (int64_t k = 0; k < in; ++k) p[k * out + n] = scratch[size_t(n * in + k)];
  WeightMatrix m = out_in(p, in, out);
  m.layout = WeightLayout::InOut;
  return m;
}

}  // namespace

// An encoder being loaded: every tensor found and checked against the config first (the buffer
// is sized, and so has its final address, after every lookup), then the file's bytes fed (whole,
// or as they stream in: EncoderStream), each tensor converted where it belongs as it completes,
// then the weights pointed at and the float32 layer matrices transposed (finish).
struct EncoderBuild {
  struct LayerAt {
    size_t q, qb, k, kb, v, vb, o, ob, ln1w, ln1b, f1, f1b, f2, f2b, ln2w, ln2b;
  };
  Encoder enc;
  safetensors::File file;
  bool int8;
  Gather g;
  std::vector<LayerAt> at;
  size_t word = 0, pos = 0, types = 0, eln_w = 0, eln_b = 0;
  size_t hd = Gather::npos, hdb = 0, hlw = 0, hlb = 0, db = 0, dw = Gather::npos;  // the MLM head
  std::vector<size_t> q8_at, scales_at;  // int8: each apart matrix's place in the Q8 buffers
  std::vector<float> scratch;
  TensorFeed feed;

  EncoderBuild(std::string_view config_json, safetensors::File f, bool int8_);
  EncoderBuild(const EncoderBuild&) = delete;  // g points at file and enc.data_
  Encoder finish();
};

EncoderBuild::EncoderBuild(std::string_view config_json, safetensors::File f, bool int8_)
    : file(std::move(f)), int8(int8_), g(file, enc.data_) {
  enc.config_ = EncoderConfig::from_json(config_json);
  const EncoderConfig& c = enc.config_;
  const int64_t V = c.vocab_size, E = c.hidden, I = c.intermediate, P = c.max_positions;
  const bool bert = c.arch != EncoderArch::DistilBert;  // RoBERTa keeps BERT's names under "roberta."
  const std::string base = c.roberta() ? "roberta." : "bert.";

  const std::string emb = bert ? base + "embeddings." : "distilbert.embeddings.";
  word = g.want(emb + "word_embeddings.weight", {V, E});
  pos = g.want(emb + "position_embeddings.weight", {P, E});
  types = bert ? g.want(emb + "token_type_embeddings.weight", {c.type_vocab_size, E}) : Gather::npos;
  eln_w = g.want(emb + "LayerNorm.weight", {E}), eln_b = g.want(emb + "LayerNorm.bias", {E});
  // a layer's matrix: in the buffer (F32), or apart, to be quantized (int8): offset or id
  const auto mat = [&](const std::string& name, std::vector<int64_t> shape) {
    return int8 ? g.want_apart(name, std::move(shape)) : g.want(name, std::move(shape));
  };
  at.resize(size_t(c.layers));
  for (int64_t l = 0; l < c.layers; ++l) {
    LayerAt& a = at[size_t(l)];
    if (bert) {
      const std::string p = base + "encoder.layer." + std::to_string(l) + ".";
      a.q = mat(p + "attention.self.query.weight", {E, E}), a.qb = g.want(p + "attention.self.query.bias", {E});
      a.k = mat(p + "attention.self.key.weight", {E, E}), a.kb = g.want(p + "attention.self.key.bias", {E});
      a.v = mat(p + "attention.self.value.weight", {E, E}), a.vb = g.want(p + "attention.self.value.bias", {E});
      a.o = mat(p + "attention.output.dense.weight", {E, E}), a.ob = g.want(p + "attention.output.dense.bias", {E});
      a.ln1w = g.want(p + "attention.output.LayerNorm.weight", {E});
      a.ln1b = g.want(p + "attention.output.LayerNorm.bias", {E});
      a.f1 = mat(p + "intermediate.dense.weight", {I, E}), a.f1b = g.want(p + "intermediate.dense.bias", {I});
      a.f2 = mat(p + "output.dense.weight", {E, I}), a.f2b = g.want(p + "output.dense.bias", {E});
      a.ln2w = g.want(p + "output.LayerNorm.weight", {E}), a.ln2b = g.want(p + "output.LayerNorm.bias", {E});
    } else {
      const std::string p = "distilbert.transformer.layer." + std::to_string(l) + ".";
      a.q = mat(p + "attention.q_lin.weight", {E, E}), a.qb = g.want(p + "attention.q_lin.bias", {E});
      a.k = mat(p + "attention.k_lin.weight", {E, E}), a.kb = g.want(p + "attention.k_lin.bias", {E});
      a.v = mat(p + "attention.v_lin.weight", {E, E}), a.vb = g.want(p + "attention.v_lin.bias", {E});
      a.o = mat(p + "attention.out_lin.weight", {E, E}), a.ob = g.want(p + "attention.out_lin.bias", {E});
      a.ln1w = g.want(p + "sa_layer_norm.weight", {E}), a.ln1b = g.want(p + "sa_layer_norm.bias", {E});
      a.f1 = mat(p + "ffn.lin1.weight", {I, E}), a.f1b = g.want(p + "ffn.lin1.bias", {I});
      a.f2 = mat(p + "ffn.lin2.weight", {E, I}), a.f2b = g.want(p + "ffn.lin2.bias", {E});
      a.ln2w = g.want(p + "output_layer_norm.weight", {E}), a.ln2b = g.want(p + "output_layer_norm.bias", {E});
    }
  }
  // the MLM head, when the file has one (a BertModel / RobertaModel checkpoint has none)
  if (c.roberta()) {
    if (g.has("lm_head.dense.weight")) {
      hd = g.want("lm_head.dense.weight", {E, E}), hdb = g.want("lm_head.dense.bias", {E});
      hlw = g.want("lm_head.layer_norm.weight", {E}), hlb = g.want("lm_head.layer_norm.bias", {E});
      db = g.want("lm_head.bias", {V}, true);
      if (db == Gather::npos) db = g.want("lm_head.decoder.bias", {V});
      dw = g.want("lm_head.decoder.weight", {V, E}, true);
    }
  } else if (g.has(bert ? "cls.predictions.transform.dense.weight" : "vocab_transform.weight")) {
    const std::string hp = bert ? "cls.predictions." : "";
    hd = g.want(bert ? hp + "transform.dense.weight" : "vocab_transform.weight", {E, E});
    hdb = g.want(bert ? hp + "transform.dense.bias" : "vocab_transform.bias", {E});
    hlw = g.want(bert ? hp + "transform.LayerNorm.weight" : "vocab_layer_norm.weight", {E});
    hlb = g.want(bert ? hp + "transform.LayerNorm.bias" : "vocab_layer_norm.bias", {E});
    // the decoder bias: cls.predictions.bias (older files: decoder.bias) / vocab_projector.bias
    db = g.want(bert ? hp + "bias" : "vocab_projector.bias", {V}, bert);
    if (db == Gather::npos) db = g.want(hp + "decoder.bias", {V});
    // an untied decoder (a stored cls.predictions.decoder.weight / vocab_projector.weight that is not
    // a copy of the word table) is read as is; HF files leave the tied one out or store a copy
    dw = g.want(bert ? hp + "decoder.weight" : "vocab_projector.weight", {V, E}, true);
  }
  // int8: each layer's q, k, v, o, ffn1, ffn2 quantized to Q8 as its bytes arrive (from [out, in]:
  // the same blocks as from [in, out]) into two buffers sized here; no float32 copy is kept
  size_t bytes_q = 0, scales = 0;
  for (const safetensors::TensorInfo* t : g.apart()) {
    const Q8Layout q = Q8Layout::of(t->shape[1], t->shape[0]);
    q8_at.push_back(bytes_q), scales_at.push_back(scales);
    bytes_q += q.data_bytes(), scales += q.scale_count();
  }
  enc.q8_data_.resize(bytes_q);
  enc.q8_scales_.resize(scales);
  g.stream_into(feed, [this](size_t i, const uint8_t* bytes) {
    const safetensors::TensorInfo& t = *g.apart()[i];
    scratch.resize(size_t(t.numel()));
    safetensors::to_f32(t, bytes, scratch.data());
    quantize_q8(out_in(scratch.data(), t.shape[1], t.shape[0]), enc.q8_data_.data() + q8_at[i],
                enc.q8_scales_.data() + scales_at[i]);
  });
  feed.start(file.size(), "Encoder");
}

Encoder EncoderBuild::finish() {
  feed.finish();
  const EncoderConfig& c = enc.config_;
  const int64_t V = c.vocab_size, E = c.hidden, I = c.intermediate;

  const float* d = enc.data_.data();
  EncoderWeights& w = enc.w_;
  w.word = d + word;
  w.pos = d + pos;
  w.types = types == Gather::npos ? nullptr : d + types;
  w.emb_ln_w = d + eln_w, w.emb_ln_b = d + eln_b;
  float* wd = enc.data_.data();  // the same buffer, written: the layers are transposed in place
  // a layer's matrix: a float32 one transposed to [in, out]; an int8 one (a: its apart index) as quantized
  const auto matrix = [&](size_t a, int64_t in, int64_t out) {
    if (!int8) return in_out(wd + a, in, out, scratch);
    WeightMatrix qm;
    qm.type = WeightType::Q8;
    qm.K = in, qm.N = out;
    qm.data = enc.q8_data_.data() + q8_at[a];
    qm.scales = enc.q8_scales_.data() + scales_at[a];
    return qm;
  };
  for (const LayerAt& a : at) {
    EncoderLayerWeights L;
    L.q = matrix(a.q, E, E), L.k = matrix(a.k, E, E);
    L.v = matrix(a.v, E, E), L.o = matrix(a.o, E, E);
    L.q_b = d + a.qb, L.k_b = d + a.kb, L.v_b = d + a.vb, L.o_b = d + a.ob;
    L.ln1_w = d + a.ln1w, L.ln1_b = d + a.ln1b;
    L.ffn1 = matrix(a.f1, E, I), L.ffn1_b = d + a.f1b;
    L.ffn2 = matrix(a.f2, I, E), L.ffn2_b = d + a.f2b;
    L.ln2_w = d + a.ln2w, L.ln2_b = d + a.ln2b;
    w.layers.push_back(L);
  }
  if (hd != Gather::npos) {  // decoder_b stays nullptr without a head (has_mlm_head)
    w.head_dense = out_in(d + hd, E, E), w.head_dense_b = d + hdb;
    w.head_ln_w = d + hlw, w.head_ln_b = d + hlb;
    w.decoder = out_in(dw == Gather::npos ? w.word : d + dw, E, V);
    w.decoder_b = d + db;
  }
  return std::move(enc);
}

Encoder Encoder::load(std::string_view config_json, const uint8_t* bytes, size_t size, bool int8) {
  EncoderBuild b(config_json, safetensors::File::parse(bytes, size), int8);
  b.feed.feed(bytes, size);
  return b.finish();
}

EncoderStream::EncoderStream(std::string_view config_json, const uint8_t* head, size_t head_size, uint64_t file_size,
                             bool int8)
    : b_(new EncoderBuild(config_json, safetensors::File::parse_header(head, head_size, file_size), int8)) {}
EncoderStream::~EncoderStream() = default;
void EncoderStream::feed(const uint8_t* bytes, size_t n) { b_->feed.feed(bytes, n); }
Encoder EncoderStream::finish() { return b_->finish(); }

}  // namespace qkv
