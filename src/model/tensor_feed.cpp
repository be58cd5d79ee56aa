#include "model/tensor_feed.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace qkv {

void TensorFeed::add(uint64_t begin, uint64_t end, Done done) { units_.push_back({begin, end, std::move(done)}); }

void TensorFeed::start(uint64_t file_size, std::string what) {
  size_ = file_size;
  what_ = std::move(what);
  std::stable_sort(units_.begin(), units_.end(), [](const Unit& a, const Unit& b) { return a.begin < b.begin; });
  size_t largest = 1;
  for (size_t i = 0; i < units_.size(); ++i) {
    const Unit& u = units_[i];
    if (u.end < u.begin || u.end > size_ || (i > 0 && u.begin < units_[i - 1].end))
      throw std::logic_error(what_ + ": internal: the units of a streaming load overlap or pass the file's end");
    largest = std::max<size_t>(largest, size_t(u.end - u.begin));
  }
  scratch_.reset(static_cast<uint8_t*>(std::malloc(largest)));
  if (!scratch_) throw std::length_error(what_ + ": cannot allocate " + std::to_string(largest) + " bytes of scratch");
  feed(nullptr, 0);  // the empty units at the start
}

void TensorFeed::feed(const uint8_t* bytes, size_t n) {
  if (n > size_ - pos_) {
    throw std::invalid_argument(what_ + ": the file holds more than the " + std::to_string(size_) +
                                " bytes its size said (" + std::to_string(pos_ + n) + " arrived)");
  }
  for (;;) {
    // the unit just gathered, if it is complete, and any empty ones where the bytes have reached
    // (a unit is never skipped into, so pos_ >= end means it is whole in the scratch)
    while (next_ < units_.size() && pos_ >= units_[next_].end) units_[next_++].done(scratch_.get());
    if (n == 0) return;
    if (next_ == units_.size()) {  // past the last unit: bytes no one reads
      pos_ += n;
      return;
    }
    const Unit& u = units_[next_];
    if (pos_ < u.begin) {  // the header, or a tensor no one reads
      const size_t skip = size_t(std::min<uint64_t>(n, u.begin - pos_));
      pos_ += skip, bytes += skip, n -= skip;
      continue;
    }
    const size_t take = size_t(std::min<uint64_t>(n, u.end - pos_));
    std::memcpy(scratch_.get() + (pos_ - u.begin), bytes, take);
    pos_ += take, bytes += take, n -= take;
  }
}

void TensorFeed::finish() const {
  if (pos_ != size_) {
    throw std::invalid_argument(what_ + ": the file is truncated: " + std::to_string(pos_) + " of its " +
                                std::to_string(size_) + " bytes arrived");
  }
}

}  // namespace qkv
