// On-CPU time of a headless Chromium's page main threads, for benchmarks that time a page by
// CPU rather than wall clock (Linux only): the main threads of the renderers descended from the
// browser launched with `flag` on its command line (a spare renderer's stays ~0), summed from
// /proc/<pid>/task/<pid>/schedstat, in ms. rendererThreadsMs: all their threads (workers too:
// a threaded wasm build's pool), summed from /proc/<pid>/task/*/schedstat.
import { readFileSync, readdirSync } from 'node:fs';

function ourRenderers(flag) {
  const pids = [];
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('--type=renderer')) continue;
      let ours = false;
      for (let p = pid; p && p !== '0' && p !== '1' && !ours; p = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' ')[1]) {
        ours = readFileSync(`/proc/${p}/cmdline`, 'utf8').includes(flag);
      }
      if (ours) pids.push(pid);
    } catch { /* gone */ }
  }
  return pids;
}

const schedMs = (pid, tid) => {
  try {
    return Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
  } catch {
    return 0;  // the thread ended
  }
};

export function rendererMainThreadsMs(flag) {
  return ourRenderers(flag).reduce((ms, pid) => ms + schedMs(pid, pid), 0);
}

export function rendererThreadsMs(flag) {
  let ms = 0;
  for (const pid of ourRenderers(flag)) {
    try {
      for (const tid of readdirSync(`/proc/${pid}/task`)) ms += schedMs(pid, tid);
    } catch { /* gone */ }
  }
  return ms;
}
