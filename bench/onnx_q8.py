#!/usr/bin/python3
"""onnxruntime-web's q8 peers: an F32 ONNX graph's dynamic int8 quantization, as onnxruntime writes it.

What transformers.js ships as "q8" is onnxruntime.quantization.quantize_dynamic's output (weight_type
QInt8). The onnxruntime Python package is not installed here, so the same transform is done with the
onnx package alone:

    /usr/bin/python3 bench/onnx_q8.py IN.onnx OUT.onnx [--per-tensor] [--no-reduce-range] [--gemm] [--gather]
                                                       [--names node|weight]

    MiniLM (bench/encoder/make_minilm.py):  no options (the defaults are convert.py's for BERT-like models)
    GPT-2 small (bench/model/ort_q8.mjs, for gpt2_small.mjs and int8_accuracy.mjs):
                                            --per-tensor --no-reduce-range --gemm --gather --names weight

Every MatMul whose weight W (its second input) is a 2-D float32 initializer [K, N] becomes

    x -> DynamicQuantizeLinear -> (x_q uint8, x_scale, x_zp)
    MatMulInteger(x_q, W_q int8, x_zp, w_zp = 0) -> int32 -> Cast(float) -> Mul(x_scale * w_scale)

W is quantized symmetrically (zero point 0): w_scale = max|W| / qmax in float64, then float32 (1
where it is below float32's smallest normal, as onnxruntime's compute_scale_zp), W_q =
nearest(W / w_scale) in [-qmax, qmax]. The activation is quantized at run time per tensor to uint8
with a zero point (DynamicQuantizeLinear: x_scale = (max(x, 0) - min(x, 0)) / 255). onnxruntime's
graph optimizer (level 'all') fuses the four nodes into DynamicQuantizeMatMul, its integer GEMM,
which is what runs. MatMuls of two activations (attention's) stay float32, as in quantize_dynamic.

The options and what they correspond to:

  (default)          per_channel=True: one w_scale per output column N; with --per-tensor,
                     per_channel=False: one per matrix.
  (default)          reduce_range=True: 7-bit weights, qmax = 64; with --no-reduce-range, 8-bit, qmax = 127.
                     transformers.js's scripts/convert.py turns per_channel and reduce_range on for
                     BERT-like model types (MiniLM's peer); GPT-2's peer is per_channel False, 8-bit.
  --gemm             Gemm(x, W, b) (transA 0, alpha = beta = 1; transB transposes W first) is written
                     as the quantized MatMul, then Add(b). quantize_dynamic leaves Gemm alone, but
                     torch exports GPT-2's Conv1D as Gemm where transformers.js's exports write linear
                     layers as MatMul + Add, which it quantizes: this is that.
  --gather           Gather(W_table, i) on axis 0 -> Gather(W_q, i) -> DequantizeLinear(w_scale, 0):
                     quantize_dynamic's GatherQuant (Gather is one of its default op types) for the
                     embedding tables; without it Gathers stay float32, as in a MatMul-only pass.
                     Needs --per-tensor (a per-column table is not written).
  --names            the new tensors' names, which no runtime reads; kept so the q8 files written
                     before the two scripts were one stay byte-identical: 'node' (default) names
                     everything after the node (NODE_q8_B, NODE_q8_A, ...) and quantizes a weight once
                     per node; 'weight' names the int8 weight after the float one (W_q8, W_T_q8 when
                     transposed, W_q8_scale, W_q8_zero_point), quantized once however many nodes use it.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# The names a rewrite writes, per --names: {n} is the node's name (its first output's when it has
# none), {w} the float weight's ({w}_T when transposed). The int8 weight's name is also its cache key.
NAMES = {
    'node': {
        'w_q': '{n}_q8_B', 'w_scale': '{n}_q8_B_scale', 'w_zp': '{n}_q8_B_zp',
        'x_q': '{n}_q8_A', 'x_scale': '{n}_q8_A_scale', 'x_zp': '{n}_q8_A_zp',
        'i32': '{n}_q8_i32', 'f32': '{n}_q8_f32', 'scale': '{n}_q8_scale', 'mm': '{n}_q8_mm', 'gathered': '{n}_q8_gathered',
        'quant': '{n}_q8_dql', 'matmul': '{n}_q8_mmi', 'cast': '{n}_q8_cast', 'scales_mul': '{n}_q8_scale_mul',
        'output_mul': '{n}_q8_mul', 'bias_add': '{n}_q8_add', 'gather': '{n}_q8_gather', 'dequant': '{n}_q8_dequant',
    },
    'weight': {
        'w_q': '{w}_q8', 'w_scale': '{w}_q8_scale', 'w_zp': '{w}_q8_zero_point',
        'x_q': '{n}_xq', 'x_scale': '{n}_xs', 'x_zp': '{n}_xz',
        'i32': '{n}_i32', 'f32': '{n}_f32', 'scale': '{n}_scale', 'mm': '{n}_mm', 'gathered': '{n}_q',
        'quant': '{n}_quant', 'matmul': '{n}_MatMulInteger', 'cast': '{n}_cast', 'scales_mul': '{n}_scales_mul',
        'output_mul': '{n}_output_mul', 'bias_add': '{n}_bias_add', 'gather': '{n}_q8', 'dequant': '{n}_dequant',
    },
}


def quantize_weight(w, per_channel, reduce_range):
    """w float32 [K, N] -> (int8 [K, N], scale float32 [N] or [], zero point int8 shaped like scale),
    w ~= scale * q, symmetric: scale = max|w| / qmax per column (or per tensor), 1 where that is not normal."""
    qmax = 64.0 if reduce_range else 127.0
    # the scale in float64, as onnxruntime computes it, then float32
    scale = (np.abs(w).max(axis=0) if per_channel else np.abs(w).max()).astype(np.float64) / qmax
    scale = np.where(scale >= np.finfo(np.float32).tiny, scale, 1.0).astype(np.float32)
    # nearest integer of w / scale (float32), clipped to the range
    q = np.clip(np.rint(w / scale), -qmax, qmax).astype(np.int8)
    return q, scale, np.zeros(scale.shape, np.int8)


class Rewriter:
    """Writes the quantized nodes of one graph; the int8 weights go to new_inits, one per name."""

    def __init__(self, graph, per_channel, reduce_range, names):
        self.inits = {t.name: t for t in graph.initializer}
        self.per_channel, self.reduce_range, self.names = per_channel, reduce_range, NAMES[names]
        self.new_inits = []
        self.quantized = {}  # int8 weight name -> (its name, scale name, zero-point name)

    def is_weight(self, name):
        """name is a 2-D float32 initializer."""
        t = self.inits.get(name)
        return t is not None and t.data_type == TensorProto.FLOAT and len(t.dims) == 2

    def name(self, key, node, weight=''):
        """The name NAMES[--names][key] gives for node (and the float weight's name `weight`)."""
        return self.names[key].format(n=node.name or node.output[0], w=weight)

    def namer(self, node):
        """key -> the name of node's new tensor or node `key`."""
        return lambda key: self.name(key, node)

    def weight(self, node, name, transpose=False):
        """The int8 weight, scale and zero point of initializer `name` (transposed first) for node."""
        w = name + ('_T' if transpose else '')
        q_name = self.name('w_q', node, w)
        if q_name not in self.quantized:
            # quantize once per name: per node or per weight, as --names says
            f = numpy_helper.to_array(self.inits[name])
            q, scale, zp = quantize_weight(f.T if transpose else f, self.per_channel, self.reduce_range)
            names = (q_name, self.name('w_scale', node, w), self.name('w_zp', node, w))
            self.new_inits += [numpy_helper.from_array(a, n) for a, n in zip((q, scale, zp), names)]
            self.quantized[q_name] = names
        return self.quantized[q_name]

    def matmul(self, node, x, w, out, bias=None):
        """x W (+ bias) -> out as DynamicQuantizeLinear, MatMulInteger, Cast, Mul (and Add)."""
        wq, ws, wz = w
        n = self.namer(node)
        nodes = [
            helper.make_node('DynamicQuantizeLinear', [x], [n('x_q'), n('x_scale'), n('x_zp')], name=n('quant')),
            helper.make_node('MatMulInteger', [n('x_q'), wq, n('x_zp'), wz], [n('i32')], name=n('matmul')),
            helper.make_node('Cast', [n('i32')], [n('f32')], to=TensorProto.FLOAT, name=n('cast')),
            helper.make_node('Mul', [n('x_scale'), ws], [n('scale')], name=n('scales_mul')),
        ]
        if bias is None:
            return nodes + [helper.make_node('Mul', [n('f32'), n('scale')], [out], name=n('output_mul'))]
        return nodes + [helper.make_node('Mul', [n('f32'), n('scale')], [n('mm')], name=n('output_mul')),
                        helper.make_node('Add', [n('mm'), bias], [out], name=n('bias_add'))]

    def gather(self, node, w, indices, out):
        """W_table[indices] -> out as Gather of the int8 table, then DequantizeLinear."""
        wq, ws, wz = w
        n = self.namer(node)
        return [helper.make_node('Gather', [wq, indices], [n('gathered')], name=n('gather')),
                helper.make_node('DequantizeLinear', [n('gathered'), ws, wz], [out], name=n('dequant'))]


def transform(model, per_channel=True, reduce_range=True, gemm=False, gather=False, names='node'):
    """Rewrites model's graph in place; returns the counts of MatMul, Gemm and Gather nodes rewritten."""
    if gather and per_channel:
        raise ValueError('onnx_q8.transform: gather=True needs per_channel=False '
                         '(per-column embedding tables are not written)')
    if names not in NAMES:
        raise ValueError(f'onnx_q8.transform: names is {names!r}, not one of {sorted(NAMES)}')
    g = model.graph
    r = Rewriter(g, per_channel, reduce_range, names)
    nodes, counts = [], {'MatMul': 0, 'Gemm': 0, 'Gather': 0}
    for node in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == 'MatMul' and r.is_weight(node.input[1]):
            # x W with W an initializer
            nodes += r.matmul(node, node.input[0], r.weight(node, node.input[1]), node.output[0])
        elif gemm and node.op_type == 'Gemm' and r.is_weight(node.input[1]) and not attrs.get('transA', 0) and \
                attrs.get('alpha', 1.0) == 1.0 and attrs.get('beta', 1.0) == 1.0:
            # x W (+ b), W transposed first when transB
            w = r.weight(node, node.input[1], transpose=bool(attrs.get('transB', 0)))
            bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
            nodes += r.matmul(node, node.input[0], w, node.output[0], bias)
        elif gather and node.op_type == 'Gather' and r.is_weight(node.input[0]) and attrs.get('axis', 0) == 0:
            # rows of an embedding table
            nodes += r.gather(node, r.weight(node, node.input[0]), node.input[1], node.output[0])
        else:
            nodes.append(node)
            continue
        counts[node.op_type] += 1
    # the graph: the new nodes, the initializers still read (the float weights replaced are not), then the int8 ones
    used = {i for n in nodes for i in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.node[:]
    g.node.extend(nodes)
    del g.initializer[:]
    g.initializer.extend(keep + [t for t in r.new_inits if t.name in used])
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__[__doc__.index('The options'):])
    ap.add_argument('input')
    ap.add_argument('output')
    ap.add_argument('--per-tensor', action='store_true', help='one scale per weight matrix, not per column')
    ap.add_argument('--no-reduce-range', action='store_true', help='8-bit weights (+-127), not 7-bit (+-64)')
    ap.add_argument('--gemm', action='store_true', help='also Gemm(x, W, b) -> the quantized MatMul + Add(b)')
    ap.add_argument('--gather', action='store_true', help='also the embedding Gathers: int8 table + DequantizeLinear')
    ap.add_argument('--names', choices=sorted(NAMES), default='node', help='naming of the new tensors (default node)')
    args = ap.parse_args()
    if args.gather and not args.per_tensor:
        ap.error('--gather needs --per-tensor (per-column embedding tables are not written)')
    model = onnx.load(args.input)
    counts = transform(model, not args.per_tensor, not args.no_reduce_range, args.gemm, args.gather, args.names)
    # DynamicQuantizeLinear and MatMulInteger are opset 10/11 ops of the default domain
    onnx.checker.check_model(model)
    onnx.save(model, args.output)
    print(f'onnx_q8: {counts["MatMul"]} MatMul + {counts["Gemm"]} Gemm -> MatMulInteger, '
          f'{counts["Gather"]} Gather -> int8 + DequantizeLinear; weights int8 '
          f'{"per tensor" if args.per_tensor else "per column"}, +-{127 if args.no_reduce_range else 64}; '
          f'wrote {args.output}')


if __name__ == '__main__':
    main()
