// Loading a decoder while its file streams in (model/decoder_stream.hpp, WeightLoader's feed):
// the model a stream gives, fed in chunks of any size (one byte at a time too), holds the same
// weights as Model::load's from the whole file, bit for bit (the logits of a forward compared
// bit for bit), for every conversion and for GPT-2's and the Llama family's layouts; and a
// stream that ends early, runs long, or starts without its header is an error that says so.
// The encoders' stream (EncoderStream) and BART's (Bart::Stream) likewise give their load()'s bits.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "matmul/halves.hpp"
#include "model/bert.hpp"
#include "model/decoder_stream.hpp"
#include "model/gpt2.hpp"
#include "model/llama.hpp"
#include "model/safetensors.hpp"
#include "model/seq2seq.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

size_t head_size(const std::vector<uint8_t>& file) {
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | file[size_t(i)];
  return size_t(8 + n);
}

// The file fed `chunk` bytes at a time after its header
template <class Model>
Model streamed(const std::string& config, const std::vector<uint8_t>& file, WeightFormat format, size_t chunk) {
  DecoderStream<Model> s(config, file.data(), head_size(file), file.size(), format);
  REQUIRE(s.streams());
  for (size_t at = 0; at < file.size(); at += chunk) s.feed(file.data() + at, std::min(chunk, file.size() - at));
  return s.finish();
}

std::vector<float> logits(const GPT2& m, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * size_t(m.config().vocab_size));
  m.forward(ids.data(), int64_t(ids.size()), out.data(), nullptr, nullptr, nullptr, Logits::All);
  return out;
}

std::vector<float> logits(const Llama& m, const std::vector<int32_t>& ids) {
  std::vector<float> out(ids.size() * size_t(m.config().vocab_size));
  m.forward(ids.data(), int64_t(ids.size()), out.data());
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
}

// The same file with every F32 tensor stored as `dtype` (F16 or BF16)
std::vector<uint8_t> as_half(const std::vector<uint8_t>& f32_file, const std::string& dtype) {
  const safetensors::File f = safetensors::File::parse(f32_file.data(), f32_file.size());
  std::vector<StTensor> out;
  for (const auto& t : f.tensors()) {
    StTensor s{t.name, t.dtype == safetensors::DType::F32 ? dtype : safetensors::dtype_name(t.dtype), t.shape, {}};
    if (t.dtype != safetensors::DType::F32) {
      s.bytes.assign(f.bytes(t), f.bytes(t) + (t.end - t.begin));
    } else {
      for (float x : f.to_f32(t)) {
        const uint16_t h = dtype == "F16" ? halves::f32_to_f16(x) : halves::f32_to_bf16(x);
        s.bytes.push_back(uint8_t(h & 0xFF));
        s.bytes.push_back(uint8_t(h >> 8));
      }
    }
    out.push_back(std::move(s));
  }
  return build_safetensors(out);
}

// The same file with its data `pad` bytes further on (a longer header): its tensors unaligned
// (pad 2 for F32, 1 for 16-bit), so even 'auto' converts (and streams)
std::vector<uint8_t> unaligned(const std::vector<uint8_t>& file, size_t pad) {
  const size_t head = head_size(file);
  std::string header(reinterpret_cast<const char*>(file.data() + 8), head - 8);
  header += std::string(pad, ' ');
  const std::vector<uint8_t> data(file.begin() + std::ptrdiff_t(head), file.end());
  return raw_safetensors(header, data);
}

const std::vector<int32_t> kIds = {1, 7, 3, 11, 5, 2, 9};

}  // namespace

