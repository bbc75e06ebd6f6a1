"""KG-Reasoner's graph-attention ranker: its gradient, training on real MetaQA gold paths, the
held-out measurement, loading through KG_MCP_RANKER, and the two commands end to end."""

from __future__ import annotations

import random
import re
import subprocess
import sys

import numpy as np
import pytest
from kg_mcp.agents.evaluation.benchmarks import load_benchmark, select
from kg_mcp.agents.evaluation.gold_hops import gold_hops, split_of
from kg_mcp.agents.evaluation.ranker_training import hop_example, train_ranker
from kg_mcp.agents.evaluation.ranking_recall import measure, unseen
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.kg_reasoner import run_kgr
from kg_mcp.agents.models.scripted import ScriptedModel
from kg_mcp.agents.trace import Trace
from kg_mcp.agents.trajectories import trajectory
from kgr_scripts import as_chat_policy, gold_walker

from kg_mcp.errors import ConfigError
from kg_mcp.kg_reasoner.gnn_ranker import CONTEXT, GNNRanker, Hop, Params, Vocabulary, gather, load_ranker, loss_and_grads
from kg_mcp.kg_reasoner.gnn_training import mean_loss
from kg_mcp.kg_reasoner import get_ranker
from kg_mcp.kg_reasoner.ranking import LexicalRanker
from kg_mcp.server import build_server
from kg_mcp.settings import Settings


def test_the_hand_written_gradient_matches_finite_differences():
    rng = np.random.default_rng(1)
    vectors = rng.normal(size=(30, 64))
    hops = []
    for n in (2, 4, 5):
        context = rng.integers(0, 30, (n, 4, 3))
        context[..., 2] %= 2
        context[0, 2:] = -1  # a candidate with two neighbours, one with none
        context[1, :] = -1
        link = rng.integers(0, 30, (n, 3))
        link[:, 2] %= 2
        hops.append(Hop(int(rng.integers(0, 30)), link, context, np.arange(n) == rng.integers(0, n)))
    batch, params = gather(vectors, hops), Params.initial(3)
    _, grads = loss_and_grads(params, batch)
    for name, array in params.arrays().items():
        index = tuple(int(rng.integers(0, s)) for s in array.shape)
        old = array[index]
        array[index] = old + 1e-6
        up = loss_and_grads(params, batch)[0]
        array[index] = old - 1e-6
        down = loss_and_grads(params, batch)[0]
        array[index] = old
        assert (up - down) / 2e-6 == pytest.approx(getattr(grads, name)[index], rel=1e-4, abs=1e-9), name


@pytest.fixture(scope="module")
def trained(metaqa, data_dir):
    bench = load_benchmark("metaqa-2hop", data_dir)
    ranker, report = train_ranker([(bench, metaqa)], per_benchmark=60, epochs=30, progress=False)
    return bench, ranker, report


def test_the_trained_ranker_beats_an_untrained_one_on_held_out_hops(trained, metaqa):
    bench, ranker, report = trained
    assert report.train_hops > 50 and report.validation_hops > 10
    held_out = select([q for q in bench.questions if split_of(q.text) == "held-out"], sample=30, seed=1)
    assert unseen(held_out, [ranker]) == held_out  # training never reads the held-out split
    vocab, rng = Vocabulary(), random.Random(0)
    hops = [hop_example(metaqa, Settings(), vocab, h, rng) for q in held_out for h in gold_hops(metaqa, q)]
    hops = [h for h in hops if h is not None]
    vectors = ranker.embed(vocab.texts)
    assert mean_loss(ranker.params, vectors, hops) < mean_loss(Params.initial(0), vectors, hops)
    untrained, learned = measure(metaqa, held_out, [GNNRanker.untrained(), ranker], ks=[1], progress=False)
    assert learned.hops == untrained.hops > 30 and learned.hits > untrained.hits
    assert ranker.info.benchmarks == ["metaqa-2hop"]


def test_a_measurement_refuses_questions_the_ranker_was_trained_on(trained, metaqa):
    bench, ranker, _ = trained
    seen = [q for q in bench.questions if ranker.saw(q.text)][:2]
    assert seen and all(split_of(q.text) in ("train", "validation") for q in seen)
    with pytest.raises(ValueError, match="trained on some of these questions"):
        measure(metaqa, seen, [LexicalRanker(), ranker], progress=False)


