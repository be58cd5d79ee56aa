// A tiny protobuf writer for the one ONNX graph the benchmark needs: attention as
// onnxruntime users would build it,
//   out = MatMul(Softmax(MatMul(Q, Transpose(K)) * scale [+ mask]), V)
// Q, K, V: [1, H, L, D] float32 inputs; mask (causal only): [L, L] float32 input (0 / -inf).

const enc = new TextEncoder();

function varint(n) {
  const out = [];
  let v = BigInt(n);
  if (v < 0n) v += 1n << 64n;
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v) byte |= 0x80;
    out.push(byte);
  } while (v);
  return out;
}
const key = (field, wire) => varint((field << 3) | wire);
const bytesField = (field, bytes) => [...key(field, 2), ...varint(bytes.length), ...bytes];
const str = (field, s) => bytesField(field, [...enc.encode(s)]);
const int = (field, n) => [...key(field, 0), ...varint(n)];
const msg = (field, parts) => bytesField(field, parts.flat());
function f32(field, x) {
  const b = new Uint8Array(4);
  new DataView(b.buffer).setFloat32(0, x, true);
  return [...key(field, 5), ...b];
}

function valueInfo(field, name, dims) {
  const shape = dims.map((d) => msg(1, [int(1, d)]));              // TensorShapeProto.dim { dim_value }
  const tensorType = msg(1, [int(1, 1), msg(2, shape)]);            // TypeProto.tensor_type { elem_type FLOAT, shape }
  return msg(field, [str(1, name), msg(2, [tensorType])]);          // ValueInfoProto { name, type }
}

function node(op, inputs, outputs, attrs = []) {
  return msg(1, [...inputs.map((i) => str(1, i)), ...outputs.map((o) => str(2, o)), str(3, `${op}_${outputs[0]}`), str(4, op), ...attrs]);
}

/** The ONNX model bytes for attention over [1, H, L, D] (opset 13). */
export function attentionModel({ H, L, D, causal }) {
  const scale = 1 / Math.sqrt(D);
  const perm = msg(5, [str(1, 'perm'), int(20, 7), ...[0, 1, 3, 2].map((p) => int(8, p))]); // AttributeProto INTS
  const nodes = [
    node('Transpose', ['K'], ['KT'], [perm]),
    node('MatMul', ['Q', 'KT'], ['S']),
    node('Mul', ['S', 'scale'], ['SS']),
    ...(causal ? [node('Add', ['SS', 'mask'], ['SM'])] : []),
    node('Softmax', [causal ? 'SM' : 'SS'], ['P'], [msg(5, [str(1, 'axis'), int(20, 2), int(3, -1)])]),
    node('MatMul', ['P', 'V'], ['out']),
  ];
  const scaleInit = msg(5, [int(2, 1), f32(4, scale), str(8, 'scale')]); // TensorProto { data_type FLOAT, float_data, name } (scalar)
  const inputs = [
    valueInfo(11, 'Q', [1, H, L, D]), valueInfo(11, 'K', [1, H, L, D]), valueInfo(11, 'V', [1, H, L, D]),
    ...(causal ? [valueInfo(11, 'mask', [L, L])] : []),
  ];
  const graph = msg(7, [...nodes, str(2, 'attention'), scaleInit, ...inputs, valueInfo(12, 'out', [1, H, L, D])]);
  const model = [int(1, 8), str(2, 'qkv-bench'), graph, msg(8, [str(1, ''), int(2, 13)])];
  return new Uint8Array(model.flat());
}

/** The additive causal mask [L, L]: 0 where j <= i, -inf above the diagonal. */
export function causalMask(L) {
  const m = new Float32Array(L * L);
  for (let i = 0; i < L; i++) for (let j = i + 1; j < L; j++) m[i * L + j] = -Infinity;
  return m;
}
