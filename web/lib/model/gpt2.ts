/** A loaded GPT-2-family model (src/model/gpt2.hpp): the shared decoder API over its binding. */
import type { QkvModule } from '../wasm/module.js';
import { DecoderModel, type WasmDecoder } from './decoder.js';
import type { GPT2Config } from './files.js';
import type { Tokenizer } from './tokenizer.js';

/** A loaded GPT-2 model. Holds wasm memory: call {@link DecoderModel.dispose} when done. */
export class GPT2Model extends DecoderModel<GPT2Config> {
  /** The model's tokenizer: byte-level (vocab 256), GPT-2 BPE or a tokenizer.json. */
  declare readonly tokenizer: Tokenizer;

  /** @internal use {@link loadModel} */
  constructor(m: QkvModule, handle: WasmDecoder, config: GPT2Config, tokenizer: Tokenizer) {
    const dims = {
      layers: config.n_layer, heads: config.n_head, kvHeads: config.n_head, headDim: config.n_embd / config.n_head, d: config.n_embd,
      vocab: config.vocab_size, positions: config.n_positions, positionsKey: 'n_positions',
      windows: Object.freeze(new Array<number>(config.n_layer).fill(0)),
    };
    super(m, handle, config, tokenizer, dims, 'gpt2');
  }
}
