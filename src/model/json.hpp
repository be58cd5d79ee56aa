// A small, strict JSON parser (RFC 8259) for what the model code reads: safetensors
// headers and Hugging Face config.json files.
//
// Strict means: one value, surrounded only by whitespace; no comments, no trailing commas,
// no NaN/Infinity, no leading zeros, no control characters or invalid UTF-8 in strings,
// \u escapes with paired surrogates, duplicate object keys rejected, nesting depth limited.
// Every error is a std::invalid_argument whose message says what was wrong and at which byte.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace qkv::json {

class Value {
 public:
  enum class Kind { Null, Bool, Number, String, Array, Object };

  Value() = default;  // null
  static Value make_bool(bool b);
  static Value make_number(double d, bool is_integer, int64_t integer);
  static Value make_string(std::string s);
  static Value make_array(std::vector<Value> items);
  static Value make_object(std::vector<std::pair<std::string, Value>> members);

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_number() const { return kind_ == Kind::Number; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_array() const { return kind_ == Kind::Array; }
  bool is_object() const { return kind_ == Kind::Object; }
  // A number written without fraction or exponent that fits in int64 (e.g. 128, -3).
  bool is_integer() const { return kind_ == Kind::Number && is_integer_; }

  // Accessors throw std::invalid_argument when the kind does not match; `what` names the
  // value in the message (e.g. "config.json: n_embd").
  bool as_bool(const char* what = "value") const;
  double as_number(const char* what = "value") const;
  int64_t as_integer(const char* what = "value") const;
  const std::string& as_string(const char* what = "value") const;
  const std::vector<Value>& as_array(const char* what = "value") const;
  const std::vector<std::pair<std::string, Value>>& as_object(const char* what = "value") const;

  // Object member by key, nullptr when absent (or when this is not an object).
  const Value* find(std::string_view key) const;

  static const char* kind_name(Kind k);

 private:
  Kind kind_ = Kind::Null;
  bool bool_ = false;
  bool is_integer_ = false;
  double number_ = 0.0;
  int64_t integer_ = 0;
  std::string string_;
  std::vector<Value> array_;
  std::vector<std::pair<std::string, Value>> object_;  // in file order, keys unique
};

struct ParseOptions {
  int max_depth = 64;  // nesting of arrays/objects
};

// Parses `text` as exactly one JSON value. Throws std::invalid_argument("json: <what> at byte N").
Value parse(std::string_view text, const ParseOptions& options = {});

}  // namespace qkv::json
