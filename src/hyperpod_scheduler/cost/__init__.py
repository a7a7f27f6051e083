"""What a schedule saves and what keeps billing: prices, FSx discovery and the savings maths.

- ``prices``: price tables (bundled, override file) layered with their sources.
- ``pricelist``: the AWS Price List API as a table, and its disk cache (opt-in).
- ``sources``: which table a report uses (bundled, then API when enabled, then override).
- ``fsx``: FSx for Lustre file systems of a cluster and their hourly cost.
- ``savings``: pure maths from the action history to nights, hours and dollars.
- ``summary``: a report as JSON and CSV rows.
"""

from hyperpod_scheduler.cost.prices import Price, PriceTable, bundled, layer, load_file
from hyperpod_scheduler.cost.savings import Report, build_report, keep_cost_per_night
from hyperpod_scheduler.cost.settings import CostSettings

__all__ = [
    "CostSettings",
    "Price",
    "PriceTable",
    "Report",
    "build_report",
    "bundled",
    "keep_cost_per_night",
    "layer",
    "load_file",
]
