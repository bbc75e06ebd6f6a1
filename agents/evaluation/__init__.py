"""Evaluation: benchmarks, the papers' metrics, runs that resume, tool recall without a model, reports.

    benchmarks.py  the question files of MetaQA, PathQuestion, QALD-10 and CoLoTa as `Question`s
    matching.py    when a predicted answer counts as a gold one (normalised strings, ids)
    metrics.py     SoG, R2-KG and ARK-V1 metrics over scored answers
    tokens.py      token counts (o200k_base)
    prices.py      a small price table: tokens to dollars for known models
    stores.py      the store a benchmark needs, built from its KB when missing
    rundir.py      one run's folder: manifest, results.jsonl (append-only, resumable), traces
    runner.py      `kg-mcp eval`: questions through a driver, concurrently, resumable
    oracle.py      `kg-mcp eval --oracle`: the gold path walked through the real tools
    summary.py     a run's metrics, tokens, turns and latency, and the terminal table
    plots.py       the report's charts (matplotlib, PNG)
    html.py        the report page and one page per trace
"""
