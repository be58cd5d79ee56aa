// Reading bench/results/ for tools/bench-report.mjs: the result files, what each says about its
// run (date, machine, load average), choosing among runs, and the number formats of the tables.
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const RESULTS = join(resolve(dirname(fileURLToPath(import.meta.url)), '../..'), 'bench/results');

// The machines, by a pattern of their result files' names. The files record the CPU's brand
// ("AMD EPYC") but not its generation; the file names carry it where it matters.
const HOSTS = [
  [/zen5/, '2-vCPU AMD EPYC (Zen 5)'],
  [/20261203T07|epyc/, '2-vCPU AMD EPYC (Zen 4)'],
  [/20261203T1[68]|20261203T19/, '2-vCPU AMD EPYC (Zen 3)'],
  // The attention benchmarks ran on one machine; not every one of them records its CPU.
  [/^(js|relaxed|attn-shape|cpu-time|jit-profile|native)-/, '2-core Intel Xeon VM'],
];

const cache = new Map();
/** One result file: { name, json, date (Date), host, load (the 1-minute load averages seen) }. */
export function result(name) {
  if (cache.has(name)) return cache.get(name);
  const json = JSON.parse(readFileSync(join(RESULTS, name), 'utf8'));
  const m = json.machine ?? {};
  const cpu = String(m.cpu ?? json.cpu ?? '').replace(/\(R\)/g, '').replace(/ Processor$/, '');
  const cores = m.cores ?? m.cpus ?? json.cores ?? json.cpus;
  const host = HOSTS.find(([re]) => re.test(name))?.[1] ?? (cpu ? `${cores ? `${cores}-core ` : ''}${cpu}` : '');
  const la = m.load_average ?? m.loadavg ?? json.load ?? json.loadavg;
  const load = Array.isArray(la) ? [la[0]] : la && typeof la === 'object' ? [la.before?.[0], la.after?.[0]] : [];
  const r = { name, json, date: new Date(json.date), host, load: load.filter((x) => typeof x === 'number') };
  cache.set(name, r);
  return r;
}

/** The result files whose names match `re`, oldest first. */
export function results(re) {
  return readdirSync(RESULTS).filter((f) => f.endsWith('.json') && re.test(f)).map(result)
    .sort((a, b) => a.date - b.date || a.name.localeCompare(b.name, 'en', { numeric: true }));
}

/** The newest file matching `re`. */
export function newest(re) {
  const all = results(re);
  if (!all.length) throw new Error(`bench-report: no result file matches ${re}`);
  return all[all.length - 1];
}

/** Runs grouped into series by their name less the trailing -rN (a series: one command repeated). */
export function series(re) {
  const groups = new Map();
  for (const r of results(re)) {
    const key = r.name.replace(/-r\d+\.json$/, '');
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(r);
  }
  return [...groups.values()];
}

const day = (d) => d.toISOString().slice(0, 10);
const time = (d) => d.toISOString().slice(11, 16);

/** "2026-12-04 21:23-22:14 UTC" for a set of runs (dates joined when they span days). */
export function when(files) {
  const ds = files.map((f) => f.date).sort((a, b) => a - b);
  const [a, b] = [ds[0], ds[ds.length - 1]];
  if (day(a) !== day(b)) return `${day(a)} to ${day(b)}`;
  return `${day(a)} ${time(a)}${time(a) === time(b) ? '' : `-${time(b)}`} UTC`;
}

/** The sources line of a table: the files, when, where, at what load. */
export function source(files) {
  const names = files.length > 3 ? `${files[0].name} .. ${files[files.length - 1].name} (${files.length} runs)`
    : files.map((f) => f.name).join(', ');
  const hosts = [...new Set(files.map((f) => f.host).filter(Boolean))].join('; ');
  const loads = files.flatMap((f) => f.load);
  const load = loads.length ? `, load ${range(loads, f1)}` : '';
  return `${names}: ${when(files)}${hosts ? `, ${hosts}` : ''}${load}`;
}

// Number formats.
export const f0 = (x) => x.toFixed(0);
export const f1 = (x) => x.toFixed(1);
export const f2 = (x) => x.toFixed(2);
export const pct = (x) => `${(100 * x).toFixed(1)}%`;
export const ratio = (x) => `${x.toFixed(2)}x`;
export const bold = (s) => `**${s}**`;
export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b), n = s.length;
  return n % 2 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
};
/** "a-b" over values as formatted (one value when they agree). */
export function range(xs, fmt = f1) {
  const lo = fmt(Math.min(...xs)), hi = fmt(Math.max(...xs));
  return lo === hi ? lo : `${lo}-${hi}`;
}
