"""Order of the gallery examples within each section (used by ``sphinx_gallery_conf``).

Examples go from the first steps to the more advanced; a new example not listed here comes
after the listed ones, by file name.
"""

from __future__ import annotations

import os

ORDER = [
    # basic/
    "plot_open_inspect.py",
    "plot_nuth_kaab.py",
    "plot_pipeline_biascorr.py",
    "plot_terrain.py",
    "plot_dh_statistics.py",
    "plot_vertical_datums.py",
    # advanced/
    "plot_out_of_core_cluster.py",
    "plot_write_cog.py",
    "plot_save_reapply.py",
    # upstream/ (upstream xdem 0.2.3's gallery and pages, in upstream's order)
    "plot_nuth_kaab_glaciers.py",
    "plot_icp_coregistration.py",
    "plot_logging_configuration.py",
    "plot_terrain_attributes.py",
    "plot_coregistration_page.py",
    "plot_biascorr_page.py",
    "plot_deramp.py",
    "plot_blockwise_coreg.py",
    "plot_slope_methods.py",
    "plot_infer_heterosc.py",
    "plot_infer_spatial_correlation.py",
    "plot_spatial_error_propagation.py",
    "plot_heterosc_estimation_modelling.py",
    "plot_variogram_estimation_modelling.py",
    "plot_standardization.py",
    "plot_dem_subtraction.py",
    "plot_norm_regional_hypso.py",
    "plot_volume_change.py",  # basic/
    "plot_demcollection.py",  # upstream/
]


class ExampleOrder:
    """Sort key of sphinx-gallery's ``within_subsection_order``: the position in :data:`ORDER`."""

    def __init__(self, src_dir: str) -> None:
        self.src_dir = src_dir

    def __call__(self, filename: str) -> str:
        name = os.path.basename(filename)
        rank = ORDER.index(name) if name in ORDER else len(ORDER)
        return f"{rank:04d}-{name}"

    def __repr__(self) -> str:
        return "<ExampleOrder>"
