"""Plain numpy kernels shared by several methods (each works on one chunk or one sample).

- :mod:`xdem.kernels.interp`: NaN-local interpolation (shift a block, evaluate points in windows);
- :mod:`xdem.kernels.warp`: NaN-local interpolation of a source window for the warp;
- :mod:`xdem.kernels.surface`: polynomial surfaces of normalised coordinates;
- :mod:`xdem.kernels.nuth_kaab`: one Nuth & Kääb estimate of a horizontal shift;
- :mod:`xdem.kernels.lzd`: one least-squares step of LZD (rigid: 3 rotations, 3 translations);
- :mod:`xdem.kernels.robust`: NMAD, sort-based group-by and bin indices.
"""