TEST_CASE("stream: GPT-2, every conversion, gives load()'s weights bit for bit, in chunks of any size") {
  TinyConfig c;
  c.vocab_size = 200;  // wte [200, 16]: four strips of 64 rows, the last of 8
  const std::vector<uint8_t> f32 = build_safetensors(random_gpt2_tensors(c, 7));
  struct Run {
    std::vector<uint8_t> file;
    WeightFormat format;
    const char* what;
  };
  const std::vector<Run> runs = {
      {f32, WeightFormat::F16, "F32 file as f16"},
      {f32, WeightFormat::Int8, "F32 file as int8"},
      {f32, WeightFormat::Int4, "F32 file as int4"},
      {as_half(f32, "F16"), WeightFormat::F32, "F16 file as f32"},
      {as_half(f32, "BF16"), WeightFormat::Int8, "BF16 file as int8"},
      {unaligned(f32, 2), WeightFormat::Auto, "unaligned F32 file as stored"},
      {unaligned(as_half(f32, "F16"), 1), WeightFormat::Auto, "unaligned F16 file as stored"}};
  for (const Run& r : runs) {
    const std::string what = r.what;
    CAPTURE(what);
    const GPT2 whole = GPT2::load(c.json(), r.file.data(), r.file.size(), r.format);
    const std::vector<float> want = logits(whole, kIds);
    for (size_t chunk : {size_t(4093), size_t(1) << 20}) {
      CAPTURE(chunk);
      const GPT2 s = streamed<GPT2>(c.json(), r.file, r.format, chunk);
      CHECK(same_bits(logits(s, kIds), want));
      CHECK(std::string(s.weight_store().matrix_type()) == whole.weight_store().matrix_type());
      CHECK(s.weight_store().bytes().matrices == whole.weight_store().bytes().matrices);
      CHECK(s.weight_store().bytes().file == 0);
    }
  }
  // a byte at a time, once
  const GPT2 whole = GPT2::load(c.json(), f32.data(), f32.size(), WeightFormat::Int4);
  CHECK(same_bits(logits(streamed<GPT2>(c.json(), f32, WeightFormat::Int4, 1), kIds), logits(whole, kIds)));
}

TEST_CASE("stream: the Llama family (biases, tied, Gemma's norms, a multimodal prefix) gives load()'s weights") {
  const std::string dir = source_path("tests/data/llama");
  for (const char* name : {"qwen2-bias", "qwen3-tied", "gemma3-text", "gemma3-mm"}) {
    const std::string model = name;
    CAPTURE(model);
    const std::string config = read_text(dir + "/" + name + "/config.json");
    const std::vector<uint8_t> file = read_bytes(dir + "/" + name + "/model.safetensors");
    for (WeightFormat f : {WeightFormat::F16, WeightFormat::Int8, WeightFormat::Int4}) {
      const std::string format = weight_format_name(f);
      CAPTURE(format);
      if (!DecoderStream<Llama>(config, file.data(), head_size(file), file.size(), f).streams()) {
        CHECK(f == WeightFormat::F16);  // an F16 file as 'f16': read in place
        continue;
      }
      const Llama whole = Llama::load(config, file.data(), file.size(), f);
      const Llama s = streamed<Llama>(config, file, f, 4093);
      CHECK(same_bits(logits(s, kIds), logits(whole, kIds)));
      CHECK(std::string(s.weight_store().matrix_type()) == whole.weight_store().matrix_type());
    }
  }
}

