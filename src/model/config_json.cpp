#include "model/config_json.hpp"

#include <stdexcept>

#include "model/json.hpp"

namespace qkv {

const nlohmann::json* json_member(const nlohmann::json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string json_describe(const nlohmann::json& v) {
  return v.is_structured() ? std::string("a JSON ") + v.type_name() : v.dump();
}

void check_config_range(const char* prefix, const char* key, int64_t v, int64_t hi) {
  if (v < 1 || v > hi) {
    throw std::invalid_argument(
        prefix + (std::string("\"") + key + "\" must be in [1, " + std::to_string(hi) + "], got " + std::to_string(v)));
  }
}

ConfigJson::ConfigJson(std::string_view text, const char* prefix) : prefix_(prefix) {
  try {
    root_ = json::parse(text);
  } catch (const std::invalid_argument& e) {
    fail(std::string("config.json is not valid JSON (") + e.what() + ")");
  }
  if (!root_.is_object()) fail("config.json must hold a JSON object");
}

void ConfigJson::fail(const std::string& what) const { throw std::invalid_argument(prefix_ + what); }

void ConfigJson::lacks(const char* key) const { fail(std::string("config.json lacks \"") + key + "\""); }

int64_t ConfigJson::get_int(const char* key, std::optional<int64_t> fallback) const {
  const nlohmann::json* v = member(key);
  if (!v) {
    if (!fallback) lacks(key);
    return *fallback;
  }
  const std::optional<int64_t> i = json::to_int64(*v);
  if (!i) fail(std::string("\"") + key + "\" must be an integer, got " + json_describe(*v));
  return *i;
}

const nlohmann::json* ConfigJson::number(const char* key) const {
  const nlohmann::json* v = member(key);
  if (v && !v->is_number()) fail(std::string("\"") + key + "\" must be a number, got " + json_describe(*v));
  return v;
}

double ConfigJson::get_number(const char* key, std::optional<double> fallback) const {
  const nlohmann::json* v = number(key);
  if (!v) {
    if (!fallback) lacks(key);
    return *fallback;
  }
  return v->get<double>();
}

bool ConfigJson::get_bool(const char* key, bool fallback) const {
  const nlohmann::json* v = member(key);
  if (!v) return fallback;
  if (!v->is_boolean()) fail(std::string("\"") + key + "\" must be a boolean, got " + json_describe(*v));
  return v->get<bool>();
}

void ConfigJson::require_string(const char* key, const char* want) const {
  const nlohmann::json* v = member(key);
  if (v && *v != want) fail(std::string("\"") + key + "\" must be \"" + want + "\", got " + json_describe(*v));
}

}  // namespace qkv
