"""Think-on-Graph's test sets (../shared/data/tog/): every file read whole, what each reader resolves,
WebQuestions' topic keys resolved in a Freebase-shaped store, and scripted runs end to end over
real stores (the Wikidata sample; a small Freebase-shaped store written here), with the papers'
figures beside the run's own. The models are scripted: these check the plumbing, not accuracy.
"""

from __future__ import annotations

import gc
import json
import shutil
import subprocess
import warnings

import pyoxigraph as ox
import pytest
from click.testing import CliRunner
from conftest import ENGINES
from kg_mcp.agents.evaluation.benchmarks import TOG_SETS, MalformedEntry, load_benchmark
from kg_mcp.agents.evaluation.html import write_report
from kg_mcp.agents.evaluation.papers import FIGURES, verdict
from kg_mcp.agents.evaluation.runner import EvalPlan, run_eval
from kg_mcp.agents.evaluation.stores import KGTarget, choose_kg
from kg_mcp.agents.evaluation.summary import load_run, summarise, table
from kg_mcp.agents.evaluation.topic_keys import resolve_topic_key
from kg_mcp.agents.kg_client import KGClient
from kg_mcp.agents.models.scripted import ScriptedModel
from test_sog import gold_path_policy

from kg_mcp.cli import main
from kg_mcp.errors import ConfigError
from kg_mcp.settings import Settings

SIZES = {  # ../shared/data/README.md, section tog/
    "cwq": 3531, "webqsp": 1639, "grailqa": 1000, "simpleqa": 1000, "webquestions": 2032,
    "qald10-en": 333, "trex": 5000, "zsre": 3724, "creak": 1371,
}


@pytest.fixture(scope="module")
def tog(data_dir):
    """Every set, each file read once, with the warnings it raised. The garbage of earlier tests is
    collected first: freed while a large file is read, it would warn there (an unclosed socket)."""
    out = {}
    for name in TOG_SETS:
        gc.collect()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            out[name] = (load_benchmark(name, data_dir), [str(w.message) for w in caught])
    return out


def test_every_file_loads_whole_without_a_skipped_entry(tog):
    assert {name: len(bench.questions) for name, (bench, _) in tog.items()} == SIZES
    assert {name: caught for name, (_, caught) in tog.items() if caught} == {}
    for name, (bench, _) in tog.items():
        assert len({q.id for q in bench.questions}) == len(bench.questions), name
        assert all(q.text for q in bench.questions), name
        assert bench.endpoint == ("freebase" if name in SIZES and list(SIZES).index(name) < 5 else "wikidata")
        assert bench.kb_files == [] and "Think-on-Graph" in bench.citation


def test_freebase_questions_carry_mids_and_gold(tog):
    cwq = tog["cwq"][0].questions[0]
    assert cwq.topics == {"Lou Seal": "m.03_dwn"} and cwq.answers == ("2014 World Series",)
    assert cwq.gold_query.startswith("PREFIX ns: <http://rdf.freebase.com/ns/>") and "ns:m.03_dwn" in cwq.gold_query
    assert all(q.gold_query for q in tog["cwq"][0].questions) and all(q.gold_query for q in tog["grailqa"][0].questions)
    grail = tog["grailqa"][0].questions[0]
    assert (grail.answers, grail.aliases, grail.topics) == (
        ("m.0yrltsn",), (("m.0yrltsn", "The Illusion"),), {"The Illusion": "m.0yrlqjm"})
    values = [q for q in tog["grailqa"][0].questions if q.answers and not q.answers[0].startswith(("m.", "g."))]
    assert len(values) == 3 and values[0].aliases == ()  # GrailQA's three value answers stay text
    simple = tog["simpleqa"][0].questions[1]
    assert (simple.gold_relation, simple.answers) == ("member_parks", ("Año Nuevo State Park",))
    webqsp = tog["webqsp"][0].questions
    assert webqsp[1].topics == {
        "Viggo Mortensen": "m.01ps2h8",
        "The Lord of the Rings: The Fellowship of the Ring": "m.017gl1",
        "The Lord of the Rings: The Return of the King": "m.017jd9",
    }
    # WebQSP writes [None] for 47 questions without an answer upstream, [] for 11: kept, no gold
    assert sum(not q.answers for q in webqsp) == 58
    every_mid = [i for name in ("cwq", "webqsp", "grailqa", "simpleqa") for q in tog[name][0].questions for i in q.topics.values()]
    assert len(every_mid) > 7000 and all(i.startswith(("m.", "g.")) for i in every_mid)


