"""Seeded random weights that JavaScript can make bit for bit (tests/js/random-weights.js).

A checkpoint too big to commit (a MiniLM-shaped encoder with BERT's 30522-token vocabulary is
~90 MB) is made again at test time from its seed: the reference script here and the JS test
compute the same float32 values from (seed, tensor name, element index):

    salt  = lowbias32(fnv1a32(name) ^ seed)
    h     = lowbias32(lowbias32(i) ^ salt)                   i = flat element index
    u     = (h >> 8) / 2^24                                  in [0, 1), 24 bits
    value = float32((2u - 1) * sqrt(3) * std) (+ 1 for a LayerNorm weight)

Uniform with standard deviation `std` (0.2, the project's choice for model tests). All the
arithmetic is uint32 wrap-around and float64 operations that are exact or correctly rounded
the same way in numpy and JS; the last step rounds to float32 once.
lowbias32 is Chris Wellons' 32-bit integer hash (x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15;
x *= 0x846ca68b; x ^= x >> 16).
"""

import numpy as np


def lowbias32(x):
    x = np.asarray(x, dtype=np.uint32)
    x = x ^ (x >> np.uint32(16))
    x = x * np.uint32(0x7feb352d)
    x = x ^ (x >> np.uint32(15))
    x = x * np.uint32(0x846ca68b)
    x = x ^ (x >> np.uint32(16))
    return x


def fnv1a32(name):
    h = 0x811c9dc5
    for b in name.encode('utf-8'):
        h = ((h ^ b) * 0x01000193) & 0xffffffff
    return h


def is_layer_norm_weight(name):
    return name.endswith('LayerNorm.weight') or name.endswith('layer_norm.weight')


def tensor(seed, name, shape, std=0.2):
    """float32 array of `shape` for tensor `name`."""
    n = int(np.prod(shape))
    with np.errstate(over='ignore'):
        salt = lowbias32(np.uint32(fnv1a32(name) ^ (seed & 0xffffffff)))
        h = lowbias32(lowbias32(np.arange(n, dtype=np.uint32)) ^ salt)
    u = (h >> np.uint32(8)).astype(np.float64) / 16777216.0
    v = (2.0 * u - 1.0) * (np.sqrt(3.0) * std)
    if is_layer_norm_weight(name):
        v = v + 1.0
    return v.astype(np.float32).reshape(shape)


def checkpoint(seed, shapes, std=0.2):
    """{name: float32 array} for {name: shape}."""
    return {k: tensor(seed, k, s, std) for k, s in shapes.items()}
