/** {@link ByteTokenizer}: one token per UTF-8 byte (vocab 256), the tiny model's. */
import { noChatTemplate } from './chat-template.js';
import {
  bytesText, checkDecodeOptions, cleanUpTokenization, checkEncodeOptions, checkIds, checkText, NO_SPECIAL_TOKENS,
  type DecodeOptions, type EncodedPair, type EncodeOptions, type Tokenizer,
} from './types.js';

const utf8 = new TextEncoder();

/** id = UTF-8 byte value; vocab 256; no special tokens. */
export class ByteTokenizer implements Tokenizer {
  /** `'bytes'`. */
  readonly kind = 'bytes' as const;
  readonly vocabSize = 256;
  readonly specialTokens = NO_SPECIAL_TOKENS;

  encode(text: string, options?: EncodeOptions): number[] {
    checkText('tokenizer.encode', text);
    checkEncodeOptions('tokenizer.encode', options);
    return Array.from(utf8.encode(text));
  }

  encodePair(a: string, b: string, options?: EncodeOptions): EncodedPair {
    const ia = this.encode(a, options);
    const ib = this.encode(b, options);
    return { ids: [...ia, ...ib], tokenTypeIds: [...ia.map(() => 0), ...ib.map(() => 1)] };
  }

  decodeBytes(ids: ArrayLike<number>): Uint8Array {
    checkIds('tokenizer.decode', ids, 256);
    return Uint8Array.from(ids as ArrayLike<number>);
  }

  decode(ids: ArrayLike<number>, options?: DecodeOptions): string {
    const { cleanUp } = checkDecodeOptions('tokenizer.decode', options);
    const text = new TextDecoder('utf-8').decode(this.decodeBytes(ids));
    return cleanUp ? cleanUpTokenization(text) : text;
  }

  /** `<0xNN>`: a byte has no string of its own. */
  token(id: number): string {
    checkIds('tokenizer.token', [id], 256);
    return `<0x${id.toString(16).toUpperCase().padStart(2, '0')}>`;
  }

  tokenText(id: number): string {
    checkIds('tokenizer.tokenText', [id], 256);
    return bytesText(Uint8Array.of(id));
  }

  applyChatTemplate(): string {
    throw noChatTemplate('the byte-level tokenizer');
  }
}