TEST_CASE("stream: a file read in place does not stream; damage is named as load() names it") {
  TinyConfig c;
  c.vocab_size = 200;
  std::vector<StTensor> tensors = random_gpt2_tensors(c, 9);
  const std::vector<uint8_t> f32 = build_safetensors(tensors);
  const size_t head = head_size(f32);
  CHECK_FALSE(DecoderStream<GPT2>(c.json(), f32.data(), head, f32.size(), WeightFormat::Auto).streams());
  CHECK_FALSE(DecoderStream<GPT2>(c.json(), f32.data(), head, f32.size(), WeightFormat::F32).streams());

  // truncated: the last bytes never come
  {
    DecoderStream<GPT2> s(c.json(), f32.data(), head, f32.size(), WeightFormat::Int8);
    s.feed(f32.data(), f32.size() - 10);
    const std::string e = error_of<std::invalid_argument>([&] { s.finish(); });
    CHECK(contains(e, "truncated"));
    CHECK(contains(e, std::to_string(f32.size() - 10) + " of its " + std::to_string(f32.size()) + " bytes"));
  }
  // more bytes than the file's size
  {
    DecoderStream<GPT2> s(c.json(), f32.data(), head, f32.size(), WeightFormat::Int8);
    s.feed(f32.data(), f32.size());
    const uint8_t extra = 0;
    CHECK(contains(error_of<std::invalid_argument>([&] { s.feed(&extra, 1); }), "more than the"));
  }
  // the header not all given
  CHECK(contains(error_of<std::invalid_argument>(
                     [&] { DecoderStream<GPT2>(c.json(), f32.data(), head - 1, f32.size(), WeightFormat::Int8); }),
                 "bytes of the header given"));
  // a tensor missing, before any data
  {
    std::vector<StTensor> less(tensors.begin(), tensors.end() - 1);  // no ln_f.bias
    const std::vector<uint8_t> f = build_safetensors(less);
    CHECK(contains(error_of<std::invalid_argument>(
                       [&] { DecoderStream<GPT2>(c.json(), f.data(), head_size(f), f.size(), WeightFormat::Int8); }),
                   "ln_f.bias"));
  }
  // a weight beyond F16 in wte's third strip: its index in the whole tensor, as load() gives it
  {
    std::vector<StTensor> big = tensors;
    const size_t at = 150 * size_t(c.n_embd) + 3;
    const float v = 1e6f;
    std::memcpy(big[0].bytes.data() + at * 4, &v, 4);
    const std::vector<uint8_t> f = build_safetensors(big);
    const std::string whole =
        error_of<std::invalid_argument>([&] { GPT2::load(c.json(), f.data(), f.size(), WeightFormat::F16); });
    CHECK(contains(whole, "element " + std::to_string(at)));
    CHECK(error_of<std::invalid_argument>([&] { streamed<GPT2>(c.json(), f, WeightFormat::F16, 4093); }) == whole);
  }
}

TEST_CASE(
    "stream: the encoders (BERT, DistilBERT; float32 and int8) give Encoder::load's bits, in chunks of any size") {
  const std::string dir = source_path("tests/data/encoder");
  const std::vector<int32_t> ids = {1, 7, 3, 11, 5, 2};
  for (const char* name : {"random-bert", "random-distilbert"}) {
    const std::string model = name;
    CAPTURE(model);
    const std::string config = read_text(dir + "/" + name + "/config.json");
    const std::vector<uint8_t> file = read_bytes(dir + "/" + name + "/model.safetensors");
    for (bool int8 : {false, true}) {
      CAPTURE(int8);
      const auto logits = [&](const Encoder& e) {
        EncoderScratch scratch;
        std::vector<float> out(ids.size() * size_t(e.config().vocab_size));
        e.forward(ids.data(), 1, int64_t(ids.size()), nullptr, nullptr, scratch, out.data());
        return out;
      };
      const std::vector<float> want = logits(Encoder::load(config, file.data(), file.size(), int8));
      for (size_t chunk : {size_t(1), size_t(4093)}) {
        EncoderStream s(config, file.data(), head_size(file), file.size(), int8);
        for (size_t at = 0; at < file.size(); at += chunk) s.feed(file.data() + at, std::min(chunk, file.size() - at));
        CHECK(same_bits(logits(s.finish()), want));
      }
    }
    EncoderStream cut(config, file.data(), head_size(file), file.size());
    cut.feed(file.data(), file.size() / 2);
    CHECK(contains(error_of<std::invalid_argument>([&] { cut.finish(); }), "Encoder: the file is truncated"));
  }
}

TEST_CASE("stream: the encoder-decoder (BART) gives Bart::load's bits, in chunks of any size") {
  const std::string dir = source_path("tests/data/seq2seq/random-bart");
  const std::string config = read_text(dir + "/config.json");
  const std::vector<uint8_t> file = read_bytes(dir + "/model.safetensors");
  const std::vector<int32_t> src = {0, 7, 3, 11, 2}, tgt = {2, 0, 5, 9};
  const auto logits = [&](const Bart& m) {
    std::vector<float> out(tgt.size() * size_t(m.config().vocab_size));
    m.forward(src.data(), int64_t(src.size()), tgt.data(), int64_t(tgt.size()), out.data());
    return out;
  };
  const std::vector<float> want = logits(Bart::load(config, file.data(), file.size()));
  for (size_t chunk : {size_t(1), size_t(4093)}) {
    Bart::Stream s(config, file.data(), head_size(file), file.size());
    for (size_t at = 0; at < file.size(); at += chunk) s.feed(file.data() + at, std::min(chunk, file.size() - at));
    CHECK(same_bits(logits(s.finish()), want));
  }
  Bart::Stream cut(config, file.data(), head_size(file), file.size());
  cut.feed(file.data(), file.size() - 1);
  CHECK(contains(error_of<std::invalid_argument>([&] { cut.finish(); }), "Bart: the file is truncated"));
}

