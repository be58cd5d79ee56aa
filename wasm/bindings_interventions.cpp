// The Embind boundary for head interventions (src/model/interventions.hpp): the value_object
// every model binding's forward/prefill/step takes (wasm/interventions_arg.hpp). Mapping only.
#include <emscripten/bind.h>

#include "interventions_arg.hpp"

using qkv::wasm::InterventionsArg;

EMSCRIPTEN_BINDINGS(qkv_interventions) {
  emscripten::value_object<InterventionsArg>("HeadInterventions")
      .field("layers", &InterventionsArg::layers)
      .field("heads", &InterventionsArg::heads)
      .field("length", &InterventionsArg::length)
      .field("keys", &InterventionsArg::keys)
      .field("valueDim", &InterventionsArg::valueDim)
      .field("headScale", &InterventionsArg::headScale)
      .field("blockSlot", &InterventionsArg::blockSlot)
      .field("allow", &InterventionsArg::allow)
      .field("blockCount", &InterventionsArg::blockCount)
      .field("blockHeads", &InterventionsArg::blockHeads)
      .field("outputs", &InterventionsArg::outputs)
      .field("patchSlot", &InterventionsArg::patchSlot)
      .field("patch", &InterventionsArg::patch)
      .field("patchRows", &InterventionsArg::patchRows)
      .field("patchCount", &InterventionsArg::patchCount);
}
