/**
 * What long model calls share to show progress and be cancelled: the `signal` and `onProgress`
 * options checked alike everywhere (loadModel, model.forward), and a yield to the event loop
 * between chunks of work so a page paints and a Cancel click lands.
 */
import { describe } from '../errors.js';

/** options.signal: undefined or an AbortSignal (anything else is a TypeError naming fn). */
export function optSignal(fn: string, opts: Record<string, unknown>): AbortSignal | undefined {
  const signal = opts.signal;
  if (signal === undefined) return undefined;
  if (!(typeof AbortSignal !== 'undefined' && signal instanceof AbortSignal)) {
    throw new TypeError(`${fn}: options.signal must be an AbortSignal, got ${describe(signal)}`);
  }
  return signal;
}

/** options[key]: undefined or a function (anything else is a TypeError naming fn). */
export function optFunction<F extends (...args: never[]) => unknown>(fn: string, opts: Record<string, unknown>, key: string): F | undefined {
  const f = opts[key];
  if (f === undefined) return undefined;
  if (typeof f !== 'function') throw new TypeError(`${fn}: options.${key} must be a function, got ${describe(f)}`);
  return f as F;
}

/**
 * Resolves in a new macrotask: after pending events (a click, a paint when one is due) have
 * run. Node: setImmediate. Browsers: a MessageChannel message (setTimeout is clamped to 4 ms
 * when nested and to 1 s in a background tab).
 */
export function nextTask(): Promise<void> {
  const g = globalThis as { setImmediate?: (cb: () => void) => unknown };
  if (typeof g.setImmediate === 'function') return new Promise((resolve) => void g.setImmediate!(resolve));
  if (typeof MessageChannel !== 'undefined') {
    return new Promise((resolve) => {
      const channel = new MessageChannel();
      channel.port1.onmessage = () => {
        channel.port1.close();
        resolve();
      };
      channel.port2.postMessage(null);
    });
  }
  return new Promise((resolve) => setTimeout(resolve, 0));
}
