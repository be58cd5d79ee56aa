// The strict JSON parser (over nlohmann-json) and the safetensors reader: good files read back exactly, every
// kind of damage gives its own error.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "model/json.hpp"
#include "model/safetensors.hpp"
#include "test_model_util.hpp"

using namespace qkv;
using namespace qkv::model_testing;

namespace {

std::string st_error(const std::vector<uint8_t>& bytes) {
  return error_of([&] { safetensors::File::parse(bytes.data(), bytes.size()); });
}

std::vector<uint8_t> zeros(size_t n) { return std::vector<uint8_t>(n, 0); }

}  // namespace

TEST_CASE("json: values") {
  auto v = json::parse(R"( {"a": [1, -2, 3.5e2, true, false, null], "s": "x\u00e9\ud83d\ude00\n\"", "o": {}} )");
  REQUIRE(v.is_object());
  const auto& a = v.at("a");
  REQUIRE(a.size() == 6);
  CHECK(json::to_int64(a[0]) == 1);
  CHECK(json::to_int64(a[1]) == -2);
  CHECK(!json::to_int64(a[2]));  // an exponent: a double
  CHECK(a[2].get<double>() == 350.0);
  CHECK(a[3] == true);
  CHECK(a[4] == false);
  CHECK(a[5].is_null());
  CHECK(v.at("s").get<std::string>() == "x\xc3\xa9\xf0\x9f\x98\x80\n\"");
  CHECK(v.at("o").empty());
  CHECK(!v.contains("missing"));
  CHECK(json::to_int64(json::parse("-0")) == 0);
  CHECK(json::to_int64(json::parse("9223372036854775807")) == INT64_MAX);
  CHECK(json::to_int64(json::parse("-9223372036854775808")) == INT64_MIN);
  CHECK(!json::to_int64(json::parse("9223372036854775808")));  // fits uint64, not int64
  CHECK(!json::to_int64(json::parse("1e3")));
  CHECK(!json::to_int64(json::parse("\"1\"")));
  CHECK(json::parse("\"\xe2\x82\xac\"").get<std::string>() == "\xe2\x82\xac");
  std::string deep64 = std::string(64, '[') + std::string(64, ']');
  CHECK(json::parse(deep64).is_array());
}

TEST_CASE("json: strictness") {
  // clang-format off
  const char* bad[] = {
      "",        "{",         "[1,]",       "{\"a\":1,}", "01",          "1.",     ".5",       "1e",
      "+1",      "NaN",       "Infinity",   "tru",        "nul",         "'a'",    "\"a",      "\"\\x\"",
      "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"", "\"\t\"",  "{\"a\" 1}",   "{1:2}",  "[1 2]",    "1 2",
      "{\"a\":1,\"a\":2}", "\"\xff\"", "\"\xc0\x80\"", "\"\xed\xa0\x80\"", "\"\xe2\x82\"", "/* */ 1", "1e999",
      "[-]",     "1 // c",    "[1]]",       "{\"a\":{\"b\":1,\"b\":1}}",
  };
  // clang-format on
  for (const char* text : bad) {
    CAPTURE(text);
    CHECK_THROWS_AS(json::parse(text), std::invalid_argument);
  }
  // what and where: syntax errors by byte offset, duplicates and nesting by JSON pointer
  CHECK(contains(error_of([&] { json::parse("[1,]"); }), "at byte 3"));
  CHECK(contains(error_of([&] { json::parse("{\"a\":1,\"a\":2}"); }), "at /a: duplicate key \"a\""));
  CHECK(contains(error_of([&] { json::parse(R"({"x": [0, {"a/b": 1, "a/b": 2}]})"); }),
                 "at /x/1/a~1b: duplicate key \"a/b\""));
  std::string deep(100, '[');
  deep += std::string(100, ']');
  const std::string deep_error = error_of([&] { json::parse(deep); });
  CHECK(contains(deep_error, "json: at /0/0/"));
  CHECK(contains(deep_error, ": nesting deeper than 64"));
  CHECK(std::count(deep_error.begin(), deep_error.end(), '/') == 64);  // the 65th array's pointer
  CHECK(contains(error_of([&] { json::parse("1e999"); }), "number overflow parsing '1e999'"));
  CHECK(contains(error_of([&] { json::parse("[\"\x01\"]"); }),
                 "json: at byte 2: syntax error while parsing value - invalid string: "
                 "control character U+0001 (SOH) must be escaped"));
  // invalid UTF-8 is named, and the message itself stays printable ASCII
  const std::string utf8_error = error_of([&] { json::parse("[\"ab\xff\"]"); });
  CHECK(contains(utf8_error, "ill-formed UTF-8 byte"));
  CHECK(contains(utf8_error, "\\xff"));
  CHECK(utf8_error.find('\xff') == std::string::npos);
  // nlohmann would stop at a NUL byte and accept what came before it
  CHECK(contains(error_of([&] { json::parse(std::string("{}\0{", 4)); }), "at byte 2: NUL byte"));
  CHECK(contains(error_of([&] { json::parse(std::string("\"a\0\"", 4)); }), "at byte 2: NUL byte"));
  // a long broken token is quoted only in part
  const std::string long_error = error_of([&] { json::parse("\"" + std::string(100000, 'x')); });
  CHECK(contains(long_error, "..."));
  CHECK(long_error.size() < 400);
}

