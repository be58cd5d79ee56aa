// On-CPU time of a headless Chromium's page main threads, for benchmarks that time a page by
// CPU rather than wall clock (Linux only): the main threads of the renderers descended from the
// browser launched with `flag` on its command line (a spare renderer's stays ~0), summed from
// /proc/<pid>/task/<pid>/schedstat, in ms.
import { readFileSync, readdirSync } from 'node:fs';

export function rendererMainThreadsMs(flag) {
  let ms = 0;
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) continue;
      let ours = false;
      for (let p = pid; p && p !== '0' && p !== '1' && !ours; p = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ')[1]) {
        ours = readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(flag);
      }
      if (ours) ms += Number(readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
    } catch { /* gone */ }
  }
  return ms;
}
