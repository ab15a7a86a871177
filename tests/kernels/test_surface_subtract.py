"""The compiled ramp subtraction (:func:`xdem.kernels.surface.subtract_polynomial_surface`) against
the numpy expression it replaces: bit for bit (same float64 operations in the same order)."""

from __future__ import annotations

import numpy as np
import pytest

from xdem.kernels.surface import polynomial_surface, subtract_polynomial_surface

TENSOR2 = [(i, j) for i in range(3) for j in range(3)]
TOTAL3 = [(i, j) for i in range(4) for j in range(4) if i + j <= 3]


def _numpy(block, u, v, terms, coefs):
    acc = polynomial_surface(u[None, :], v[:, None], terms, coefs)
    np.subtract(block, acc, out=acc)
    return acc.astype(block.dtype, copy=False)


@pytest.mark.parametrize("terms", [TENSOR2, TOTAL3, [(0, 0)], [(0, 1), (2, 0)]], ids=["tensor2", "total3", "const", "gaps"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_subtraction_equals_numpy_bit_for_bit(terms, dtype):
    rng = np.random.default_rng(len(terms))
    block = (1000 + 300 * rng.standard_normal((97, 131))).astype(dtype)
    block[rng.random(block.shape) < 0.05] = np.nan
    u = np.linspace(-1.3, 0.7, 131) + rng.normal(0, 1e-3, 131)
    v = np.linspace(0.9, -0.4, 97)
    coefs = list(rng.normal(0, 5, len(terms)))
    got = subtract_polynomial_surface(block, u, v, terms, coefs)
    want = _numpy(block, u, v, terms, coefs)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.view(np.uint32 if dtype == np.float32 else np.uint64),
                                  want.view(np.uint32 if dtype == np.float32 else np.uint64))


def test_strided_view_of_a_block_gives_the_same_values():
    # the trimmed block of a halo pass is a view with the halo's row stride
    rng = np.random.default_rng(1)
    block = rng.normal(0, 1, (44, 66)).astype(np.float32)[2:-2, 2:-4:2]
    u, v = np.linspace(0, 1, 30), np.linspace(0, 1, 40)
    np.testing.assert_array_equal(subtract_polynomial_surface(block, u, v, TENSOR2, list(range(9))),
                                  _numpy(block, u, v, TENSOR2, list(range(9))))