async def test_kg_mcp_ranker_gnn_file_ranks_kgr_search(trained, metaqa, tmp_path, monkeypatch):
    _, ranker, _ = trained
    model = tmp_path / "ranker.model"
    ranker.save(model)
    assert model.is_file() and model.stat().st_size < 20e6
    loaded = get_ranker(f"gnn:{model}")
    assert loaded.info.trained_questions == ranker.info.trained_questions
    monkeypatch.setenv("KG_MCP_RANKER", f"gnn:{model}")
    question = "what languages are the films directed by [Joel Zwick] in"
    async with KGClient.connect(server=build_server(metaqa)) as kg:
        result = await kg.call_tool("kgr_search", {"entity": "Joel Zwick", "question": question, "top_k": 3})
    assert not result.is_error and result.data["ranked_by"] == "gnn"
    assert [t["relation"] for t in result.data["triples"]][0] == "directed_by"


async def test_kg_reasoner_and_its_trajectories_use_the_chosen_ranker(trained, metaqa, tmp_path, monkeypatch):
    _, ranker, _ = trained
    ranker.save(tmp_path / "ranker.npz")
    monkeypatch.setenv("KG_MCP_RANKER", f"gnn:{tmp_path / 'ranker.npz'}")
    trace = Trace()
    model = ScriptedModel(as_chat_policy(gold_walker(["~directed_by", "in_language"])))
    question = "what are the languages spoken in the films directed by [Joel Zwick]"
    async with KGClient.connect(server=metaqa) as kg:
        result = await run_kgr(question, kg, model, topics={"Joel Zwick": None}, trace=trace)
    assert result.answers == ["Greek"] and not result.abstained
    searches = [e for e in trace.events if e["type"] == "tool_result" and e["tool"] == "kgr_search"]
    assert len(searches) == 2 and {e["data"]["ranked_by"] for e in searches} == {"gnn"}
    assert trajectory(trace.events, gold={})["ranked_by"] == ["gnn"]


def test_the_shipped_model_loads_and_a_bad_file_is_refused(tmp_path):
    shipped = get_ranker("gnn")
    assert isinstance(shipped, GNNRanker) and shipped.info.trained_questions
    assert shipped.params.A.shape == (64, 129) and CONTEXT > 0
    (tmp_path / "bad.npz").write_text("not a model")
    with pytest.raises(ConfigError, match="not a ranker model"):
        load_ranker(tmp_path / "bad.npz")
    with pytest.raises(ConfigError, match="train one with"):
        get_ranker(f"gnn:{tmp_path / 'missing.npz'}")


def kg_mcp(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "kg_mcp", *args], capture_output=True, text=True, timeout=120, check=False)


def test_train_ranker_then_eval_ranking_end_to_end(metaqa_store_dir, data_dir, tmp_path):
    model = tmp_path / "small.npz"
    trained = kg_mcp("train-ranker", "--benchmark", "metaqa-1hop", "--store", str(metaqa_store_dir), "--data",
                     str(data_dir), "--questions", "15", "--epochs", "2", "--out", str(model))
    assert trained.returncode == 0, trained.stderr
    assert re.search(r"trained on \d+ hops of 15 questions .* model .*small\.npz \(0\.\d+ MB\)", trained.stdout)
    measured = kg_mcp("eval", "--ranking", "--benchmark", "metaqa-1hop", "--store", str(metaqa_store_dir), "--data",
                      str(data_dir), "--ranker", "lexical", "--ranker", f"gnn:{model}", "--top-k", "5", "--top-k", "1",
                      "--sample", "8", "--seed", "2")
    assert measured.returncode == 0, measured.stderr
    lines = measured.stdout.splitlines()
    assert [re.match(r"(\w+): recall@(\d+) ", line).groups() for line in lines] == [
        (name, k) for name in ("lexical", "gnn") for k in ("1", "5")
    ]
    assert all(re.fullmatch(r"\w+: recall@[15] \d+\.\d% \(8 hops\)", line) for line in lines), lines
    assert "18 of 8836 questions left out" in measured.stderr  # 15 trained + 3 validated
    refused = kg_mcp("eval", "--ranking", "--benchmark", "qald10", "--data", str(data_dir), "--ranker", "lexical")
    assert refused.returncode == 1 and "--ranking needs gold paths" in refused.stderr
