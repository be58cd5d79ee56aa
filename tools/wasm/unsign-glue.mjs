// Emscripten 3.1.6's glue for a 4 GB heap (-sMAXIMUM_MEMORY=4GB) turns its heap indices into
// unsigned ones (`ptr >>> 2`), except inside two Atomics calls of the threads builds: the C++
// exception's reference count, `Atomics.add(GROWABLE_HEAP_I32(), this.ptr+0>>2, 1)` and the
// matching Atomics.sub. For an exception object above 2 GB that index is negative and the throw
// ends as "RangeError: Invalid atomic access index" instead of the bindings' error string.
// Rewritten in place after every link (wasm/CMakeLists.txt), idempotent; fails when a signed
// Atomics index is left (a newer Emscripten's glue would be read again).
//   node tools/wasm/unsign-glue.mjs <glue.js|.cjs|.mjs>
import { readFileSync, writeFileSync } from 'node:fs';

const file = process.argv[2];
if (!file) throw new Error('usage: node tools/wasm/unsign-glue.mjs <glue file>');
const before = readFileSync(file, 'utf8');
// the heap index of an Atomics call: `<expression>>>2` -> `<expression>>>>2` (the glue minified
// at link -O2 and above, spaced below)
const after = before.replace(/(Atomics\.(?:add|sub)\(GROWABLE_HEAP_I32\(\),\s*this\.ptr\s*\+\s*0\s*)>>(\s*2,)/g, '$1>>>$2');
const left = after.match(/Atomics\.\w+\(GROWABLE_HEAP_\w+\(\),[^,]*[^>]>>\s*\d,/g);
if (left) throw new Error(`unsign-glue: ${file} still has signed Atomics heap indices: ${left.join(' ')}`);
const n = (after.match(/Atomics\.(?:add|sub)\(GROWABLE_HEAP_I32\(\),\s*this\.ptr\s*\+\s*0\s*>>>\s*2,/g) ?? []).length;
// the threads glue has both calls: none found means the glue's form changed, not that none is there
if (n === 0) throw new Error(`unsign-glue: ${file}: found neither Atomics call on the exception's reference count`);
if (after !== before) writeFileSync(file, after);
console.log(`unsign-glue: ${file}: ${n} Atomics heap indices unsigned`);
