"""Former module of :class:`~xdem.coreg.NuthKaabDeramp`; it lives in
:mod:`xdem.coreg.nuthkaab_deramp` now. Kept so that existing imports keep working."""

from xdem.coreg.nuthkaab_deramp import NuthKaabDeramp

__all__ = ["NuthKaabDeramp"]
