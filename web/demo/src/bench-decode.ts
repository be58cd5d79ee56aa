// The benchmark page's decode row: tokens/s of a model generating greedily, at each weight
// type ('auto' as stored, 'f16', 'int8', 'int4'), on 1 and 2 threads (the plain SIMD builds)
// where the page can run threads. Each setting loads the model afresh (the module is reloaded for a thread count),
// generates a few warm-up tokens, then times the next ones; progress shows which, Cancel stops
// between tokens.
import { $, message, progress, yieldToEvents } from './ui';
import { qkv } from './api';

const MODEL = './models/tiny-kjv-bpe/';
const WEIGHTS: qkv.WeightsOption[] = ['auto', 'f16', 'int8', 'int4'];
const WARM = 4;
const TOKENS = 32;
let cancel = false;

export interface DecodeRow { weights: string; dtype: string; threads: number; tokensPerSecond: number }
export const decodeRows: DecodeRow[] = [];

function render(threadCounts: number[]): void {
  const table = $<HTMLTableElement>('#decode-table');
  const head = `<tr><th>weights</th><th>held as</th>${threadCounts.map((t) => `<th>${t} thread${t > 1 ? 's' : ''}, tok/s</th>`).join('')}</tr>`;
  const rows = WEIGHTS.filter((w) => decodeRows.some((r) => r.weights === w)).map((w) => {
    const cells = threadCounts.map((t) => decodeRows.find((r) => r.weights === w && r.threads === t));
    const dtype = cells.find((c) => c)?.dtype ?? '';
    return `<tr><td>${w}</td><td>${dtype}</td>${cells.map((c) => `<td>${c ? c.tokensPerSecond.toFixed(1) : '…'}</td>`).join('')}</tr>`;
  });
  table.innerHTML = head + rows.join('');
}

async function measure(threadCounts: number[]): Promise<void> {
  const bar = $<HTMLProgressElement>('#decode-bar'), status = $('#decode-status'), msg = $('#decode-msg');
  cancel = false;
  decodeRows.length = 0;
  message(msg, '');
  document.body.dataset.decodeDone = 'false';
  $<HTMLButtonElement>('#decode-run').disabled = true;
  $<HTMLButtonElement>('#decode-stop').disabled = false;
  const total = threadCounts.length * WEIGHTS.length;
  let done = 0;
  try {
    for (const threads of threadCounts) {
      qkv.dispose();
      await qkv.init({ variant: threads > 1 ? 'simd-threads' : 'simd', numThreads: threads });  // the plain SIMD builds
      for (const weights of WEIGHTS) {
        if (cancel) break;
        progress(bar, done / total, `${weights}, ${threads} thread${threads > 1 ? 's' : ''}: loading…`, status);
        await yieldToEvents();
        const model = (await qkv.loadModel(MODEL, { weights })) as qkv.GPT2Model;
        try {
          let n = 0, t0 = 0;
          for await (const _step of model.generate('And God said', { maxNewTokens: WARM + TOKENS, temperature: 0 })) {
            if (cancel) break;
            if (++n === WARM) t0 = performance.now();
            if (n > WARM && n % 8 === 0) progress(bar, (done + n / (WARM + TOKENS)) / total, `${weights}, ${threads} thread${threads > 1 ? 's' : ''}: token ${n}`, status);
          }
          if (cancel) break;
          decodeRows.push({ weights, dtype: model.memoryUsage().dtype, threads, tokensPerSecond: (n - WARM) / ((performance.now() - t0) / 1000) });
        } finally {
          model.dispose();
        }
        done++;
        render(threadCounts);
      }
      if (cancel) break;
    }
    progress(bar, 1, cancel ? 'Cancelled.' : `Done: ${decodeRows.length} settings.`, status);
  } catch (e) {
    message(msg, (e as Error).message, 'error');
  } finally {
    $<HTMLButtonElement>('#decode-run').disabled = false;
    $<HTMLButtonElement>('#decode-stop').disabled = true;
    document.body.dataset.decodeDone = 'true';
  }
}

export function setupDecode(): void {
  const cores = navigator.hardwareConcurrency || 1;
  const threadCounts = crossOriginIsolated && cores > 1 ? [1, 2] : [1];
  $('#decode-note').textContent = `${MODEL.replace(/^\.\/models\/|\/$/g, '')}, greedy, ${TOKENS} tokens after ${WARM} warm-up ones; `
    + (threadCounts.length > 1 ? '1 and 2 threads.' : `1 thread (${crossOriginIsolated ? 'one core' : 'page not crossOriginIsolated'}).`);
  $('#decode-run').addEventListener('click', () => void measure(threadCounts));
  $('#decode-stop').addEventListener('click', () => { cancel = true; });
}
