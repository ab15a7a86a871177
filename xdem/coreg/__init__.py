"""Coregistration methods: scikit-learn style estimators over lazy DEM pairs.

Examples
--------
>>> import xdem
>>> ref, tba, truth = xdem.examples.example_pair()
>>> nk = xdem.coreg.NuthKaab().fit(ref, tba)
>>> aligned = nk.apply(tba)  # lazy
>>> pipe = xdem.coreg.from_spec("nuthkaab+vshift")  # as ``xdem coreg --method`` names it
"""

from xdem.coreg._transform import merged_transform
from xdem.coreg.affine import AffineCoreg, NuthKaab, VerticalShift, shift_dem
from xdem.coreg.base import METHODS, Coreg, clone, coreg_from_dict
from xdem.coreg.biascorr import BiasCorr, TerrainBias
from xdem.coreg.blockwise import BlockwiseCoreg
from xdem.coreg.capabilities import Capabilities
from xdem.coreg.cpd import CPD
from xdem.coreg.deramp import Deramp
from xdem.coreg.dhminimize import DhMinimize
from xdem.coreg.directional import DirectionalBias
from xdem.coreg.icp import ICP
from xdem.coreg.lzd import LZD
from xdem.coreg.nuthkaab_deramp import NuthKaabDeramp
from xdem.coreg.pipeline import CoregPipeline
from xdem.coreg.rigid import RigidCoreg, RigidTransform
from xdem.coreg.spec import describe_methods, from_spec
from xdem.coreg.upstream import (
    apply_matrix,
    invert_matrix,
    matrix_from_translations_rotations,
    translations_rotations_from_matrix,
)

__all__ = ["Coreg", "AffineCoreg", "VerticalShift", "NuthKaab", "CoregPipeline", "METHODS", "coreg_from_dict", "shift_dem",
           "clone"]
__all__ += ["BiasCorr", "DirectionalBias", "TerrainBias", "Deramp", "NuthKaabDeramp", "RigidCoreg", "RigidTransform", "ICP",
            "LZD"]
__all__ += ["DhMinimize", "BlockwiseCoreg", "from_spec", "describe_methods", "merged_transform"]
__all__ += ["Capabilities", "CPD"]
__all__ += ["apply_matrix", "invert_matrix", "matrix_from_translations_rotations", "translations_rotations_from_matrix"]
