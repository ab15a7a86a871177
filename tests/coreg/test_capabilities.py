"""What each coregistration method declares it can do (:class:`xdem.coreg.Capabilities`), that
the declarations match what the classes do, how a pipeline combines them, and that the code
reads them instead of probing estimators with ``hasattr``/``getattr``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import xdem
from xdem.coreg import METHODS, AffineCoreg, Capabilities, Coreg, RigidCoreg
from xdem.coreg.spec import describe_methods
from xdem.errors import InputError
from xdem.verdict_checks import Capability, capability

PACKAGE = Path(xdem.__file__).resolve().parent
SINGLE = {name: cls for name, cls in METHODS.items() if name != "coregpipeline"}

#: Registry name -> the flags that are true (everything else is false).
EXPECTED = {
    "verticalshift": {"affine", "removes_median", "fits_points", "in_frame", "blockwise_step", "moves_points"},
    "nuthkaab": {"affine", "horizontal", "removes_median", "fits_points", "in_frame", "blockwise_step",
                 "moves_points"},
    "nuthkaabderamp": {"horizontal", "fits_points", "in_frame", "blockwise_step", "moves_points"},
    "deramp": {"fits_points", "in_frame", "blockwise_step", "moves_points"},
    "biascorr": {"needs_bias_vars", "fits_points", "moves_points"},
    "terrainbias": {"fits_points", "moves_points"},
    "directionalbias": {"fits_points", "moves_points"},
    "blockwisecoreg": {"horizontal", "in_frame", "moves_points", "rereads_inputs"},
    "rigidtransform": {"affine", "rigid", "in_frame", "blockwise_step", "moves_points"},
    "icp": {"affine", "rigid", "horizontal", "fits_points", "initial_shift", "in_frame", "blockwise_step",
            "moves_points"},
    "lzd": {"affine", "rigid", "horizontal", "fits_points", "initial_shift", "in_frame", "blockwise_step",
            "moves_points"},
    "dhminimize": {"affine", "rigid", "horizontal", "fits_points", "initial_shift", "in_frame", "blockwise_step",
                   "moves_points"},
    "coregpipeline": set(),
}


def _overrides(cls: type[Coreg], name: str) -> bool:
    return getattr(cls, name) is not getattr(Coreg, name)


def test_the_package_methods_declare_their_capabilities():
    """The declarations of the package's methods, pinned; a method added later is held by the
    checks of its hooks below (and by tests/coreg/test_a_new_method.py), not by an entry here."""
    assert set(EXPECTED) <= set(METHODS)
    for name in EXPECTED:
        assert set(METHODS[name].tags.names()) == EXPECTED[name], name


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_declared_capabilities_match_the_hooks_the_class_overrides(name):
    cls = SINGLE[name]
    caps = cls.tags
    assert caps.fits_points == _overrides(cls, "_fit_points"), "fits_points must match a _fit_points override"
    assert caps.initial_shift == _overrides(cls, "fit_after")
    assert caps.in_frame == _overrides(cls, "_frame_op")
    assert caps.moves_points == (caps.in_frame or hasattr(cls, "_values_at_points"))
    assert caps.affine == issubclass(cls, AffineCoreg) == _overrides(cls, "to_matrix")
    assert caps.rigid == issubclass(cls, RigidCoreg)
    assert not caps.blockwise_step or caps.in_frame


@pytest.mark.parametrize("name", sorted(n for n, c in SINGLE.items() if not c.tags.affine))
def test_a_method_declared_not_affine_has_no_matrix(name):
    with pytest.raises(InputError, match="not affine"):
        Coreg.to_matrix(SINGLE[name].__new__(SINGLE[name]))


def test_the_old_flags_read_the_capabilities():
    assert xdem.coreg.BiasCorr.needs_vars is True and xdem.coreg.TerrainBias.needs_vars is False
    assert xdem.coreg.NuthKaab.is_affine is True and xdem.coreg.Deramp().is_affine is False


def test_a_single_estimator_is_its_own_only_step():
    nk = xdem.coreg.NuthKaab()
    assert nk.steps == [nk] and nk.capabilities is type(nk).tags
    assert nk.translation_part() is None
    with pytest.raises(InputError, match="initial shift"):
        xdem.coreg.Deramp().fit_after(None, None)  # type: ignore[arg-type]


def test_a_pipeline_combines_its_steps_capabilities():
    vs, nk, dr = xdem.coreg.VerticalShift(), xdem.coreg.NuthKaab(), xdem.coreg.Deramp()
    affine = vs + nk
    assert affine.capabilities.affine and affine.is_affine and affine.capabilities.horizontal
    assert affine.capabilities.removes_median and not affine.capabilities.initial_shift
    mixed = affine + dr
    assert mixed.steps == [vs, nk, dr]  # `+` flattens pipelines through their steps
    assert not mixed.capabilities.affine and not mixed.capabilities.removes_median
    assert mixed.capabilities.in_frame and mixed.capabilities.blockwise_step
    with_bias = xdem.coreg.NuthKaab() + xdem.coreg.BiasCorr()
    assert with_bias.capabilities.needs_bias_vars and with_bias.needs_vars
    assert not with_bias.capabilities.in_frame and with_bias.capabilities.moves_points
    assert xdem.coreg.CoregPipeline([]).capabilities == Capabilities()


def test_the_verdict_reads_the_declared_capabilities():
    old_table = {  # the verdict's former table of what each method fits
        "verticalshift": (False, True), "nuthkaab": (True, True), "nuthkaabderamp": (True, False),
        "deramp": (False, False), "biascorr": (False, False), "directionalbias": (False, False),
        "terrainbias": (False, False), "blockwisecoreg": (True, False), "rigidtransform": (False, False),
        "dhminimize": (True, False), "icp": (True, False), "lzd": (True, False), "cpd": (True, False),
    }
    for name, cls in METHODS.items():
        horizontal, median = old_table.get(name, (False, False))
        assert capability({"method": cls.__name__}) == Capability(horizontal=horizontal, median=median), name
    assert capability({"method": "NotAMethod"}) == Capability(horizontal=False, median=False)


def test_describe_methods_lists_the_capabilities():
    table = {m["class"]: m for m in describe_methods()}
    assert table["NuthKaab"]["capabilities"] == list(xdem.coreg.NuthKaab.tags.names())
    assert "initial_shift" in table["ICP"]["capabilities"]


def _estimator_members() -> set[str]:
    names = {n for cls in METHODS.values() for n in dir(cls) if not n.startswith("__")}
    return names | {"steps", "fit_after", "translation_part", "has_rotation", "_values_at_points"}


def _probes(path: Path, members: set[str]) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in ("hasattr", "getattr") and len(node.args) >= 2):
            continue
        attr = node.args[1]
        if isinstance(attr, ast.Constant) and isinstance(attr.value, str) and not attr.value.startswith("__") and (
                attr.value in members or attr.value.endswith("_")):
            out.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.func.id}(..., {attr.value!r})")
    return out


def test_no_estimator_is_probed_with_hasattr_or_getattr():
    members = _estimator_members()
    files = [*sorted((PACKAGE / "coreg").glob("*.py")), *sorted((PACKAGE / "report").glob("*.py")),
             *sorted(PACKAGE.glob("verdict*.py"))]
    bad = [probe for path in files for probe in _probes(path, members)]
    assert not bad, "\n".join(bad)


def test_base_does_not_import_the_pipeline():
    tree = ast.parse((PACKAGE / "coreg" / "base.py").read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "xdem.coreg.pipeline" not in imported
