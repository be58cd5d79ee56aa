// The Embind boundary for the residual stream's hooks (src/model/residual.hpp): the
// value_object the decoders' forward/prefill/step take (wasm/residual_arg.hpp) and the
// attribution layout (src/model/readout.hpp). Mapping only.
#include <emscripten/bind.h>

#include "decoder_bindings.hpp"
#include "residual_arg.hpp"

using qkv::wasm::ResidualArg;

EMSCRIPTEN_BINDINGS(qkv_residual) {
  emscripten::value_object<ResidualArg>("ResidualHooks")
      .field("layers", &ResidualArg::layers)
      .field("d", &ResidualArg::d)
      .field("length", &ResidualArg::length)
      .field("residPre", &ResidualArg::residPre)
      .field("attnOut", &ResidualArg::attnOut)
      .field("residMid", &ResidualArg::residMid)
      .field("mlpOut", &ResidualArg::mlpOut)
      .field("residPost", &ResidualArg::residPost)
      .field("hidden", &ResidualArg::hidden)
      .field("finalResid", &ResidualArg::finalResid)
      .field("finalScale", &ResidualArg::finalScale)
      .field("subScale", &ResidualArg::subScale)
      .field("patchSlot", &ResidualArg::patchSlot)
      .field("patch", &ResidualArg::patch)
      .field("patchRows", &ResidualArg::patchRows)
      .field("patchCount", &ResidualArg::patchCount)
      .field("steerCount", &ResidualArg::steerCount)
      .field("steerLayer", &ResidualArg::steerLayer)
      .field("steerVec", &ResidualArg::steerVec)
      .field("steerRows", &ResidualArg::steerRows);
  emscripten::value_object<qkv::wasm::AttributionLayoutArg>("AttributionLayout")
      .field("posEmbed", &qkv::wasm::AttributionLayoutArg::posEmbed)
      .field("attnBias", &qkv::wasm::AttributionLayoutArg::attnBias)
      .field("finalBias", &qkv::wasm::AttributionLayoutArg::finalBias)
      .field("count", &qkv::wasm::AttributionLayoutArg::count);
}
