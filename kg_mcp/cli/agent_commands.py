"""Commands that run the method drivers (kg_mcp.agents): ask, eval, report, export-trajectories.

The command line is the one layer that sees both the server and its clients; these commands
hand the drivers a KG client, never the server's internals.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from kg_mcp.cli.common import _open, _settings, _store_options, main
from kg_mcp.errors import ConfigError


@main.command()
@click.argument("question")
@_store_options
@click.option("--agent", type=click.Choice(["sog", "ark", "r2kg", "r2kg-sc", "kgr"]), default="sog", show_default=True,
              help="Search-on-Graph, ARK-V1, R2-KG (Operator + Supervisor), R2-KG single-agent self-consistency, "
                   "or KG-Reasoner (a text-continuing model; openai-completions:NAME or openai:NAME).")
@click.option("--model", envvar="KG_MCP_MODEL", default="openai:gpt-4o-mini", show_default=True, help="provider:NAME")
@click.option("--base-url", help="The model API's base URL (an OpenAI-compatible server: vLLM, Ollama, llama.cpp).")
@click.option("--supervisor", help="R2-KG's Supervisor model (default: --model).")
@click.option("--supervisor-base-url", help="Base URL for the Supervisor's API.")
@click.option("--topic", "topic_values", multiple=True, help="A topic entity: NAME, ID or NAME=ID (repeatable).")
@click.option("--server-cmd", metavar="'CMD'", help="Spawn this kg-mcp server command and talk to it over stdio.")
@click.option("--url", metavar="URL", help="A kg-mcp server over streamable HTTP.")
@click.option("--auth-token-env", metavar="VAR", help="Bearer token for --url, from variable VAR.")
@click.option("--limit", type=int, help="The method's cap: SoG turns, ARK-V1 steps, R2-KG iterations, KG-Reasoner rounds.")
@click.option("--temperature", type=float)
@click.option("--seed", type=int)
@click.option("--trace", "trace_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Trace file (JSON lines); default traces/METHOD-TIME.jsonl.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Show no progress on stderr (tool calls, the thinking spinner).")
@click.option("--tools", "tool_mode", type=click.Choice(["paper", "batched", "follow"]), default="paper", show_default=True,
              help="SoG and R2-KG: the tools as published, the batched forms, or also follow.")
@click.option("--schema/--no-schema", "schema", default=None,
              help="Append the server's KG summary (size, relations with counts, hubs) to the agent's system prompt "
                   "[default: on with --tools batched or follow, off for the paper methods].")
def ask(question, store, sparql_url, wikidata, profile, languages, enable_sparql, agent, model, base_url, supervisor,
        supervisor_base_url, topic_values, server_cmd, url, auth_token_env, limit, temperature, seed, trace_path, as_json,
        quiet, tool_mode, schema):
    """Answer QUESTION with an agent that explores the KG through a kg-mcp server.

    \b
    kg-mcp ask "Where was Vincent van Gogh born?" --topic "Vincent van Gogh" --model openai:gpt-4o-mini
    kg-mcp ask "..." --agent r2kg --model openai:qwen2.5-7b --base-url http://localhost:8001/v1 --supervisor anthropic:claude-sonnet-4-5
    """
    from kg_mcp.agents.ask import ask as run_ask
    from kg_mcp.agents.ask import default_trace_path, parse_topics
    from kg_mcp.agents.kg_client import KGClient
    from kg_mcp.agents.models import ModelError, Sampling, get_model
    from kg_mcp.agents.trace import Trace
    from kg_mcp.serving.auth import read_token

    if server_cmd and url:
        raise ConfigError("Give --server-cmd or --url, not both.")
    try:
        main_model = get_model(model, base_url=base_url)
        supervisor_model = get_model(supervisor, base_url=supervisor_base_url or base_url) if supervisor else None
    except (ValueError, ModelError) as e:
        raise click.ClickException(str(e)) from None
    if server_cmd:
        kg = KGClient.connect(command=server_cmd)
    elif url:
        kg = KGClient.connect(url=url, token=read_token(env_var=auth_token_env))
    else:
        kg = KGClient.connect(server=_open(store, sparql_url, wikidata, profile, _settings(languages, enable_sparql)))
    from kg_mcp.cli.progress import Progress

    progress = None if quiet else Progress()
    trace = Trace(trace_path or default_trace_path(agent), listener=progress)
    sampling = Sampling(temperature=temperature, seed=seed)

    async def go():
        async with kg:
            return await run_ask(question, kg, method=agent, model=main_model, supervisor=supervisor_model,
                                 topics=parse_topics(list(topic_values)), limit=limit, sampling=sampling, trace=trace,
                                 tools=tool_mode, schema=_schema_default(schema, tool_mode))

    try:
        result = asyncio.run(go())
    except ModelError as e:
        raise click.ClickException(f"the model failed: {e} (trace: {trace.path})") from None
    finally:
        if progress is not None:
            progress.close()
    if as_json:
        usage = {role: vars(u) for role, u in result.usage.items()}
        click.echo(json.dumps({"answers": result.answers, "abstained": result.abstained,
                               "path": [vars(h) for h in result.path], "trace": result.trace, "usage": usage,
                               "reasoning": result.reasoning}, indent=1, ensure_ascii=False))
        return
    click.echo("Abstained: no answer the KG supports." if result.abstained else "Answer: " + "; ".join(result.answers))
    if result.path:
        click.echo("Path:")
        for hop in result.path:
            shown = ", ".join(hop.reached[:5]) + (f" (+{len(hop.reached) - 5} more)" if len(hop.reached) > 5 else "")
            click.echo(f"  {hop.entity} --{hop.relation or '(all)'}--> {shown or '(nothing)'}")
    tokens = sum(u.input_tokens for u in result.usage.values()), sum(u.output_tokens for u in result.usage.values())
    click.echo(f"{result.turns} model turns, {tokens[0]:,} tokens in / {tokens[1]:,} out, {result.seconds:.1f} s")
    click.echo(f"Trace: {result.trace}")


@main.command("export-trajectories")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--gold", "gold_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Gold answers: kg-mcp eval's results.jsonl, or JSON / JSON lines rows with question and "
                   "gold, answers or answer (default: RUN_DIR/results.jsonl if present; without any, no answer reward).")
@click.option("--match", type=click.Choice(["hit", "exact"]), default="hit", show_default=True,
              help="An answer is correct when one predicted answer is gold (hit) or the sets are equal (exact).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help="Write the records here (default: stdout).")
@click.option("--min-reward", type=float, help="Keep only trajectories whose total reward reaches this.")
def export_trajectories(run_dir, gold_path, match, out, min_reward):
    """Turn the traces under RUN_DIR (any agent) into SFT records in KG-Reasoner's
    think/search/triples/answer form, scored with its reward (retrieval + format + answer).

    \b
    kg-mcp export-trajectories traces/ --gold ../shared/data/metaqa/2hop_dev.json --out sft.jsonl
    """
    from kg_mcp.agents.trajectories import export, find_traces

    written = kept_reward = 0
    traces = len(find_traces(run_dir))
    sink = out.open("w", encoding="utf-8") if out else sys.stdout
    try:
        for record in export(run_dir, gold_path=gold_path, match=match):
            if min_reward is not None and record["reward"]["total"] < min_reward:
                continue
            sink.write(json.dumps(record, ensure_ascii=False) + "\n")
            written += 1
            kept_reward += record["reward"]["total"]
    finally:
        if out:
            sink.close()
    mean = f", mean reward {kept_reward / written:.3f}" if written else ""
    click.echo(f"{written} trajectories from {traces} traces under {run_dir}{mean}" + (f" -> {out}" if out else ""), err=True)


_BENCHMARKS = ("metaqa-1hop", "metaqa-2hop", "metaqa-3hop", "pathquestion-2h", "pathquestion-3h", "pathquestion-l2h",
               "qald10", "colota-qa", "colota-cv", "cwq", "webqsp", "grailqa", "simpleqa", "webquestions", "qald10-en",
               "trex", "zsre", "creak")  # kg_mcp.agents.evaluation.benchmarks.NAMES
_LOOKUP_ONLY = ("kg-labels",)  # --lookup with names drawn from the --store's own labels


def _schema_default(schema: bool | None, tool_mode: str) -> bool:
    """--schema as given, else on for kg-mcp's own tool modes and off for the methods as published."""
    return schema if schema is not None else tool_mode != "paper"