def test_webquestions_keeps_the_topic_key_for_run_time(tog):
    first = tog["webquestions"][0].questions[0]
    assert (first.topic_key, first.topics) == ("/en/jamaica", {})
    assert first.answers == ("Jamaican Creole English Language", "Jamaican English")
    assert all(q.topic_key.startswith("/en/") for q in tog["webquestions"][0].questions)


def test_wikidata_questions_carry_qids_aliases_and_claims(tog):
    qald = tog["qald10-en"][0].questions[0]
    assert (qald.answers, qald.aliases, qald.topics) == (
        ("wd:Q42299",), (("wd:Q42299", "Bernhard Riemann"),), {"Riemannian geometry": "wd:Q761383"})
    assert "wdt:P138" in qald.gold_query
    trex = tog["trex"][0].questions
    with_aliases = next(q for q in trex if q.aliases)
    assert with_aliases.answers[0] in with_aliases.aliases[0] and len(with_aliases.aliases[0]) > 1
    # upstream could not link some subjects (UnknownQID): the name stays, looked up at run time
    assert sum(None in q.topics.values() for q in trex) == 42
    zsre = tog["zsre"][0].questions[0]
    assert (zsre.text, zsre.qtype, zsre.topics) == (
        "Jennings Randolph Bridge [SEP] crosses", "crosses", {"Jennings Randolph Bridge": "wd:Q6179056"})
    creak = tog["creak"][0].questions
    assert {q.kind for q in creak} == {"yes_no"}
    assert (creak[0].id, creak[0].answers) == ("dev_0", ("False",))
    assert sum(q.answers == ("True",) for q in creak) == 691


def test_malformed_entries_are_skipped_and_named(tmp_path):
    bad = tmp_path / "cwq.json"
    good = {"ID": "ok-1", "question": "q?", "topic_entity": {"m.0abc": "A"}, "answer": "B", "sparql": "SELECT"}
    bad.write_text(json.dumps([good, {"ID": "no-text", "topic_entity": {}, "answer": "B"},
                               {"ID": "bad-mid", "question": "q?", "topic_entity": {"Q42": "x"}, "answer": "B"}, 7]))
    with pytest.warns(MalformedEntry) as caught:
        bench = load_benchmark("cwq", bad)
    assert [q.id for q in bench.questions] == ["ok-1"]
    messages = [str(w.message) for w in caught]
    assert "entry 1 (ID no-text) skipped: no 'question'" in messages[0]
    assert "entry 2 (ID bad-mid) skipped: 'Q42' is not a Freebase mid" in messages[1]
    assert "entry 3 (not an object) skipped" in messages[2]


def test_a_field_of_another_shape_is_named_in_our_words(tmp_path):
    file = tmp_path / "grailqa.json"
    file.write_text(json.dumps([{"qid": 5, "question": "q?", "answer": ["m.01"], "topic_entity": {}}]))
    with pytest.warns(MalformedEntry) as caught:
        assert load_benchmark("grailqa", file).questions == []
    assert str(caught[0].message) == "grailqa.json: entry 0 (qid 5) skipped: a field is not of the format's shape"


def test_webqsp_answers_written_as_a_python_list_string(tmp_path):
    file = tmp_path / "WebQSP.json"
    file.write_text(json.dumps([
        {"QuestionId": "a", "RawQuestion": "who?", "answer": "['Aragorn', \"Frodo's ring\"]", "topic_entity": {"m.01": "X"}},
        {"QuestionId": "b", "RawQuestion": "who?", "answer": "[__import__('os').getcwd()]", "topic_entity": {}},
    ]))
    with pytest.warns(MalformedEntry, match="entry 1 .QuestionId b. skipped: its 'answer' is not a list of names"):
        bench = load_benchmark("webqsp", file)
    assert [q.answers for q in bench.questions] == [("Aragorn", "Frodo's ring")]


@pytest.mark.parametrize("name", ["cwq", "webquestions", "creak"])
def test_dry_run_prints_the_count(name, data_dir):
    file = (data_dir / TOG_SETS[name][0]).resolve()
    out = CliRunner().invoke(main, ["eval", "--benchmark", name, "--data", str(file), "--dry-run"])
    assert out.exit_code == 0, out.output
    assert out.output.startswith(f"{name}: {SIZES[name]:,} questions from {file}")
    expected = {"cwq": "3,531 with a gold query", "webquestions": "2,032 topic from a Freebase key", "creak": "1,371 yes/no"}
    assert expected[name] in out.output


