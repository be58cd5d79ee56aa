// Reading a Hugging Face config.json: the lookups and type checks every model's config shares
// (GPT2Config, EncoderConfig, BartConfig, LlamaConfig). Each error is a std::invalid_argument
// "<prefix><what>", the prefix naming the config ("GPT2Config: ", ...); Hugging Face writes null
// for "unset", so a null value reads as absent.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace qkv {

// obj[key], or nullptr when the key is absent or null.
const nlohmann::json* json_member(const nlohmann::json& obj, const char* key);

// A value for messages: a scalar as JSON text, an object or array by its type ("a JSON array").
std::string json_describe(const nlohmann::json& v);

// Throws std::invalid_argument "<prefix>\"key\" must be in [1, hi], got v" unless 1 <= v <= hi.
void check_config_range(const char* prefix, const char* key, int64_t v, int64_t hi);

class ConfigJson {
 public:
  // Parses `text` (json::parse); throws "<prefix>config.json is not valid JSON (<why>)" or
  // "<prefix>config.json must hold a JSON object". `prefix` is kept by pointer (a literal).
  ConfigJson(std::string_view text, const char* prefix);

  const nlohmann::json& root() const { return root_; }
  [[noreturn]] void fail(const std::string& what) const;

  // root[key], or nullptr when absent or null.
  const nlohmann::json* member(const char* key) const { return json_member(root_, key); }
  // An integer (no fraction or exponent, fits int64); absent: the fallback, or without one
  // "config.json lacks \"key\"".
  int64_t get_int(const char* key, std::optional<int64_t> fallback = std::nullopt) const;
  // A number, or nullptr when absent; anything else: "\"key\" must be a number, got ...".
  const nlohmann::json* number(const char* key) const;
  // number() as a double; absent: the fallback, or without one "config.json lacks \"key\"".
  double get_number(const char* key, std::optional<double> fallback = std::nullopt) const;
  // A boolean; absent: the fallback.
  bool get_bool(const char* key, bool fallback) const;
  // Absent, or the string `want`: "\"key\" must be \"want\", got ..." otherwise.
  void require_string(const char* key, const char* want) const;

 private:
  [[noreturn]] void lacks(const char* key) const;

  const char* prefix_;
  nlohmann::json root_;
};

}  // namespace qkv