def _echo_warnings(caught) -> None:
    for w in caught:
        click.echo(f"warning: {w.message}", err=True)


@main.command("eval")
@click.option("--benchmark", required=True, type=click.Choice(_BENCHMARKS + _LOOKUP_ONLY), help="The benchmark to run.")
@click.option("--data", type=click.Path(exists=True, path_type=Path),
              help="Benchmark data: a folder laid out like ../shared/data (default), or one question file.")
@click.option("--kb", "kb_files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="KB file(s) to build the store from (default: the benchmark's own).")
@click.option("--dry-run", is_flag=True, help="Load the questions, print how many and what they carry, and stop.")
@click.option("--oracle", is_flag=True,
              help="No model: walk the gold paths (or the gold queries' chains) through the tools; report recall and tokens.")
@click.option("--mode", "oracle_mode", type=click.Choice(["sog", "batched", "follow"]), default="sog", show_default=True,
              help="--oracle: one search per entity (sog), one batched search per hop, or one follow call.")
@click.option("--json", "as_json", is_flag=True, help="--oracle: print the summary as JSON.")
@click.option("--lookup", is_flag=True,
              help="No model: look the topic names up as people type them (typos, lower case, partial, reordered, aliases).")
@click.option("--agent", default="sog", show_default=True, help="sog, ark, r2kg, r2kg-sc (any method kg-mcp ask knows).")
@click.option("--model", envvar="KG_MCP_MODEL", default="openai:gpt-4o-mini", show_default=True, help="provider:NAME")
@click.option("--base-url", help="The model API's base URL (an OpenAI-compatible server: vLLM, Ollama, llama.cpp).")
@click.option("--supervisor", help="R2-KG's Supervisor model (default: --model).")
@click.option("--supervisor-base-url", help="Base URL for the Supervisor's API.")
@click.option("--limit", type=int, help="The first N questions (after --sample).")
@click.option("--sample", type=int, help="N questions drawn at random with --seed.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of --sample.")
@click.option("--concurrency", type=click.IntRange(1, 256), default=1, show_default=True, help="Questions at once.")
@click.option("--repeat", type=click.IntRange(1, 100), default=1, show_default=True,
              help="Runs per question (self-consistency, reliability).")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path),
              help="Run folder: results.jsonl, traces/ (a run started again here resumes).")
