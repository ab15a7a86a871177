"""What glaciologists do after coregistration: gap filling of elevation changes and volume and
mass change per polygon, out of core (upstream xdem 0.2.3's ``xdem.volume`` names included).
"""

from __future__ import annotations

__all__: list[str] = []
