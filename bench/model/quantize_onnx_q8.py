#!/usr/bin/python3
"""onnxruntime-web's q8 peer: the F32 ONNX export quantized as onnxruntime.quantization.quantize_dynamic does.

    /usr/bin/python3 bench/model/quantize_onnx_q8.py IN.onnx OUT.onnx

What transformers.js ships as `q8` is onnxruntime's dynamic quantization (quantize_dynamic,
weight_type QInt8, per_channel False): every linear layer's weight int8, symmetric, one scale per
tensor (scale = max|W| / 127, zero point 0, values nearest(W / scale) in [-127, 127]); at run time
the activation is quantized per tensor to uint8 with a zero point (DynamicQuantizeLinear:
scale = (max(x, 0) - min(x, 0)) / 255), the product is MatMulInteger (int32), then Cast to float
and Mul by x_scale * w_scale. onnxruntime's graph optimizer (level 'all') fuses those four nodes
into DynamicQuantizeMatMul, its integer GEMM, which is what runs. onnxruntime (Python) is not
installed here, so this script writes the same nodes with the onnx package:

  MatMul(x, W)        -> DynamicQuantizeLinear(x) -> MatMulInteger(x_q, W_q, x_zp, 0) -> Cast -> Mul(x_scale * w_scale)
  Gemm(x, W, b)       -> the same, then Add(b) (torch exports GPT-2's Conv1D as Gemm; quantize_dynamic
                         leaves Gemm alone, but transformers.js's exports write linear layers as
                         MatMul + Add, which it quantizes: this is that)
  Gather(W_table, i)  -> Gather(W_q, i) -> DequantizeLinear(w_scale, 0) (the embedding, as quantize_dynamic's GatherQuant)

Only MatMul / Gemm whose weight is an initializer (2-D float32) are rewritten (the attention's
activation x activation MatMuls stay float), as quantize_dynamic does.
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def quantize_weight(w):
    """int8 symmetric per tensor: (q, scale), w ~= scale * q."""
    amax = float(np.max(np.abs(w)))
    scale = amax / 127.0 if amax > 0 else 1.0
    q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
    return q, np.float32(scale)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    model = onnx.load(src)
    g = model.graph
    inits = {i.name: i for i in g.initializer}
    quantized = {}  # weight name -> (q name, scale name, zero-point name)
    new_inits = []

    def weight_q(name, transpose=False):
        key = (name, transpose)
        if key not in quantized:
            w = numpy_helper.to_array(inits[name])
            if transpose:
                w = w.T
            q, scale = quantize_weight(w)
            base = name + ('_T' if transpose else '') + '_q8'
            new_inits.append(numpy_helper.from_array(q, base))
            new_inits.append(numpy_helper.from_array(np.array(scale, np.float32), base + '_scale'))
            new_inits.append(numpy_helper.from_array(np.array(0, np.int8), base + '_zero_point'))
            quantized[key] = (base, base + '_scale', base + '_zero_point')
        return quantized[key]

    def is_weight(name):
        return name in inits and inits[name].data_type == TensorProto.FLOAT and len(inits[name].dims) == 2

    nodes, counts = [], {'MatMul': 0, 'Gemm': 0, 'Gather': 0}
    for n in g.node:
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        if n.op_type == 'MatMul' and is_weight(n.input[1]) or \
           n.op_type == 'Gemm' and is_weight(n.input[1]) and not attrs.get('transA', 0) and \
           attrs.get('alpha', 1.0) == 1.0 and attrs.get('beta', 1.0) == 1.0:
            wq, ws, wz = weight_q(n.input[1], transpose=bool(attrs.get('transB', 0)))
            p = n.name or n.output[0]
            x = n.input[0]
            out = n.output[0]
            nodes += [
                helper.make_node('DynamicQuantizeLinear', [x], [p + '_xq', p + '_xs', p + '_xz'], name=p + '_quant'),
                helper.make_node('MatMulInteger', [p + '_xq', wq, p + '_xz', wz], [p + '_i32'], name=p + '_MatMulInteger'),
                helper.make_node('Cast', [p + '_i32'], [p + '_f32'], to=TensorProto.FLOAT, name=p + '_cast'),
                helper.make_node('Mul', [p + '_xs', ws], [p + '_scale'], name=p + '_scales_mul'),
            ]
            if n.op_type == 'Gemm' and len(n.input) > 2 and n.input[2]:
                nodes += [helper.make_node('Mul', [p + '_f32', p + '_scale'], [p + '_mm'], name=p + '_output_mul'),
                          helper.make_node('Add', [p + '_mm', n.input[2]], [out], name=p + '_bias_add')]
            else:
                nodes.append(helper.make_node('Mul', [p + '_f32', p + '_scale'], [out], name=p + '_output_mul'))
            counts[n.op_type] += 1
        elif n.op_type == 'Gather' and is_weight(n.input[0]) and attrs.get('axis', 0) == 0:
            wq, ws, wz = weight_q(n.input[0])
            p = n.name or n.output[0]
            nodes += [helper.make_node('Gather', [wq, n.input[1]], [p + '_q'], name=p + '_q8'),
                      helper.make_node('DequantizeLinear', [p + '_q', ws, wz], [n.output[0]], name=p + '_dequant')]
            counts['Gather'] += 1
        else:
            nodes.append(n)
    used = {i for n in nodes for i in n.input}
    keep = [i for i in g.initializer if i.name in used]
    del g.node[:]
    g.node.extend(nodes)
    del g.initializer[:]
    g.initializer.extend(keep + [i for i in new_inits if i.name in used])
    # DynamicQuantizeLinear and MatMulInteger are opset 10/11 ops of the default domain
    onnx.checker.check_model(model)
    onnx.save(model, dst)
    f32 = sum(np.prod(i.dims) * 4 for i in inits.values() if i.data_type == TensorProto.FLOAT)
    print(f'quantize_onnx_q8: {counts["MatMul"]} MatMul + {counts["Gemm"]} Gemm -> MatMulInteger, '
          f'{counts["Gather"]} Gather -> int8 + DequantizeLinear, {len(quantized)} weights int8 per tensor; '
          f'float weights before {f32 / 2**20:.0f} MiB; wrote {dst}')


if __name__ == '__main__':
    main()
