"""A user query's results cut at a row cap, the total counted a little past it."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import islice

import pyoxigraph as ox

from kg_mcp.backends.base import Rows


def counted_rows(row_cap: int) -> int:
    """How far past `row_cap` rows are counted, so that the model learns how much it did not see;
    past it the total is unknown."""
    return max(row_cap * 100, 10_000)


def capped_rows(result: ox.QuerySolutions | ox.QueryTriples | bool, row_cap: int) -> Rows:
    """The first `row_cap` rows of any query form; `total` is None past max(100 x cap, 10,000) rows."""
    if isinstance(result, (bool, ox.QueryBoolean)):
        return Rows([], [], None, boolean=bool(result))
    if not hasattr(result, "variables"):  # triples: a store's QueryTriples, or an endpoint's list of them
        variables = ["subject", "predicate", "object"]
        rows_iter: Iterable[list] = ([t.subject, t.predicate, t.object] for t in result)
    else:
        # pyoxigraph Variables, or the names already (kg_mcp.backends.engine_answers.Solutions)
        variables = [v if isinstance(v, str) else v.value for v in result.variables]
        rows_iter = ([solution[v] for v in variables] for solution in result)
    counted_cap = counted_rows(row_cap)
    rows = list(islice(rows_iter, row_cap))
    extra = sum(1 for _ in islice(rows_iter, counted_cap - row_cap))
    total = len(rows) + extra if len(rows) + extra < counted_cap else None
    return Rows(variables, rows, total)
