"""OWL's own syntaxes (OWL/XML, functional syntax) and OBO, read as RDF.

- OWL/XML (`.owx`) and functional syntax (`.ofn`) are read by horned-owl (PyPI `py-horned-owl`),
  which writes the ontology as RDF by the OWL 2 mapping to RDF graphs; pyoxigraph parses that.
- OBO (`.obo`) is read by fastobo, whose translation to OWL follows the OBO 1.4 semantics
  (ids to `http://purl.obolibrary.org/obo/` IRIs, `is_a` to subClassOf, `def` to IAO_0000115,
  ...); the OWL it writes is read as above.

horned-owl's RDF writer gets two things wrong, which are put right here: it writes an n-ary
`DisjointClasses(A B C)` as `A disjointWith B`, `A disjointWith C` (losing `B disjointWith C`;
the mapping has `_:x a owl:AllDisjointClasses ; owl:members (A B C)`), and it detaches the list
of an annotated `DisjointUnion`, `HasKey` or property chain from its axiom. Such axioms go to
the writer about a stand-in IRI, without annotations, and their triples are then written about
what they stand for (`_rewrite_for_the_writer`, `_mapped`).
"""

from __future__ import annotations

import io
import logging
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pyoxigraph as ox

from kg_mcp.loading.errors import LoadError

log = logging.getLogger(__name__)