@_store_options
@click.option("--server-cmd", metavar="'CMD'", help="Spawn this kg-mcp server command and talk to it over stdio.")
@click.option("--url", metavar="URL", help="A kg-mcp server over streamable HTTP.")
@click.option("--auth-token-env", metavar="VAR", help="Bearer token for --url, from variable VAR.")
@click.option("--store-cache", type=click.Path(file_okay=False, path_type=Path),
              help="Where benchmark stores are built (default $KG_MCP_CACHE or ~/.cache/kg-mcp).")
@click.option("--no-build", is_flag=True, help="Do not build a missing benchmark store; print the command instead.")
@click.option("--max-steps", type=int, help="The method's cap: SoG turns, ARK-V1 steps, R2-KG iterations.")
@click.option("--temperature", type=float)
@click.option("--tools", "tool_mode", type=click.Choice(["paper", "batched", "follow"]), default="paper", show_default=True,
              help="SoG and R2-KG: the tools as published, the batched forms, or also follow.")
@click.option("--schema/--no-schema", "schema", default=None,
              help="Append the server's KG summary (size, relations with counts, hubs) to the agent's system prompt "
                   "[default: on with --tools batched or follow, off for the paper methods].")
@click.option("--ranking", is_flag=True, help="No model: recall@k of kgr_search's rankers on the gold paths' hops.")
@click.option("--ranker", "rankers", multiple=True, help="With --ranking: lexical, embedding, gnn, gnn:FILE (repeatable).")
@click.option("--top-k", type=click.IntRange(1, 100), multiple=True, default=[20], show_default=True,
              help="With --ranking: triples shown (repeatable: one line per k).")
