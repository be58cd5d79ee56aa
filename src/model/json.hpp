// Strict JSON for what the model code reads (safetensors headers, Hugging Face config.json),
// over nlohmann-json. nlohmann's parser already rejects comments, trailing commas,
// NaN/Infinity, leading zeros, control characters, invalid UTF-8 and unpaired surrogates;
// parse() adds what it lets through: duplicate object keys (nlohmann keeps the last one),
// NUL bytes (nlohmann reads one as the end of the input) and nesting beyond a depth limit.
// (A leading UTF-8 byte order mark is skipped, as RFC 8259 allows.) Every error is a
// std::invalid_argument saying what and where: "json: at byte N: <what>" (N counts from 0)
// for syntax errors, "json: at /json/pointer: <what>" for duplicate keys and nesting.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string_view>

namespace qkv::json {

struct ParseOptions {
  int max_depth = 64;  // nesting of arrays/objects
};

// Parses `text` as exactly one JSON value (objects keep their keys sorted, as std::map).
nlohmann::json parse(std::string_view text, const ParseOptions& options = {});

// v as an int64 when it is a JSON integer (no fraction or exponent) that fits; nullopt otherwise.
std::optional<int64_t> to_int64(const nlohmann::json& v);

}  // namespace qkv::json
