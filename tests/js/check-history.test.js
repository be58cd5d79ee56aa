// tools/check-history.mjs (stage 05): what it takes for history in the tree, and what it leaves.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { historyReferences } from '../../tools/check-history.mjs';

test('check-history: the project\'s issue and session numbers, work stages and session branches are caught', () => {
  for (const line of [
    'the int8 targets of issue 27 (prefill >= 1.1x)',
    '// the weight choices (Issue 9, item 2)',
    'issues 25 and 26 asked for it',
    "session 41's build converted inside the file",
    'Sessions 38-39 measured the Zen 3',
    'done in stage 3 of the work',
    'What branch s20-f16w changed',
    "s19-smol's own pairs",
  ]) assert.notDeepEqual(historyReferences(line), [], line);
});

test('check-history: test stages, other projects\' issues and ordinary English pass', () => {
  for (const line of [
    'stage 05 runs the lint; stage 60 the demo',
    'tools/stages/10-cpp.sh',
    'onnxruntime issue #425 describes the crash',
    'a session of onnxruntime-web (InferenceSession) per model',
    'the issue is that 2 threads share one core',
    'attn-shape tags s33 and s42',
    'sessions cache their KV for 1024 positions',
    'this is an issue: 3 of 4 lanes empty',
  ]) assert.deepEqual(historyReferences(line), [], line);
});