TEST_CASE("stream: a tensor planned twice is read from the whole file, and both plans hold its weights") {
  // w [8, 64] (OutIn) and b [8], std 0.2: a model that read one tensor twice (no model does
  // today) cannot stream it, since its bytes pass once; the whole-file load converts it for each plan
  std::vector<float> w(8 * 64), b(8);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.2f * std::sin(0.37f * float(i) + 0.1f);
  for (size_t i = 0; i < b.size(); ++i) b[i] = 0.1f * float(i);
  const std::vector<uint8_t> file =
      build_safetensors({{"w", "F32", {8, 64}, f32_bytes(w)}, {"b", "F32", {8}, f32_bytes(b)}});
  const Q8Layout q = Q8Layout::of(64, 8);
  const auto q8_bytes = [&](const WeightMatrix& m) {
    std::vector<uint8_t> out(static_cast<const uint8_t*>(m.data), static_cast<const uint8_t*>(m.data) + q.data_bytes());
    const auto* s = reinterpret_cast<const uint8_t*>(m.scales);
    out.insert(out.end(), s, s + 2 * q.scale_count());
    return out;
  };
  // the whole-file load reads the buffer it is given, so each File is parsed from its own copy
  const auto copy_of_file = [&] {
    MallocBytes copy(static_cast<uint8_t*>(std::malloc(file.size())));
    std::memcpy(copy.get(), file.data(), file.size());
    return copy;
  };
  WeightMatrix once{}, first{}, second{};
  const float* bias = nullptr;
  // planned once: it streams, and the stream holds load()'s bytes
  std::vector<uint8_t> want;
  {
    MallocBytes copy = copy_of_file();
    const safetensors::File parsed = safetensors::File::parse(copy.get(), file.size());
    WeightLoader l(parsed, "Test", "", "", WeightFormat::Int8);
    l.matrix("w", {8, 64}, WeightLayout::OutIn, &once);
    l.vector("b", 8, &bias);
    REQUIRE(l.streams());
    const WeightBuffers whole = l.load(std::move(copy), file.size());
    want = q8_bytes(once);
    const safetensors::File header = safetensors::File::parse_header(file.data(), head_size(file), file.size());
    WeightLoader s(header, "Test", "", "", WeightFormat::Int8);
    s.matrix("w", {8, 64}, WeightLayout::OutIn, &once);
    s.vector("b", 8, &bias);
    s.begin_stream();
    for (size_t at = 0; at < file.size(); at += 100) s.feed(file.data() + at, std::min<size_t>(100, file.size() - at));
    const WeightBuffers streamed = s.finish();
    CHECK(q8_bytes(once) == want);
  }
  // planned twice: no stream (begin_stream says why), and load() fills both plans alike
  MallocBytes copy = copy_of_file();
  const safetensors::File parsed = safetensors::File::parse(copy.get(), file.size());
  WeightLoader l(parsed, "Test", "", "", WeightFormat::Int8);
  l.matrix("w", {8, 64}, WeightLayout::OutIn, &first);
  l.matrix("w", {8, 64}, WeightLayout::OutIn, &second);
  l.vector("b", 8, &bias);
  CHECK_FALSE(l.streams());
  CHECK(contains(error_of<std::logic_error>([&] { l.begin_stream(); }), "Test: a tensor is planned twice"));
  const WeightBuffers whole = l.load(std::move(copy), file.size());
  CHECK(first.data != second.data);
  CHECK(q8_bytes(first) == want);
  CHECK(q8_bytes(second) == want);
  CHECK(bias[7] == b[7]);
}
