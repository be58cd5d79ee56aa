// The ONNX graph of bench/js/relaxed.mjs's onnxruntime-web matmul rows: one GPT-2-small layer's
// product, Y[M, N] = MatMul(X[M, K], W), with W a float32 initializer (as an exported model
// holds its weights, so ORT packs W once, at session creation) and M a symbolic dimension
// (one session serves every M). A minimal protobuf writer over Uint8Arrays: the initializer's
// 2.4-9.4 MB are copied once, never spread into a JS array (bench/js/onnx.js's writer spreads).

const enc = new TextEncoder();

function varint(n) {
  const out = [];
  do {
    let byte = n % 128;
    n = Math.floor(n / 128);
    if (n) byte |= 0x80;
    out.push(byte);
  } while (n);
  return Uint8Array.from(out);
}

function concat(parts) {
  const out = new Uint8Array(parts.reduce((a, p) => a + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

const key = (field, wire) => varint(field * 8 + wire);
const int = (field, n) => concat([key(field, 0), varint(n)]); // non-negative only
const msg = (field, parts) => {
  const body = concat(parts);
  return concat([key(field, 2), varint(body.length), body]);
};
const str = (field, s) => msg(field, [enc.encode(s)]);

// TensorShapeProto.Dimension: dim_value (1) or dim_param (2)
const dim = (d) => msg(1, [typeof d === 'string' ? str(2, d) : int(1, d)]);

// ValueInfoProto { name, type: TypeProto { tensor_type { elem_type FLOAT, shape } } }
const valueInfo = (field, name, dims) => msg(field, [str(1, name), msg(2, [msg(1, [int(1, 1), msg(2, dims.map(dim))])])]);

/** ONNX model bytes (opset 13) for Y = MatMul(X, W), X ['M', K] an input, W [K, N] (a Float32Array) an initializer. */
export function matmulModel(W, K, N) {
  if (W.length !== K * N) throw new Error(`matmulModel: W has ${W.length} elements, not K * N = ${K} * ${N}`);
  const raw = new Uint8Array(W.buffer, W.byteOffset, W.byteLength);
  // TensorProto { dims, data_type FLOAT, name, raw_data (little-endian float32, as typed arrays are here) }
  const weights = msg(5, [int(1, K), int(1, N), int(2, 1), str(8, 'W'), msg(9, [raw])]);
  const node = msg(1, [str(1, 'X'), str(1, 'W'), str(2, 'Y'), str(3, 'matmul'), str(4, 'MatMul')]);
  const graph = msg(7, [node, str(2, 'matmul'), weights, valueInfo(11, 'X', ['M', K]), valueInfo(12, 'Y', ['M', N])]);
  return concat([int(1, 8), str(2, 'qkv-bench'), graph, msg(8, [str(1, ''), int(2, 13)])]);
}