TEST_CASE("safetensors: F32, F16 and BF16 read back") {
  std::vector<float> f32 = {1.0f, -2.5f, 3.25f, 0.0f, 1e-30f, -INFINITY};
  // F16: 1, -2, 65504 (max), 2^-24 (smallest subnormal), 2^-14 (smallest normal), inf, -0, 0.5 + subnormal
  std::vector<uint16_t> f16 = {0x3C00, 0xC000, 0x7BFF, 0x0001, 0x0400, 0x7C00, 0x8000, 0x03FF};
  std::vector<float> f16_want = {
      1.0f, -2.0f, 65504.0f, std::ldexp(1.0f, -24), std::ldexp(1.0f, -14), INFINITY, -0.0f, std::ldexp(1023.0f, -24)};
  // BF16: the top half of float32
  std::vector<uint16_t> bf16 = {0x3F80, 0xC020, 0x7F80, 0x0001};
  std::vector<float> bf16_want = {1.0f, -2.5f, INFINITY, std::ldexp(1.0f, -133)};
  auto u16_bytes = [](const std::vector<uint16_t>& v) {
    std::vector<uint8_t> out;
    for (auto x : v) {
      out.push_back(uint8_t(x & 0xFF));
      out.push_back(uint8_t(x >> 8));
    }
    return out;
  };
  auto bytes = build_safetensors({{"a.f32", "F32", {2, 3}, f32_bytes(f32)},
                                  {"b.f16", "F16", {8}, u16_bytes(f16)},
                                  {"c.bf16", "BF16", {1, 2, 2}, u16_bytes(bf16)},
                                  {"d.i64", "I64", {2}, zeros(16)},
                                  {"e.scalar", "F32", {}, f32_bytes({7.0f})},
                                  {"f.empty", "F32", {0, 4}, {}}});
  auto file = safetensors::File::parse(bytes.data(), bytes.size());
  REQUIRE(file.tensors().size() == 6);
  CHECK(file.metadata().size() == 1);
  CHECK(file.metadata()[0].first == "format");
  CHECK(file.metadata()[0].second == "pt");
  CHECK(file.data_offset() % 8 == 0);

  const auto* a = file.find("a.f32");
  REQUIRE(a);
  CHECK(a->shape == std::vector<int64_t>{2, 3});
  CHECK(file.to_f32(*a) == f32);
  auto b = file.to_f32(*file.find("b.f16"));
  for (size_t i = 0; i < b.size(); ++i) {
    CAPTURE(i);
    CHECK(b[i] == f16_want[i]);
  }
  CHECK(std::signbit(b[6]));
  CHECK(std::isnan(safetensors::f16_to_f32(0x7E00)));
  CHECK(file.to_f32(*file.find("c.bf16")) == bf16_want);
  CHECK(file.to_f32(*file.find("e.scalar")) == std::vector<float>{7.0f});
  CHECK(file.to_f32(*file.find("f.empty")).empty());
  CHECK(
      contains(error_of([&] { file.to_f32(*file.find("d.i64")); }), "tensor \"d.i64\": dtype I64 cannot be converted"));
  CHECK(file.find("nope") == nullptr);

  // a header with no tensors at all is fine
  auto empty = raw_safetensors("{}", {});
  CHECK(safetensors::File::parse(empty.data(), empty.size()).tensors().empty());
}

