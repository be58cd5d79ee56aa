#include "model/json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <stdexcept>

namespace qkv::json {

// ----------------------------------------------------------------------------- Value

Value Value::make_bool(bool b) {
  Value v;
  v.kind_ = Kind::Bool;
  v.bool_ = b;
  return v;
}

Value Value::make_number(double d, bool is_integer, int64_t integer) {
  Value v;
  v.kind_ = Kind::Number;
  v.number_ = d;
  v.is_integer_ = is_integer;
  v.integer_ = integer;
  return v;
}

Value Value::make_string(std::string s) {
  Value v;
  v.kind_ = Kind::String;
  v.string_ = std::move(s);
  return v;
}

Value Value::make_array(std::vector<Value> items) {
  Value v;
  v.kind_ = Kind::Array;
  v.array_ = std::move(items);
  return v;
}

Value Value::make_object(std::vector<std::pair<std::string, Value>> members) {
  Value v;
  v.kind_ = Kind::Object;
  v.object_ = std::move(members);
  return v;
}

const char* Value::kind_name(Kind k) {
  switch (k) {
    case Kind::Null: return "null";
    case Kind::Bool: return "a boolean";
    case Kind::Number: return "a number";
    case Kind::String: return "a string";
    case Kind::Array: return "an array";
    case Kind::Object: return "an object";
  }
  return "?";
}

namespace {
[[noreturn]] void wrong_kind(const char* what, const char* want, Value::Kind got) {
  throw std::invalid_argument(std::string(what) + ": expected " + want + ", got " + Value::kind_name(got));
}
}  // namespace

bool Value::as_bool(const char* what) const {
  if (kind_ != Kind::Bool) wrong_kind(what, "a boolean", kind_);
  return bool_;
}

double Value::as_number(const char* what) const {
  if (kind_ != Kind::Number) wrong_kind(what, "a number", kind_);
  return number_;
}

int64_t Value::as_integer(const char* what) const {
  if (kind_ != Kind::Number) wrong_kind(what, "an integer", kind_);
  if (!is_integer_) {
    throw std::invalid_argument(std::string(what) + ": expected an integer, got " + std::to_string(number_));
  }
  return integer_;
}

const std::string& Value::as_string(const char* what) const {
  if (kind_ != Kind::String) wrong_kind(what, "a string", kind_);
  return string_;
}

const std::vector<Value>& Value::as_array(const char* what) const {
  if (kind_ != Kind::Array) wrong_kind(what, "an array", kind_);
  return array_;
}

const std::vector<std::pair<std::string, Value>>& Value::as_object(const char* what) const {
  if (kind_ != Kind::Object) wrong_kind(what, "an object", kind_);
  return object_;
}

const Value* Value::find(std::string_view key) const {
  if (kind_ != Kind::Object) return nullptr;
  for (const auto& m : object_) {
    if (m.first == key) return &m.second;
  }
  return nullptr;
}

// ----------------------------------------------------------------------------- parser

namespace {

class Parser {
 public:
  Parser(std::string_view text, const ParseOptions& options) : s_(text), opt_(options) {}

  Value parse_document() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != s_.size()) fail("unexpected data after the value");
    return v;
  }

