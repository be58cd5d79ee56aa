// A file's bytes fed in order, chunk by chunk (a download as it arrives), gathered into units:
// byte ranges of the file (a tensor, or some rows of one), each handed whole to its callback as
// soon as its last byte has come, in file order. Bytes outside every unit (the header, tensors
// no one reads) pass by. Only the largest unit is ever held: the loaders convert each unit
// where it belongs, so a file is never held whole (weight_loader.hpp, bert.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/weight_loader.hpp"  // MallocBytes

namespace qkv {

class TensorFeed {
 public:
  using Done = std::function<void(const uint8_t* bytes)>;  // the unit's end - begin bytes

  // A unit [begin, end) of the file; units must not overlap (start checks).
  void add(uint64_t begin, uint64_t end, Done done);
  // After the last add: the file's size, and what errors name ("GPT2" -> "GPT2: the file ...").
  // Throws std::logic_error for overlapping units or one past the end.
  void start(uint64_t file_size, std::string what);
  // The file's next n bytes. Throws std::invalid_argument past the file's size, and whatever a
  // unit's callback throws.
  void feed(const uint8_t* bytes, size_t n);
  // Throws std::invalid_argument unless every byte of the file has come.
  void finish() const;

 private:
  struct Unit {
    uint64_t begin, end;
    Done done;
  };
  std::vector<Unit> units_;  // sorted by start
  size_t next_ = 0;          // the unit being gathered
  uint64_t pos_ = 0, size_ = 0;
  MallocBytes scratch_;  // the unit's bytes as they arrive
  std::string what_;
};

}  // namespace qkv
