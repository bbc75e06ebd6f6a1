"""Commands for KG-Reasoner's learned ranker: `train-ranker`, and `eval --ranking` (dispatched here).

The work is done in kg_mcp.agents.evaluation (gold hops, training, recall); these commands read the
options, open the stores and print.
"""

from __future__ import annotations

from pathlib import Path

import click

from kg_mcp.cli.common import main
from kg_mcp.errors import ConfigError

_WITH_GOLD_PATHS = ("metaqa-1hop", "metaqa-2hop", "metaqa-3hop", "pathquestion-2h", "pathquestion-3h", "pathquestion-l2h")


def _backends(benches, store: Path | None, store_cache: Path | None):
    """One backend per distinct store (MetaQA's three question files share one KB)."""
    from kg_mcp.agents.evaluation.stores import ensure_store
    from kg_mcp.backends import open_backend

    opened = {}
    out = []
    for bench in benches:
        path = store or ensure_store(bench, store_cache)
        if path not in opened:
            opened[path] = open_backend(store=path)
        out.append((bench, opened[path]))
    return out


@main.command("train-ranker")
@click.option("--benchmark", "benchmarks", multiple=True, required=True, type=click.Choice(_WITH_GOLD_PATHS),
              help="Train on this benchmark's gold paths (repeatable).")
@click.option("--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The model file (.npz).")
@click.option("--data", type=click.Path(exists=True, path_type=Path), help="Benchmark data root (default ../shared/data).")
@click.option("--store", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A store holding the benchmarks' KB (default: each benchmark's own, built if missing).")
@click.option("--store-cache", type=click.Path(file_okay=False, path_type=Path), help="Where benchmark stores are kept.")
@click.option("--questions", type=int, default=600, show_default=True,
              help="Training questions drawn per benchmark (a fifth as many for validation).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the split, the draws and the weights.")
@click.option("--epochs", type=click.IntRange(1, 100), default=8, show_default=True)
@click.option("--max-seconds", type=float, default=480, show_default=True, help="Stop training after this long.")
def train_ranker_command(benchmarks, out, data, store, store_cache, questions, seed, epochs, max_seconds):
    """Train KG-Reasoner's graph-attention ranker on gold relation paths; use it with KG_MCP_RANKER=gnn:FILE.

    \b
    kg-mcp train-ranker --benchmark metaqa-1hop --benchmark metaqa-2hop --benchmark metaqa-3hop \\
        --benchmark pathquestion-2h --benchmark pathquestion-3h --out ranker.npz
    """
    from kg_mcp.agents.evaluation.benchmarks import load_benchmark
    from kg_mcp.agents.evaluation.ranker_training import train_ranker

    benches = [load_benchmark(name, data) for name in dict.fromkeys(benchmarks)]
    ranker, report = train_ranker(_backends(benches, store, store_cache), per_benchmark=questions, seed=seed,
                                  epochs=epochs, max_seconds=max_seconds)
    ranker.save(out)
    click.echo(f"trained on {report.train_hops} hops of {report.train_questions} questions "
               f"(validation: {report.validation_hops} hops of {report.validation_questions}), "
               f"{report.epochs} epochs (best {report.best_epoch}, validation loss {report.validation_loss}), "
               f"{report.seconds:.0f} s; model {out} ({out.stat().st_size / 1e6:.2f} MB)")


def run_ranking(bench, *, rankers, top_k, sample, seed, limit, store, store_cache, no_build) -> None:
    """`kg-mcp eval --ranking`: recall@k of each ranker on the benchmark's gold hops, one line each."""
    from kg_mcp.agents.evaluation.benchmarks import WITH_GOLD_PATHS, select
    from kg_mcp.agents.evaluation.ranking_recall import measure, unseen
    from kg_mcp.agents.evaluation.stores import ensure_store
    from kg_mcp.backends import open_backend
    from kg_mcp.kg_reasoner import get_ranker

    if bench.name not in WITH_GOLD_PATHS:
        raise ConfigError(f"--ranking needs gold paths: {', '.join(WITH_GOLD_PATHS)}.")
    chosen = [get_ranker(spec) for spec in (rankers or ("lexical", "embedding", "gnn"))]
    questions = [q for q in bench.questions if q.gold_path]
    fresh = unseen(questions, chosen)
    if len(fresh) < len(questions):
        click.echo(f"{len(questions) - len(fresh)} of {len(questions)} questions left out: a learned ranker was "
                   "trained on them", err=True)
    fresh = select(fresh, limit=limit, sample=sample, seed=seed)
    backend = open_backend(store=store or ensure_store(bench, store_cache, build=not no_build))
    for result in measure(backend, fresh, chosen, ks=sorted(set(top_k)), seed=seed):
        click.echo(result.line())