def test_a_freebase_set_asks_for_its_endpoint(tog):
    bench = tog["cwq"][0]
    with pytest.raises(ConfigError, match="give a Freebase SPARQL endpoint with --sparql URL"):
        choose_kg(bench)
    with pytest.raises(ConfigError, match="not --wikidata"):
        choose_kg(bench, wikidata=True)
    out = CliRunner().invoke(main, ["eval", "--benchmark", "simpleqa", "--limit", "1", "--out", "runs"])
    assert out.exit_code != 0 and "--sparql URL" in out.output and "Traceback" not in out.output


# --- WebQuestions: the topic's Freebase key, resolved in the KG -----------------------------------

FREEBASE = """
@prefix ns: <http://rdf.freebase.com/ns/> .
ns:m.03_r3 ns:type.object.name "Jamaica"@en ; ns:type.object.key "/en/jamaica" , "/wikipedia/en/Jamaica" ;
    ns:location.country.languages_spoken ns:m.01428y , ns:m.04ygk0 .
ns:m.01428y ns:type.object.name "Jamaican English"@en .
ns:m.04ygk0 ns:type.object.name "Jamaican Creole English Language"@en .
ns:m.0jamaica_inn ns:type.object.name "Jamaica Inn"@en .
ns:m.042f1 ns:type.object.name "James K. Polk"@en ; ns:people.person.profession ns:m.04gc2 .
ns:m.04gc2 ns:type.object.name "Lawyer"@en .
"""


async def test_keys_resolve_by_key_then_by_name(memory_backend):
    backend = memory_backend(FREEBASE, profile="freebase")
    async with KGClient.connect(server=backend) as kg:
        assert await resolve_topic_key(kg, "/en/jamaica", backend) == ({"jamaica": "m.03_r3"}, "key")
        assert await resolve_topic_key(kg, "/en/james_k_polk", backend) == ({"james k polk": "m.042f1"}, "name")
        assert await resolve_topic_key(kg, "/en/atlantis", backend) == ({}, "unresolved")


async def test_keys_resolve_through_the_sparql_tool_of_a_server(memory_backend):
    """Without a backend in hand (--url, --server-cmd), the server's sparql tool finds the key;
    without that tool, the name lookup is all there is."""
    with_tool = memory_backend(FREEBASE, profile="freebase", settings=Settings(sparql_tool=True))
    async with KGClient.connect(server=with_tool) as kg:
        assert await resolve_topic_key(kg, "/en/jamaica") == ({"jamaica": "m.03_r3"}, "key")
    without = memory_backend(FREEBASE, profile="freebase", settings=Settings(sparql_tool=False))
    async with KGClient.connect(server=without) as kg:
        assert await resolve_topic_key(kg, "/en/jamaica") == ({"jamaica": "m.03_r3"}, "name")


@pytest.fixture(scope="module")
def freebase_nt(tmp_path_factory):
    store = ox.Store()
    store.load(FREEBASE.encode(), format=ox.RdfFormat.TURTLE)
    target = tmp_path_factory.mktemp("tog") / "webquestions-freebase.nt"
    store.dump(str(target), format=ox.RdfFormat.N_TRIPLES, from_graph=ox.DefaultGraph())
    return target


@pytest.mark.parametrize("engine", ENGINES)
async def test_keys_resolve_over_a_freebase_endpoint(engine, engine_endpoints, freebase_nt, tmp_path):
    """`eval --benchmark webquestions --sparql URL`: the endpoint is read with the freebase profile and
    the key is found there (Virtuoso is what the papers serve Freebase with)."""
    file = tmp_path / "WebQuestions.json"
    file.write_text(json.dumps([{"url": "http://www.freebase.com/view/en/jamaica", "question": "q?", "answers": ["x"]}]))
    target = choose_kg(load_benchmark("webquestions", file), sparql=engine_endpoints(engine, "tog-webquestions", freebase_nt))
    assert target.backend.profile.name == "freebase"
    async with target.client() as kg:
        assert await resolve_topic_key(kg, "/en/jamaica", target.backend) == ({"jamaica": "m.03_r3"}, "key")
        assert await resolve_topic_key(kg, "/en/atlantis", target.backend) == ({}, "unresolved")