OWL_FORMATS = {"owx": "OWL/XML", "ofn": "OWL functional syntax", "obo": "OBO"}
_INSTALL = "pip install py-horned-owl fastobo"
_OWL = "http://www.w3.org/2002/07/owl#"
_RDF_TYPE = ox.NamedNode("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
_DISJOINT_UNION_OF = ox.NamedNode(_OWL + "disjointUnionOf")
_ALL_DISJOINT = ox.NamedNode(_OWL + "AllDisjointClasses")
_MEMBERS = ox.NamedNode(_OWL + "members")
_AXIOM = ox.NamedNode(_OWL + "Axiom")
_HAS_KEY = ox.NamedNode(_OWL + "hasKey")
_CHAIN = ox.NamedNode(_OWL + "propertyChainAxiom")
_ANNOTATED_SOURCE = ox.NamedNode(_OWL + "annotatedSource")
_ANNOTATED_PROPERTY = ox.NamedNode(_OWL + "annotatedProperty")
_ANNOTATED_TARGET = ox.NamedNode(_OWL + "annotatedTarget")
_LINE_COLUMN = re.compile(r"line_col: Pos\(\((\d+), (\d+)\)\)")
_BYTE = re.compile(r"BytePosition\((\d+)\)")
_EXPECTED = re.compile(r"positives: \[([^\]]*)\]")


def read_owl(stream: BinaryIO, path: Path, syntax: str, prefixes: dict) -> Iterator[ox.Quad]:
    """Quads of an OWL/XML, functional-syntax or OBO document (`syntax`: owx, ofn, obo), its
    blank nodes renamed for this load; its prefixes are added to ``prefixes``."""
    pyhornedowl, model = _libraries(path)
    data, translated = stream.read(), syntax == "obo"
    if translated:
        data, syntax = _obo_as_owl_xml(data, path), "owx"
    ontology = _open(pyhornedowl, data, syntax, path, translated)
    standing = _rewrite_for_the_writer(model, ontology, f"urn:kg-mcp:stand-in:{secrets.token_hex(8)}:")
    for prefix, iri in ontology.prefix_mapping:
        if prefix:
            prefixes.setdefault(prefix, iri)
    rdf = ontology.save_to_string("rdf")
    return _mapped(ox.parse(rdf, ox.RdfFormat.RDF_XML, rename_blank_nodes=True), standing)


def _libraries(path: Path):
    try:
        import pyhornedowl
        from pyhornedowl import model
    except ImportError:
        raise LoadError(path, None, f"reading OWL/XML, functional syntax or OBO needs py-horned-owl: {_INSTALL}") from None
    return pyhornedowl, model


def _open(pyhornedowl, data: bytes, syntax: str, path: Path, translated: bool):
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise LoadError(path, None, f"not UTF-8 text ({e.reason} at byte {e.start})") from None
    try:
        return pyhornedowl.open_ontology_from_string(text, syntax)
    except ValueError as e:
        message = str(e).removeprefix("Failed to open ontology: ")
        if translated:  # the line would be one of fastobo's output, not of the user's file
            raise LoadError(path, None, f"fastobo's OWL translation of this OBO file is unreadable ({_reason(message)})") from None
        raise LoadError(path, _line(message, data), f"not valid {OWL_FORMATS[syntax]} ({_reason(message)})") from None


def _line(message: str, data: bytes) -> int | None:
    if found := _LINE_COLUMN.search(message):
        return int(found.group(1))
    if found := _BYTE.search(message):
        return data.count(b"\n", 0, int(found.group(1))) + 1
    return None


def _reason(message: str) -> str:
    if found := _EXPECTED.search(message):
        return f"expected {found.group(1).replace(', ', ' or ')}"
    # horned-owl's errors are Rust debug text: keep the part that says what went wrong
    message = re.sub(r"^(ParserError|ValidityError)\(|, (BytePosition\(\d+\)|Unknown)\)$", "", message)
    return message[:300]


def _obo_as_owl_xml(data: bytes, path: Path) -> bytes:
    # OWL/XML rather than functional syntax: fastobo writes a version IRI such as
    # obo:taxrank/releases/2016-04-15/taxrank.owl there, a prefixed name no parser of it accepts.
    try:
        import fastobo
    except ImportError:
        raise LoadError(path, None, f"reading OBO needs fastobo: {_INSTALL}") from None
    try:
        document = fastobo.load(io.BytesIO(data))
    except SyntaxError as e:
        raise LoadError(path, e.lineno, f"not valid OBO ({e.msg})") from None
    owl_xml = io.BytesIO()
    try:
        fastobo.dump_owl(document, owl_xml, format="owx")
    except fastobo.exceptions.MissingClauseError as e:
        raise LoadError(
            path, None, f"{e}: OBO's translation to OWL needs it (a 'default-namespace: NAME' line in the header, "
            "or a 'namespace:' in every frame)",
        ) from None
    except ValueError as e:
        raise LoadError(path, None, f"cannot translate this OBO document to OWL ({e})") from None
    return owl_xml.getvalue()


def _rewrite_for_the_writer(model, ontology, placeholder: str) -> dict[ox.NamedNode, tuple]:
    """Give horned-owl's writer stand-ins for what it writes wrongly; returns {stand-in: what it is}.

    An axiom that is a stand-in's `DisjointUnion`, `HasKey` or property chain is written
    unannotated (its list then stays attached), its annotations as annotation assertions on the
    stand-in; `_mapped` makes the mapping's triples of them.
    """
    standing: dict[ox.NamedNode, tuple] = {}
    for number, axiom in enumerate(list(ontology.get_axioms())):
        component = axiom.component
        nary = isinstance(component, model.DisjointClasses) and len(component.first) > 2
        if not (nary or axiom.ann):
            continue
        name = f"{placeholder}{number}"
        stand_in = model.Class(model.IRI.parse(name))
        if nary:
            replacement, meaning = model.DisjointUnion(stand_in, component.first), (None, _DISJOINT_UNION_OF)
        elif isinstance(component, model.DisjointUnion):
            replacement, meaning = model.DisjointUnion(stand_in, component.second), (component.first, _DISJOINT_UNION_OF)
        elif isinstance(component, model.HasKey) and isinstance(component.ce, model.Class):
            replacement, meaning = model.HasKey(stand_in, component.vpe), (component.ce, _HAS_KEY)
        elif (
            isinstance(component, model.SubObjectPropertyOf) and isinstance(component.sub, list)
            and isinstance(component.sup, model.ObjectProperty)
        ):
            sup = model.ObjectProperty(model.IRI.parse(name))
            replacement, meaning = model.SubObjectPropertyOf(component.sub, sup), (component.sup, _CHAIN)
        elif isinstance(component, model.HasKey) or (
            isinstance(component, model.SubObjectPropertyOf) and isinstance(component.sub, list)
        ):  # about an anonymous class or property: kept, less its annotations, rather than cut from its list
            log.warning("annotations of %s left out: horned-owl cannot write them", component)
            ontology.remove_component(component)
            ontology.add_component(component)
            continue
        else:
            continue
        ontology.remove_component(component)
        ontology.add_component(replacement)
        for annotation in axiom.ann:
            ontology.add_component(model.AnnotationAssertion(model.IRI.parse(name), annotation))
        subject = None if meaning[0] is None else ox.NamedNode(str(meaning[0].first))
        standing[ox.NamedNode(name)] = (subject, meaning[1])
    return standing


def _mapped(quads, standing: dict[ox.NamedNode, tuple]) -> Iterator[ox.Quad]:
    """`quads` with the stand-ins' triples as the mapping writes them: an n-ary DisjointClasses as
    `_:x a owl:AllDisjointClasses ; owl:members L`, annotations on `_:x`; an annotated axiom as its
    triple and an `owl:Axiom` reifying it, annotations on that."""
    nodes: dict[ox.NamedNode, ox.BlankNode] = {}
    for quad in quads:
        meaning = standing.get(quad.subject) if isinstance(quad.subject, ox.NamedNode) else None
        if meaning is None:
            yield quad
            continue
        subject, predicate = meaning
        node = nodes.get(quad.subject)
        if node is None:
            node = nodes[quad.subject] = ox.BlankNode()
            if subject is None:
                yield ox.Quad(node, _RDF_TYPE, _ALL_DISJOINT)
            else:
                yield from (ox.Quad(node, _RDF_TYPE, _AXIOM), ox.Quad(node, _ANNOTATED_SOURCE, subject),
                            ox.Quad(node, _ANNOTATED_PROPERTY, predicate))  # fmt: skip
        if quad.predicate != predicate:  # one of the axiom's annotations
            yield ox.Quad(node, quad.predicate, quad.object)
        elif subject is None:
            yield ox.Quad(node, _MEMBERS, quad.object)
        else:
            yield ox.Quad(subject, predicate, quad.object)
            yield ox.Quad(node, _ANNOTATED_TARGET, quad.object)
