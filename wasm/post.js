// Appended to the Emscripten glue (--post-js): hands the JS layer (web/lib/wasm.ts) the two
// runtime objects Emscripten 3.1.6 keeps private:
//  - the linear memory, so heap views can be rebuilt after another thread grew it;
//  - the pthread registry (threads builds), so Node can unref idle workers (a library must
//    not keep the process alive) and dispose() can terminate them.
Module['qkvMemory'] = function () { return wasmMemory; };
if (typeof PThread != 'undefined') Module['qkvPThread'] = PThread;