async def test_webquestions_run_records_how_each_topic_was_found(memory_backend, tmp_path):
    backend = memory_backend(FREEBASE, profile="freebase")
    file = tmp_path / "WebQuestions.json"
    file.write_text(json.dumps([
        {"url": "http://www.freebase.com/view/en/jamaica", "question": "what does jamaican people speak?",
         "answers": ["Jamaican Creole English Language", "Jamaican English"]},
        {"url": "http://www.freebase.com/view/en/james_k_polk", "question": "what did james k polk do before he was president?",
         "answers": ["Lawyer"]},
    ]))
    bench = load_benchmark("webquestions", file)
    relation = {"what does jamaican people speak?": "location.country.languages_spoken"}

    def policy(messages, tools):
        text = messages[1].content
        wanted = next((r for q, r in relation.items() if q in text), "people.person.profession")
        return gold_path_policy([wanted])(messages, tools)

    plan = EvalPlan(benchmark=bench, questions=bench.questions, agent="sog", model="scripted", out=tmp_path / "run",
                    kg=KGTarget(backend=backend))
    stats = await run_eval(plan, ScriptedModel(policy), progress=False)
    assert (stats.done, stats.failed) == (2, 0)
    run = load_run(tmp_path / "run")
    found = {r["topic_key"]: (r["topic_resolution"], r["topics"], r["correct"]) for r in run.records}
    assert found == {
        "/en/jamaica": ("key", {"jamaica": "m.03_r3"}, True),
        "/en/james_k_polk": ("name", {"james k polk": "m.042f1"}, True),
    }
    summary = summarise(run)
    assert summary["hits@1"] == 1.0 and summary["exact_match"] == 1.0
    text = table([summary])
    assert "[1] topics from Freebase keys: 1 by key, 1 by name" in text
    store = backend.stats().triples
    assert (
        "[1] against Think-on-Graph (Sun et al., ICLR 2024), Table 1, ToG w/ GPT-4: Hits@1 (exact match) 57.9% on "
        "Freebase (the whole Freebase dump, billions of triples), 2,032 questions; this run 100.0% on local store "
        f"{backend.location} ({store:,} triples, profile freebase), 2 questions: not comparable (the run's KG holds {store:,} "
        "triples; Freebase holds billions; 2 of the paper's 2,032 questions)"
    ) in text


# --- Wikidata sets over the shared Wikidata sample (a local store; no endpoint is reachable) ----------

@pytest.fixture
def wikidata_questions(tmp_path):
    """Tiny files in the tog format, written here from real entities of the Wikidata sample:
    Douglas Adams (Q42) was born in Cambridge (Q350, labelled "Cambridge")."""
    trex = tmp_path / "T-REX.json"
    trex.write_text(json.dumps([{
        "input": "Douglas Adams [SEP] place of birth", "topic_entity": {"Q42": "Douglas Adams"},
        "answer": "Cambridge, England", "alias": ["Cambridge"],
    }]))
    creak = tmp_path / "creak.json"
    creak.write_text(json.dumps([
        {"ex_id": "t1", "sentence": "Douglas Adams was born in Cambridge.", "label": "true", "topic_entity": {"Q42": "Douglas Adams"}},
        {"ex_id": "t2", "sentence": "Douglas Adams was born in Oxford.", "label": "false", "topic_entity": {"Q42": "Douglas Adams"}},
    ]))
    return trex, creak


async def test_slot_filling_counts_an_alias_and_the_report_names_the_paper(wikidata_local, wikidata_questions, tmp_path):
    trex, _ = wikidata_questions
    bench = load_benchmark("trex", trex)
    (question,) = bench.questions
    assert question.aliases == (("Cambridge, England", "Cambridge"),)
    plan = EvalPlan(benchmark=bench, questions=bench.questions, agent="sog", model="scripted", out=tmp_path / "run",
                    kg=KGTarget(backend=wikidata_local))
    await run_eval(plan, ScriptedModel(gold_path_policy(["P19"])), progress=False)
    run = load_run(tmp_path / "run")
    (record,) = run.records
    assert record["answers"] == ["Cambridge"] and record["correct"] is True  # through the alias only
    assert record["gold_aliases"] == [["Cambridge, England", "Cambridge"]]
    summary = summarise(run)
    assert summary["hits@1"] == 1.0
    papers = {(p["model"], p["paper_value"], p["ours"]) for p in summary["papers"]}
    assert papers == {("ToG w/ ChatGPT (GPT-3.5-turbo)", 0.768, 1.0), ("ToG w/ GPT-4", 0.771, 1.0)}
    page, _ = write_report([run], [summary], tmp_path / "report.html")
    # The page as a browser shows it: each paper row beside the run carries both KGs, both question
    # counts and the verdict (the sample store is a few thousand triples, not Wikidata).
    rows = rendered_rows(page, "papers", tmp_path)
    triples = wikidata_local.stats().triples
    assert rows[0] == ["run", "benchmark", "paper", "table", "model", "metric", "paper's figure", "paper's KG",
                       "paper's questions", "this run", "run's KG", "run's questions", "comparable?"]
    assert rows[1:] == [
        ["[1]", "trex", "Think-on-Graph (Sun et al., ICLR 2024)", "Table 1", model, "Hits@1 (exact match)", figure,
         "Wikidata (the whole Wikidata, billions of triples)", "5,000", "100.0%",
         f"local store {wikidata_local.location} ({triples:,} triples, profile wikidata)", "1",
         f"not comparable: the run's KG holds {triples:,} triples; Wikidata holds billions; 1 of the paper's 5,000 questions"]
        for model, figure in (("ToG w/ ChatGPT (GPT-3.5-turbo)", "76.8%"), ("ToG w/ GPT-4", "77.1%"))
    ]


