// Shared by the bindings files: addresses from JS as typed pointers, and C++ exceptions
// turned into "kind|message" strings that the TS layer rethrows as JS Errors (nothing
// thrown may cross into JS, where it would surface as an opaque number).
#pragma once

#include <cstdint>
#include <new>
#include <stdexcept>
#include <string>

namespace qkv::wasm {

template <class T>
T* ptr(uintptr_t address) {
  return reinterpret_cast<T*>(address);
}

// Runs f; returns "" or "<kind>|<message>" for the exception it threw.
template <class F>
std::string guarded(F&& f) {
  try {
    f();
    return {};
  } catch (const std::invalid_argument& e) {
    return std::string("invalid_argument|") + e.what();
  } catch (const std::length_error& e) {
    return std::string("length_error|") + e.what();
  } catch (const std::bad_alloc& e) {
    return std::string("bad_alloc|") + e.what();
  } catch (const std::exception& e) {
    return std::string("error|") + e.what();
  } catch (...) {
    return "error|unknown C++ exception";
  }
}

}  // namespace qkv::wasm