def eval_command(benchmark, data, kb_files, dry_run, oracle, oracle_mode, as_json, lookup, agent, model, base_url, supervisor, supervisor_base_url, limit, sample,
                 seed, concurrency, repeat, out, store, sparql_url, wikidata, profile, languages, enable_sparql, server_cmd,
                 url, auth_token_env, store_cache, no_build, max_steps, temperature, tool_mode, schema, ranking, rankers, top_k):
    """Run a benchmark with an agent and a model, or (--oracle) measure the tools' recall without one.

    \b
    kg-mcp eval --benchmark metaqa-2hop --agent sog --model openai:gpt-4o-mini --sample 200 --out runs/sog-2hop
    kg-mcp eval --benchmark metaqa-3hop --oracle
    kg-mcp eval --benchmark cwq --data ../shared/data/tog/cwq.json --dry-run
    kg-mcp eval --benchmark cwq --sparql http://localhost:8890/sparql --agent sog --sample 200 --out runs/sog-cwq
    kg-mcp eval --benchmark metaqa-1hop --lookup --sample 200
    kg-mcp eval --benchmark metaqa-3hop --ranking --ranker lexical --ranker gnn --sample 300
    kg-mcp report runs/sog-2hop runs/r2kg-2hop
    """
    import warnings

    if lookup:
        _run_lookup(benchmark, data, kb_files, limit, sample, seed, store, profile, languages, store_cache, no_build)
        return
    if benchmark in _LOOKUP_ONLY:
        raise ConfigError(f"--benchmark {benchmark} is for --lookup only.")

    from kg_mcp.agents.evaluation.benchmarks import WITH_GOLD_PATHS, load_benchmark, select
    from kg_mcp.agents.evaluation.stores import choose_kg
    from kg_mcp.serving.auth import read_token

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bench = load_benchmark(benchmark, data, list(kb_files) or None)
    _echo_warnings(caught)
    if dry_run:
        from kg_mcp.agents.evaluation.benchmarks import describe

        click.echo(describe(bench, select(bench.questions, limit=limit, sample=sample, seed=seed)))
        return
    if ranking:
        from kg_mcp.cli.ranking_commands import run_ranking

        return run_ranking(bench, rankers=rankers, top_k=top_k, sample=sample, seed=seed, limit=limit, store=store,
                           store_cache=store_cache, no_build=no_build)
    questions = select(bench.questions, limit=limit, sample=sample, seed=seed)
    from kg_mcp.agents.evaluation.gold_query_oracle import WITH_GOLD_QUERIES

    if oracle and benchmark not in WITH_GOLD_PATHS + WITH_GOLD_QUERIES:
        raise ConfigError(f"--oracle needs gold paths or gold queries: {', '.join(WITH_GOLD_PATHS + WITH_GOLD_QUERIES)}.")
    if not oracle and not out:
        raise ConfigError("Give --out DIR: the run's results and traces go there (and it resumes from there).")
    kg = choose_kg(bench, store=store, sparql=sparql_url, wikidata=wikidata, command=server_cmd, url=url,
                   token=read_token(env_var=auth_token_env), profile=profile, settings=_settings(languages, enable_sparql),
                   cache_dir=store_cache, build=not no_build)
    if oracle:
        _run_oracle(bench, questions, kg, out, oracle_mode, as_json)
    else:
        _run_eval(bench, questions, kg, agent, model, base_url, supervisor, supervisor_base_url, out, repeat, concurrency,
                  max_steps, temperature, {"limit": limit, "sample": sample, "seed": seed}, tool_mode,
                  _schema_default(schema, tool_mode))


def _run_lookup(benchmark, data, kb_files, limit, sample, seed, store, profile, languages, store_cache, no_build) -> None:
    """`eval --lookup`: recall@1/@5 of find_entities on perturbed topic names, in process (no server, no model)."""
    import warnings

    from kg_mcp.agents.evaluation.benchmarks import load_benchmark, select
    from kg_mcp.agents.evaluation.lookup import cases_for, format_lookup, run_lookup, topics_from_labels, topics_from_names
    from kg_mcp.agents.evaluation.stores import ensure_store

    settings = _settings(languages, False)
    if benchmark in _LOOKUP_ONLY:
        if not store:
            raise ConfigError(f"--benchmark {benchmark} draws names from a store's labels: give --store DIR.")
        backend = _open(store, None, False, profile, settings)
        topics, missing = topics_from_labels(backend, settings, sample or 100, seed), 0
    else:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bench = load_benchmark(benchmark, data, list(kb_files) or None)
        _echo_warnings(caught)
        questions = select(bench.questions, limit=limit, sample=sample, seed=seed)
        store = store or ensure_store(bench, store_cache, build=not no_build)
        backend = _open(store, None, False, profile, settings)
        topics, missing = topics_from_names(backend, [n for q in questions for n in q.topics], settings)
    try:
        summary = run_lookup(backend, settings, cases_for(topics, seed))
    finally:
        backend.close()
    summary.skipped = missing
    click.echo(format_lookup(summary, f"lookup {benchmark}"))