TEST_CASE("safetensors: damaged files each give their error") {
  auto good = build_safetensors({{"w", "F32", {2, 2}, f32_bytes({1, 2, 3, 4})}, {"b", "F32", {2}, f32_bytes({5, 6})}});
  REQUIRE(st_error(good).empty());

  SUBCASE("too short for the length") {
    CHECK(contains(st_error({1, 2, 3}), "file is 3 bytes, too short for the 8-byte header length"));
    CHECK(contains(st_error({}), "file is 0 bytes"));
  }
  SUBCASE("truncated: the data region is cut") {
    std::vector<uint8_t> cut(good.begin(), good.end() - 4);
    std::string e = st_error(cut);
    CHECK(contains(e, "tensor \"b\": data_offsets [16, 24] out of range: the data region holds 20 bytes"));
  }
  SUBCASE("truncated inside the header = header longer than the file") {
    std::vector<uint8_t> cut(good.begin(), good.begin() + 20);
    CHECK(contains(st_error(cut), "header length"));
    CHECK(contains(st_error(cut), "is longer than the file allows (20 bytes"));
  }
  SUBCASE("header length larger than the file") {
    auto f = raw_safetensors("{}", {}, 1000);
    CHECK(contains(st_error(f), "header length 1000 is longer than the file allows (10 bytes, so at most 2"));
    auto huge = raw_safetensors("{}", {}, UINT64_MAX - 3);
    CHECK(contains(st_error(huge), "is longer than the file allows"));
  }
  SUBCASE("header not JSON / not an object") {
    CHECK(contains(st_error(raw_safetensors("{\"a\":", {})), "header is not valid JSON"));
    CHECK(contains(st_error(raw_safetensors("[1, 2]", {})), "header does not start with '{'"));
    CHECK(contains(st_error(raw_safetensors("{\"a\":1}", {})), "tensor \"a\": entry must be an object"));
    CHECK(contains(st_error(raw_safetensors("{}x", {})), "header is not valid JSON"));
  }
  SUBCASE("overlapping offsets") {
    std::string h = R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
    std::string e = st_error(raw_safetensors(h, zeros(16)));
    CHECK(contains(e, "tensor \"b\" data_offsets [8, 16] overlap tensor \"w\" [0, 16]"));
    std::string same = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    CHECK(contains(st_error(raw_safetensors(same, zeros(8))), "overlap"));
  }
  SUBCASE("out-of-range offsets") {
    std::string h = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
    CHECK(contains(st_error(raw_safetensors(h, zeros(8))),
                   "tensor \"w\": data_offsets [8, 16] out of range: the data region holds 8 bytes"));
    std::string big = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[18446744073709551615,18446744073709551615]}})";
    CHECK(contains(st_error(raw_safetensors(big, zeros(8))), "data_offsets[0] must be a non-negative integer"));
    std::string rev = R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})";
    CHECK(contains(st_error(raw_safetensors(rev, zeros(8))), "end before begin"));
    std::string neg = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})";
    CHECK(contains(st_error(raw_safetensors(neg, zeros(8))), "data_offsets[0] must be a non-negative integer, got -8"));
  }
  SUBCASE("gaps and trailing bytes") {
    std::string gap = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    CHECK(contains(st_error(raw_safetensors(gap, zeros(12))), "starts at data offset 4, leaving a gap of 4 bytes"));
    std::string h = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    CHECK(contains(st_error(raw_safetensors(h, zeros(12))), "4 trailing bytes"));
  }
  SUBCASE("unknown dtype") {
    std::string h = R"({"w":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})";
    CHECK(contains(st_error(raw_safetensors(h, zeros(8))), "tensor \"w\": unknown dtype \"F33\""));
    std::string num = R"({"w":{"dtype":4,"shape":[2],"data_offsets":[0,8]}})";
    CHECK(contains(st_error(raw_safetensors(num, zeros(8))), "tensor \"w\": dtype must be a string"));
  }
  SUBCASE("shape and bytes disagree") {
    std::string h = R"({"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,8]}})";
    CHECK(contains(st_error(raw_safetensors(h, zeros(8))),
                   "tensor \"w\": dtype F16 and shape [2, 3] need 12 bytes, but data_offsets [0, 8] hold 8"));
    std::string ovf = R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})";
    CHECK(contains(st_error(raw_safetensors(ovf, zeros(8))),
                   "tensor \"w\": shape [4294967296, 4294967296] is too large"));
    std::string negdim = R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})";
    CHECK(contains(st_error(raw_safetensors(negdim, zeros(8))), "shape[0] must be a non-negative integer, got -2"));
    std::string frac = R"({"w":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})";
    CHECK(contains(st_error(raw_safetensors(frac, zeros(8))), "shape[0] must be a non-negative integer"));
  }
  SUBCASE("entry keys") {
    std::string missing = R"({"w":{"dtype":"F32","shape":[2]}})";
    CHECK(contains(st_error(raw_safetensors(missing, zeros(8))), "tensor \"w\": missing \"data_offsets\""));
    std::string extra = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})";
    CHECK(contains(st_error(raw_safetensors(extra, zeros(8))), "tensor \"w\": unknown key \"x\""));
    std::string dup =
        R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"w":{"dtype":"F32","shape":[0],"data_offsets":[8,8]}})";
    CHECK(contains(st_error(raw_safetensors(dup, zeros(8))), "duplicate key \"w\""));
    std::string meta = R"({"__metadata__":{"a":1}})";
    CHECK(contains(st_error(raw_safetensors(meta, {})), "__metadata__[\"a\"] must be a string"));
  }
  SUBCASE("every truncation of a good file fails cleanly") {
    for (size_t n = 0; n < good.size(); ++n) {
      CAPTURE(n);
      CHECK(!st_error(std::vector<uint8_t>(good.begin(), good.begin() + long(n))).empty());
    }
  }
}
