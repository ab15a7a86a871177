"""Method specs (:mod:`xdem.coreg.spec`): a coregistration named by a string, as ``xdem coreg --method`` takes it."""

from __future__ import annotations

import pytest

import xdem
from xdem.coreg.spec import ALIASES, METHOD_OPTIONS, OPTION_FLAGS, MethodSpecError, describe_methods, from_spec


def test_from_spec_builds_a_step_or_a_pipeline():
    assert type(xdem.coreg.from_spec("nuthkaab")) is xdem.coreg.NuthKaab
    pipe = from_spec("nuthkaab+vshift", subsample=5000, initial_shift=(1.0, 2.0))
    assert isinstance(pipe, xdem.coreg.CoregPipeline)
    assert [s.subsample for s in pipe.steps] == [5000, 5000] and pipe.steps[0].initial_shift == (1.0, 2.0)


def test_from_spec_options_not_given_are_none():
    assert from_spec("vshift", angle=None).get_params() == xdem.coreg.VerticalShift().get_params()


def test_every_alias_names_a_method():
    for alias, name in ALIASES.items():
        cls = type(from_spec(alias))
        assert cls.__name__.lower() == name or (name == "blockwisecoreg" and cls is xdem.coreg.BlockwiseCoreg)


def test_blockwise_spec_takes_the_block_options():
    bw = from_spec("blockwise:nuthkaab+vshift", block_size=300, block_iterations=3, subsample=1000)
    assert isinstance(bw, xdem.coreg.BlockwiseCoreg) and bw.block_size == 300 and bw.n_iterations == 3
    assert [s.subsample for s in bw.step.steps] == [1000, 1000]


def test_unknown_method_is_a_spec_error_on_method():
    with pytest.raises(MethodSpecError, match="unknown method 'nuthkab'; did you mean nuthkaab") as err:
        from_spec("nuthkab")
    assert err.value.option == "--method" and isinstance(err.value, xdem.errors.XdemError)
    with pytest.raises(MethodSpecError, match="cannot contain another one"):
        from_spec("blockwise:(blockwise:nuthkaab)")


def test_option_no_step_takes_names_its_flag():
    with pytest.raises(MethodSpecError, match="takes --allow-divergence; it applies to") as err:
        from_spec("vshift", on_divergence="warn")
    assert err.value.option == OPTION_FLAGS["on_divergence"] == "--allow-divergence"


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError, match="unknown options \\['polyorder'\\]"):
        from_spec("deramp", polyorder=2)


def test_describe_methods_lists_the_registry_with_flags():
    table = {m["name"]: m for m in xdem.coreg.describe_methods()}
    assert {"vshift", "nuthkaab", "nuthkaab_deramp", "blockwise", "icp", "lzd"} <= set(table)
    assert "coregpipeline" not in table and "rigidtransform" not in table
    flags = {o["flag"] for m in describe_methods() for o in m["options"]} - {None}
    assert flags <= set(OPTION_FLAGS.values()) and set(METHOD_OPTIONS) == set(OPTION_FLAGS)
