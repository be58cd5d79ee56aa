// Hidden states of the encoders and of BART (Hugging Face's output_hidden_states) on the committed
// random checkpoints (tests/data/encoder/random-bert, tests/data/seq2seq/random-bart): asking for
// them changes no bit of the logits; the last one is the last layer's output; the masked-LM head
// on the last one gives the forward's logits bit for bit, over any number of rows at once. Their
// values against float64 PyTorch are in tests/js/model-hidden-states.test.js.
#include <doctest/doctest.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "model/bert.hpp"
#include "model/seq2seq.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

bool same_bits(const float* a, const float* b, size_t n) { return std::memcmp(a, b, n * sizeof(float)) == 0; }

Encoder load_encoder(const std::string& dir) {
  const auto st = read_bytes(dir + "/model.safetensors");
  return Encoder::load(read_text(dir + "/config.json"), st.data(), st.size());
}

}  // namespace

TEST_CASE("encoder: hidden_states are [layers + 1, B, L, E]; the logits keep their bits; the head repeats them") {
  const Encoder enc = load_encoder(source_path("tests/data/encoder/random-bert"));
  const EncoderConfig& c = enc.config();
  const int64_t B = 2, L = 7, E = c.hidden, V = c.vocab_size, NL = c.layers, N = B * L;
  std::vector<int32_t> ids(static_cast<size_t>(N));
  for (int64_t i = 0; i < N; ++i) ids[size_t(i)] = int32_t(5 + (i * 37) % (V - 5));
  const std::vector<uint8_t> mask{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0};
  EncoderScratch s;
  std::vector<float> plain(size_t(N * V)), logits(size_t(N * V)), hidden(size_t(N * E));
  std::vector<float> states(size_t((NL + 1) * N * E), -7.0f);
  enc.forward(ids.data(), B, L, nullptr, mask.data(), s, plain.data());
  enc.forward(ids.data(), B, L, nullptr, mask.data(), s, logits.data(), nullptr, hidden.data(), nullptr, states.data());
  CHECK(same_bits(plain.data(), logits.data(), plain.size()));
  CHECK(same_bits(states.data() + NL * N * E, hidden.data(), hidden.size()));
  // every state written (none left at the fill value) and no two layers alike
  for (float v : states) REQUIRE(v != -7.0f);
  for (int64_t l = 0; l < NL; ++l)
    CHECK_FALSE(same_bits(states.data() + l * N * E, states.data() + (l + 1) * N * E, size_t(N * E)));
  // the head over every layer's rows in one call: the last layer's rows are the forward's logits
  std::vector<float> lens(size_t((NL + 1) * N * V));
  enc.mlm_head(states.data(), (NL + 1) * N, s, lens.data());
  CHECK(same_bits(lens.data() + NL * N * V, logits.data(), logits.size()));
  // and over the last layer's rows alone, the same
  std::vector<float> last(size_t(N * V));
  enc.mlm_head(hidden.data(), N, s, last.data());
  CHECK(same_bits(last.data(), logits.data(), logits.size()));
  CHECK_THROWS_WITH_AS(enc.mlm_head(hidden.data(), 0, s, last.data()),
                       doctest::Contains("Encoder.mlm_head: x has 0 rows"), std::invalid_argument);
}

TEST_CASE("bart: encoder and decoder hidden states; the logits keep their bits") {
  const std::string dir = source_path("tests/data/seq2seq/random-bart");
  const auto st = read_bytes(dir + "/model.safetensors");
  const Bart model = Bart::load(read_text(dir + "/config.json"), st.data(), st.size());
  const BartConfig& c = model.config();
  const std::vector<int32_t> src{5, 9, 14, 3, 22}, tgt{2, 7, 11, 30};
  const int64_t Ls = 5, Lt = 4, E = c.d_model, V = c.vocab_size;
  std::vector<float> plain(size_t(Lt * V)), logits(size_t(Lt * V));
  std::vector<float> enc_states(size_t((c.encoder_layers + 1) * Ls * E)),
      dec_states(size_t((c.decoder_layers + 1) * Lt * E));
  model.forward(src.data(), Ls, tgt.data(), Lt, plain.data());
  model.forward(src.data(), Ls, tgt.data(), Lt, logits.data(), nullptr, nullptr, nullptr, {}, enc_states.data(),
                dec_states.data());
  CHECK(same_bits(plain.data(), logits.data(), plain.size()));
  // the encoder's last state is what the cross-attention reads: encode() gives it
  std::vector<float> out(size_t(Ls * E));
  model.encode(src.data(), Ls, out.data());
  CHECK(same_bits(enc_states.data() + c.encoder_layers * Ls * E, out.data(), out.size()));
  for (int64_t l = 0; l < c.decoder_layers; ++l) {
    CHECK_FALSE(same_bits(dec_states.data() + l * Lt * E, dec_states.data() + (l + 1) * Lt * E, size_t(Lt * E)));
  }
}