def _run_oracle(bench, questions, kg, out, mode="sog", as_json=False) -> None:
    from kg_mcp.agents.evaluation.oracle import format_summary, row_dict, run_oracle

    async def go():
        async with kg.client() as client:
            return await run_oracle(bench, questions, client, mode=mode)

    summary, rows = asyncio.run(go())
    click.echo(json.dumps(summary, indent=1) if as_json else format_summary([summary]))
    if out:
        out.mkdir(parents=True, exist_ok=True)
        name = f"oracle-{bench.name}" + ("" if mode == "sog" else f"-{mode}")
        with (out / f"{name}.jsonl").open("w", encoding="utf-8") as f:
            f.writelines(json.dumps(row_dict(r), ensure_ascii=False) + "\n" for r in rows)
        (out / f"{name}.json").write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")


def _run_eval(bench, questions, kg, agent, model, base_url, supervisor, supervisor_base_url, out, repeat, concurrency,
              max_steps, temperature, selection, tool_mode="paper", schema=False) -> None:
    from kg_mcp.agents.ask import METHODS
    from kg_mcp.agents.evaluation.rundir import RunDir
    from kg_mcp.agents.evaluation.runner import EvalPlan, run_eval
    from kg_mcp.agents.evaluation.summary import load_run, summarise, table
    from kg_mcp.agents.models import ModelError, Sampling, get_model

    if agent not in METHODS:
        raise click.BadParameter(f"{agent!r}: choose one of {', '.join(METHODS)}", param_hint="--agent")
    try:
        main_model = get_model(model, base_url=base_url)
        supervisor_model = get_model(supervisor, base_url=supervisor_base_url or base_url) if supervisor else None
    except (ValueError, ModelError) as e:
        raise click.ClickException(str(e)) from None
    plan = EvalPlan(benchmark=bench, questions=questions, agent=agent, model=model, out=out, kg=kg, supervisor=supervisor,
                    base_url=base_url, repeat=repeat, concurrency=concurrency, agent_limit=max_steps,
                    sampling=Sampling(temperature=temperature) if temperature is not None else None, selection=selection,
                    tools=tool_mode, schema=schema)
    try:
        stats = asyncio.run(run_eval(plan, main_model, supervisor_model))
    except KeyboardInterrupt:
        raise click.ClickException(f"interrupted; finished answers are in {out / 'results.jsonl'}: "
                                   "run the same command again to resume") from None
    click.echo(table([summarise(load_run(out))]))
    click.echo(f"{stats.done} answered now, {stats.skipped} already done, {stats.failed} failed "
               f"of {stats.total} (questions x repeats); results in {out / 'results.jsonl'}")
    if stats.gave_up:
        raise click.ClickException(f"stopped: the first {stats.failed} runs all failed, e.g. "
                                   f"{RunDir(out).errors()[-1]['error']} (all in {out / 'errors.jsonl'})")
    if stats.failed:
        raise click.ClickException(f"{stats.failed} runs failed (see {out / 'errors.jsonl'}): "
                                   "run the same command again to retry them")


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--html", "html_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Where the page goes (default: FIRST_RUN_DIR/report.html).")
@click.option("--max-questions", type=int, default=300, show_default=True, help="Answers listed (with trace pages) per run.")
def report(run_dirs, html_path, max_questions):
    """Compare evaluation runs side by side: a table here and an HTML page with plots and traces."""
    from kg_mcp.agents.evaluation.html import write_report
    from kg_mcp.agents.evaluation.summary import load_run, summarise, table

    runs = [load_run(d) for d in run_dirs]
    summaries = [summarise(r) for r in runs]
    click.echo(table(summaries))
    page, _ = write_report(runs, summaries, html_path or run_dirs[0] / "report.html", max_questions=max_questions)
    click.echo(f"report: {page}")

