// The CPU time of a headless browser's renderers, read from /proc: the browser benchmarks launch
// Chromium with a flag of their own on its command line and find its renderer processes by it
// (the page, its workers and wasm threads run there), then sum the threads' schedstat.
import { readFileSync, readdirSync } from 'node:fs';

/** The renderer processes of the browser launched with `flag` (its command line carries it). */
export function ourRenderers(flag) {
  const pids = [];
  for (const pid of readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) continue;
      for (let q = pid; q && q !== '0' && q !== '1'; q = readFileSync(`/proc/${q}/stat`, 'utf8').split(') ')[1].split(' ')[1]) {
        if (readFileSync(`/proc/${q}/cmdline`, 'utf8').includes(flag)) { pids.push(pid); break; }
      }
    } catch { /* gone */ }
  }
  return pids;
}

/** A process's CPU time over all its threads (ms, schedstat). */
export function processCpuMs(pid) {
  let ms = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try { ms += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6; } catch { /* the thread ended */ }
  }
  return ms;
}
