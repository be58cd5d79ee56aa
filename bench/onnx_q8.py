#!/usr/bin/python3
"""Dynamic int8 quantization of an ONNX graph's MatMuls, as onnxruntime's quantize_dynamic writes
it for transformers.js's "q8" files (the onnxruntime Python package is not installed here, so the
same transform is done with the onnx package alone):

    /usr/bin/python3 bench/onnx_q8.py IN.onnx OUT.onnx [--per-tensor] [--no-reduce-range]

Every MatMul whose second input B is a 2-D float initializer [K, N] becomes

    A -> DynamicQuantizeLinear -> (A_q uint8, a_scale, a_zp)
    MatMulInteger(A_q, B_q int8, a_zp, b_zp) -> int32 -> Cast(float) -> Mul(a_scale * b_scale)

with B quantized symmetrically to int8 (zero point 0), one scale per output column N
(per_channel) and, by default, 7-bit range +-64 (reduce_range), as transformers.js quantizes
encoder models (scripts/convert.py: per_channel and reduce_range on for BERT-like model types;
weight type QInt8). onnxruntime fuses the four nodes into its DynamicQuantizeMatMul kernel when it
loads the graph. Other nodes (Gather of the embedding tables, attention's activation x activation
MatMuls) stay float32, as in quantize_dynamic's MatMul-only pass.
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def quantize_weight(b, per_channel, reduce_range):
    """b float32 [K, N] -> (int8 [K, N], scale float32 [N] or [], zero point int8 like scale)."""
    qmax = 64.0 if reduce_range else 127.0
    amax = np.abs(b).max(axis=0) if per_channel else np.array(np.abs(b).max())
    scale = (np.maximum(amax, 1e-12) / qmax).astype(np.float32)
    q = np.clip(np.rint(b / scale), -qmax, qmax).astype(np.int8)
    return q, scale, np.zeros(scale.shape, np.int8)


def transform(model, per_channel=True, reduce_range=True):
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    nodes = []
    count = 0
    for node in g.node:
        b = inits.get(node.input[1]) if node.op_type == 'MatMul' else None
        if b is None or len(b.dims) != 2 or b.data_type != TensorProto.FLOAT:
            nodes.append(node)
            continue
        count += 1
        p = f'{node.name or node.output[0]}_q8'
        q, scale, zp = quantize_weight(numpy_helper.to_array(b), per_channel, reduce_range)
        g.initializer.extend([numpy_helper.from_array(q, p + '_B'), numpy_helper.from_array(scale, p + '_B_scale'),
                              numpy_helper.from_array(zp, p + '_B_zp')])
        a = node.input[0]
        nodes += [
            helper.make_node('DynamicQuantizeLinear', [a], [p + '_A', p + '_A_scale', p + '_A_zp'], name=p + '_dql'),
            helper.make_node('MatMulInteger', [p + '_A', p + '_B', p + '_A_zp', p + '_B_zp'], [p + '_i32'], name=p + '_mmi'),
            helper.make_node('Cast', [p + '_i32'], [p + '_f32'], to=TensorProto.FLOAT, name=p + '_cast'),
            helper.make_node('Mul', [p + '_A_scale', p + '_B_scale'], [p + '_scale'], name=p + '_scale_mul'),
            helper.make_node('Mul', [p + '_f32', p + '_scale'], [node.output[0]], name=p + '_mul'),
        ]
    del g.node[:]
    g.node.extend(nodes)
    used = {i for n in g.node for i in n.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    return count


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('input')
    ap.add_argument('output')
    ap.add_argument('--per-tensor', action='store_true', help='one scale per weight matrix (not per column)')
    ap.add_argument('--no-reduce-range', action='store_true', help='8-bit weights (+-127), not 7-bit')
    args = ap.parse_args()
    model = onnx.load(args.input)
    n = transform(model, not args.per_tensor, not args.no_reduce_range)
    onnx.checker.check_model(model)
    onnx.save(model, args.output)
    print(f'onnx_q8: {n} MatMuls quantized -> {args.output}')


if __name__ == '__main__':
    main()
