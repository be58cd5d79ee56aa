#include "model/json.hpp"

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace qkv::json {

namespace {

using nlohmann::json;

// s with control bytes (and, when asked, every byte >= 0x80) written as \xNN, cut after
// 200 bytes: nlohmann's messages quote the token read so far, which may be long or broken UTF-8.
std::string printable(std::string_view s, bool ascii_only) {
  static const char* hex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : s.substr(0, 200)) {
    if (c < 0x20 || c == 0x7f || (ascii_only && c >= 0x80)) {
      out += std::string("\\x") + hex[c >> 4] + hex[c & 15];
    } else {
      out += char(c);
    }
  }
  return s.size() > 200 ? out + "..." : out;
}

// nlohmann's SAX events built into a json value, as its own DOM parser does, plus the checks
// it lacks: a key already present in its object, and nesting deeper than max_depth.
class StrictBuilder {
 public:
  explicit StrictBuilder(int max_depth) : max_depth_(max_depth) {}
  json take() { return std::move(root_); }

  bool null() { return add(nullptr); }
  bool boolean(bool b) { return add(b); }
  bool number_integer(json::number_integer_t v) { return add(v); }
  bool number_unsigned(json::number_unsigned_t v) { return add(v); }
  bool number_float(json::number_float_t v, const std::string&) { return add(v); }
  bool string(std::string& s) { return add(std::move(s)); }
  bool binary(json::binary_t&) { return false; }  // only binary formats (CBOR, ...) produce these
  bool start_object(std::size_t) { return open(json::object()); }
  bool start_array(std::size_t) { return open(json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string& k) {
    Frame& f = stack_.back();
    f.key = std::move(k);
    if (f.container->contains(f.key)) fail("duplicate key \"" + printable(f.key, false) + "\"");
    return true;
  }

  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) {
    // e.what(): "[json.exception.parse_error.101] parse error at line 1, column 4: <what>"
    // or "[json.exception.out_of_range.406] <what>"; position counts bytes read, from 1.
    std::string what = e.what();
    const size_t id_end = what.find("] ");
    if (id_end != std::string::npos) what.erase(0, id_end + 2);
    const size_t at = what.find(": ");
    if (what.rfind("parse error", 0) == 0 && at != std::string::npos) what.erase(0, at + 2);
    throw std::invalid_argument("json: at byte " + std::to_string(position > 0 ? position - 1 : 0) + ": " +
                                printable(what, true));
  }

 private:
  struct Frame {
    json* container;  // an object or array still being read
    std::string key;  // objects: the key whose value is being read
  };

  // Puts v where the parser is (the root, the end of an array, or the key just read) and
  // returns where it went; key() has checked that the key is new.
  json& put(json&& v) {
    if (stack_.empty()) return root_ = std::move(v);
    Frame& f = stack_.back();
    if (f.container->is_array()) {
      f.container->push_back(std::move(v));
      return f.container->back();
    }
    return (*f.container)[f.key] = std::move(v);
  }

  bool add(json&& v) {
    put(std::move(v));
    return true;
  }

  bool open(json&& empty) {
    json& c = put(std::move(empty));
    if (int(stack_.size()) >= max_depth_) fail("nesting deeper than " + std::to_string(max_depth_));
    stack_.push_back({&c, {}});
    return true;
  }

  bool close() {
    stack_.pop_back();
    return true;
  }

  // Throws `what` at the value being read, given as a JSON pointer ("/wte.weight/shape/0").
  [[noreturn]] void fail(const std::string& what) const {
    json::json_pointer where;
    for (const Frame& f : stack_) {
      if (f.container->is_array()) {
        where /= f.container->size() - 1;
      } else {
        where /= f.key;
      }
    }
    const std::string at = where.empty() ? "the top level" : printable(where.to_string(), false);
    throw std::invalid_argument("json: at " + at + ": " + what);
  }

  int max_depth_;
  json root_;
  std::vector<Frame> stack_;
};

}  // namespace

nlohmann::json parse(std::string_view text, const ParseOptions& options) {
  // nlohmann ends the input at a NUL byte; JSON allows none outside strings, and none raw inside.
  if (const size_t nul = text.find('\0'); nul != std::string_view::npos) {
    throw std::invalid_argument("json: at byte " + std::to_string(nul) + ": NUL byte");
  }
  StrictBuilder builder(options.max_depth);
  if (!json::sax_parse(text.data(), text.data() + text.size(), &builder, json::input_format_t::json, /*strict=*/true,
                       /*ignore_comments=*/false)) {
    throw std::invalid_argument("json: unexpected binary value");  // not reached for JSON text
  }
  return builder.take();
}

std::optional<int64_t> to_int64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return int64_t(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  return std::nullopt;
}

}  // namespace qkv::json