 private:
  std::string_view s_;
  const ParseOptions& opt_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("json: " + what + " at byte " + std::to_string(pos_));
  }

  bool at_end() const { return pos_ >= s_.size(); }
  unsigned char peek() const { return static_cast<unsigned char>(s_[pos_]); }

  void skip_ws() {
    while (!at_end()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }

  void expect_literal(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) fail("invalid literal");
    pos_ += lit.size();
  }

  Value parse_value(int depth) {
    if (at_end()) fail("unexpected end of input, expected a value");
    char c = s_[pos_];
    switch (c) {
      case '{': return parse_object(depth + 1);
      case '[': return parse_array(depth + 1);
      case '"': return Value::make_string(parse_string());
      case 't': expect_literal("true"); return Value::make_bool(true);
      case 'f': expect_literal("false"); return Value::make_bool(false);
      case 'n': expect_literal("null"); return Value();
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
        fail(std::string("unexpected character '") + printable(c) + "'");
    }
  }

  static std::string printable(char c) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) return std::string(1, c);
    static const char* hex = "0123456789abcdef";
    return std::string("\\x") + hex[u >> 4] + hex[u & 15];
  }

  Value parse_object(int depth) {
    if (depth > opt_.max_depth) fail("nesting deeper than " + std::to_string(opt_.max_depth));
    ++pos_;  // '{'
    std::vector<std::pair<std::string, Value>> members;
    skip_ws();
    if (!at_end() && s_[pos_] == '}') {
      ++pos_;
      return Value::make_object(std::move(members));
    }
    for (;;) {
      skip_ws();
      if (at_end() || s_[pos_] != '"') fail("expected a string key in object");
      size_t key_pos = pos_;
      std::string key = parse_string();
      for (const auto& m : members) {
        if (m.first == key) {
          pos_ = key_pos;
          fail("duplicate key \"" + key + "\"");
        }
      }
      skip_ws();
      if (at_end() || s_[pos_] != ':') fail("expected ':' after object key");
      ++pos_;
      skip_ws();
      Value v = parse_value(depth);
      members.emplace_back(std::move(key), std::move(v));
      skip_ws();
      if (at_end()) fail("unexpected end of input in object");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == '}') {
        ++pos_;
        return Value::make_object(std::move(members));
      }
      fail("expected ',' or '}' in object");
    }
  }

  Value parse_array(int depth) {
    if (depth > opt_.max_depth) fail("nesting deeper than " + std::to_string(opt_.max_depth));
    ++pos_;  // '['
    std::vector<Value> items;
    skip_ws();
    if (!at_end() && s_[pos_] == ']') {
      ++pos_;
      return Value::make_array(std::move(items));
    }
    for (;;) {
      skip_ws();
      items.push_back(parse_value(depth));
      skip_ws();
      if (at_end()) fail("unexpected end of input in array");
      if (s_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (s_[pos_] == ']') {
        ++pos_;
        return Value::make_array(std::move(items));
      }
      fail("expected ',' or ']' in array");
    }
  }

  Value parse_number() {
    size_t start = pos_;
    bool integer = true;
    if (s_[pos_] == '-') ++pos_;
    if (at_end()) fail("truncated number");
    if (s_[pos_] == '0') {
      ++pos_;
      if (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') fail("leading zero in number");
    } else if (s_[pos_] >= '1' && s_[pos_] <= '9') {
      while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    } else {
      fail("invalid number");
    }
    if (!at_end() && s_[pos_] == '.') {
      integer = false;
      ++pos_;
      if (at_end() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("expected a digit after '.'");
      while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    if (!at_end() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      integer = false;
      ++pos_;
      if (!at_end() && (s_[pos_] == '+' || s_[pos_] == '-')) ++pos_;
      if (at_end() || !(s_[pos_] >= '0' && s_[pos_] <= '9')) fail("expected a digit in exponent");
      while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') ++pos_;
    }
    std::string token(s_.substr(start, pos_ - start));  // grammar checked: strtod reads all of it
    errno = 0;
    double d = std::strtod(token.c_str(), nullptr);
    if (!std::isfinite(d)) {
      pos_ = start;
      fail("number out of range");
    }
    int64_t iv = 0;
    if (integer) {
      // exact int64 parse; too large an integer stays a (non-integer) double
      bool neg = token[0] == '-';
      uint64_t acc = 0;
      bool overflow = false;
      for (size_t i = neg ? 1 : 0; i < token.size(); ++i) {
        uint64_t digit = static_cast<uint64_t>(token[i] - '0');
        if (acc > (UINT64_MAX - digit) / 10) {
          overflow = true;
          break;
        }
        acc = acc * 10 + digit;
      }
      const uint64_t limit = neg ? uint64_t(INT64_MAX) + 1 : uint64_t(INT64_MAX);
      if (overflow || acc > limit) {
        integer = false;
      } else {
        iv = neg ? static_cast<int64_t>(0 - acc) : static_cast<int64_t>(acc);
      }
    }
    return Value::make_number(d, integer, iv);
  }

  unsigned hex4() {
    if (s_.size() - pos_ < 4) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') {
        v |= unsigned(c - '0');
      } else if (c >= 'a' && c <= 'f') {
        v |= unsigned(c - 'a' + 10);
      } else if (c >= 'A' && c <= 'F') {
        v |= unsigned(c - 'A' + 10);
      } else {
        --pos_;
        fail("invalid hex digit in \\u escape");
      }
    }
    return v;
  }

  static void put_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out += char(cp);
    } else if (cp < 0x800) {
      out += char(0xC0 | (cp >> 6));
      out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += char(0xE0 | (cp >> 12));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    } else {
      out += char(0xF0 | (cp >> 18));
      out += char(0x80 | ((cp >> 12) & 0x3F));
      out += char(0x80 | ((cp >> 6) & 0x3F));
      out += char(0x80 | (cp & 0x3F));
    }
  }

  // Copies one UTF-8 encoded code point (first byte >= 0x80), validating it strictly.
  void copy_utf8(std::string& out) {
    unsigned char c = peek();
    int n;
    uint32_t cp, min;
    if (c >= 0xC2 && c <= 0xDF) {
      n = 1, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3, cp = c & 0x07, min = 0x10000;
    } else {
      fail("invalid UTF-8 in string");
    }
    if (s_.size() - pos_ <= size_t(n)) fail("truncated UTF-8 sequence in string");
    for (int i = 1; i <= n; ++i) {
      unsigned char d = static_cast<unsigned char>(s_[pos_ + i]);
      if ((d & 0xC0) != 0x80) fail("invalid UTF-8 in string");
      cp = (cp << 6) | (d & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) fail("invalid UTF-8 in string");
    out.append(s_.data() + pos_, size_t(n) + 1);
    pos_ += size_t(n) + 1;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    for (;;) {
      if (at_end()) fail("unterminated string");
      unsigned char c = peek();
      if (c == '"') {
        ++pos_;
        return out;
      }
      if (c < 0x20) fail("control character in string");
      if (c == '\\') {
        ++pos_;
        if (at_end()) fail("unterminated escape");
        char e = s_[pos_++];
        switch (e) {
          case '"': out += '"'; break;
          case '\\': out += '\\'; break;
          case '/': out += '/'; break;
          case 'b': out += '\b'; break;
          case 'f': out += '\f'; break;
          case 'n': out += '\n'; break;
          case 'r': out += '\r'; break;
          case 't': out += '\t'; break;
          case 'u': {
            uint32_t cp = hex4();
            if (cp >= 0xDC00 && cp <= 0xDFFF) fail("unpaired low surrogate in \\u escape");
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (s_.size() - pos_ < 2 || s_[pos_] != '\\' || s_[pos_ + 1] != 'u') {
                fail("unpaired high surrogate in \\u escape");
              }
              pos_ += 2;
              uint32_t lo = hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) fail("invalid low surrogate in \\u escape");
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(out, cp);
            break;
          }
          default:
            --pos_;
            fail(std::string("invalid escape '\\") + printable(e) + "'");
        }
        continue;
      }
      if (c < 0x80) {
        out += char(c);
        ++pos_;
      } else {
        copy_utf8(out);
      }
    }
  }
};

}  // namespace

Value parse(std::string_view text, const ParseOptions& options) {
  Parser p(text, options);
  return p.parse_document();
}

}  // namespace qkv::json