def rendered_rows(page, table_id: str, tmp_path) -> list[list[str]]:
    """The cells of one table of `page` as headless Chromium renders it (its DOM after loading)."""
    from html.parser import HTMLParser

    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail("chromium is not installed: `apt-get install -y chromium` (.ci/run installs it)")
    dom = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout

    class Cells(HTMLParser):
        def __init__(self):
            super().__init__()
            self.rows, self.inside, self.cell = [], False, None

        def handle_starttag(self, tag, attrs):
            if tag == "table":
                self.inside = dict(attrs).get("id") == table_id
            elif self.inside and tag == "tr":
                self.rows.append([])
            elif self.inside and tag in ("td", "th"):
                self.cell = []

        def handle_endtag(self, tag):
            if tag == "table":
                self.inside = False
            elif self.inside and tag in ("td", "th") and self.cell is not None:
                self.rows[-1].append(" ".join("".join(self.cell).split()))
                self.cell = None

        def handle_data(self, data):
            if self.cell is not None:
                self.cell.append(data)

    parser = Cells()
    parser.feed(dom)
    return parser.rows


@pytest.mark.parametrize(
    ("kg", "questions", "expected"),
    [
        ({"kind": "remote", "endpoint": "http://fb:8890/sparql", "triples": 2_900_000_000, "profile": "freebase"}, 3531,
         ("comparable", "2,900,000,000 triples read with the freebase profile")),
        ({"kind": "remote", "endpoint": "http://fb:8890/sparql", "triples": 2_900_000_000, "profile": "freebase"}, 200,
         ("comparable", "2,900,000,000 triples read with the freebase profile; 200 of the paper's 3,531 questions")),
        ({"kind": "remote", "endpoint": "http://fb:8890/sparql", "triples": 100_000, "lower_bounds": True,
          "profile": "freebase"}, 3531,
         ("unverified", "the run's KG was counted only to 100,000 triples, so it cannot be told from Freebase "
                        "(the whole Freebase dump, billions of triples)")),
        ({"kind": "oxigraph", "location": "/s", "triples": 5_000_000_000, "profile": "generic"}, 3531,
         ("not comparable", "the run's KG is read with the generic profile: it is not Freebase")),
        (None, 3531, ("unverified", "the run did not record its KG, so it cannot be told from Freebase")),
    ],
)
def test_a_run_compares_with_the_paper_only_on_the_papers_kg(kg, questions, expected):
    (figure, _) = [f for f in FIGURES if f.benchmark == "cwq"]
    assert verdict(figure, kg, questions) == expected


def test_the_live_wikidata_service_is_wikidata_however_it_was_counted():
    figure = next(f for f in FIGURES if f.benchmark == "qald10-en")
    kg = {"kind": "remote", "endpoint": "https://query.wikidata.org/sparql", "triples": 100_000,
          "lower_bounds": True, "profile": "wikidata"}
    assert verdict(figure, kg, 333) == ("comparable", "the live Wikidata service (today's data, not the paper's copy)")


async def test_creak_claims_score_as_accuracy(wikidata_local, wikidata_questions, tmp_path):
    _, creak = wikidata_questions
    bench = load_benchmark("creak", creak)
    verdicts = {"Douglas Adams was born in Cambridge.": "yes", "Douglas Adams was born in Oxford.": "yes"}

    def policy(messages, tools):
        return "Final answer: {" + next(v for s, v in verdicts.items() if s in messages[1].content) + "}"

    plan = EvalPlan(benchmark=bench, questions=bench.questions, agent="sog", model="scripted", out=tmp_path / "run",
                    kg=KGTarget(backend=wikidata_local))
    await run_eval(plan, ScriptedModel(policy), progress=False)
    summary = summarise(load_run(tmp_path / "run"))
    assert summary["accuracy"] == 0.5  # the second claim is false: "yes" is wrong
    assert "accuracy (true/false claims)" in table([summary])
    assert {p["paper_value"] for p in summary["papers"]} == {0.912, 0.956}
