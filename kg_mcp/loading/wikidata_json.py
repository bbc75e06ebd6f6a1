"""One entity of the Wikidata JSON dump → quads in Wikidata's RDF model (the query service's dump format).

The output mirrors what Special:EntityData and the Wikidata Query Service serve (see
``wikidata-sample.nt``): terms, statement nodes (``p:``/``ps:``/``pq:``), references (``pr:``), ranks,
truthy ``wdt:`` triples for best-rank statements, sitelinks, property declarations and lexemes with
their forms and senses. Left out on purpose: full value nodes (``psv:``/``pqv:``/``prv:``, so no units,
bounds, precisions or calendar models), normalized values (``wdtn:``/``psn:``) and the constant
per-document license/software-version triples.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from urllib.parse import quote, quote_plus

import pyoxigraph as ox

WD = "http://www.wikidata.org/entity/"
WDS = "http://www.wikidata.org/entity/statement/"
WDREF = "http://www.wikidata.org/reference/"
WDT = "http://www.wikidata.org/prop/direct/"
P = "http://www.wikidata.org/prop/"
PS = "http://www.wikidata.org/prop/statement/"
PQ = "http://www.wikidata.org/prop/qualifier/"
PR = "http://www.wikidata.org/prop/reference/"
WDNO = "http://www.wikidata.org/prop/novalue/"
WIKIBASE = "http://wikiba.se/ontology#"
SCHEMA = "http://schema.org/"
SKOS = "http://www.w3.org/2004/02/skos/core#"
RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
XSD = "http://www.w3.org/2001/XMLSchema#"
PROV = "http://www.w3.org/ns/prov#"
ONTOLEX = "http://www.w3.org/ns/lemon/ontolex#"
DCT = "http://purl.org/dc/terms/"
GEO_WKT = "http://www.opengis.net/ont/geosparql#wktLiteral"
ENTITY_DATA = "https://www.wikidata.org/wiki/Special:EntityData/"
COMMONS_FILE = "http://commons.wikimedia.org/wiki/Special:FilePath/"
COMMONS_DATA = "http://commons.wikimedia.org/data/main/"
GREGORIAN = "http://www.wikidata.org/entity/Q1985727"
JULIAN = "http://www.wikidata.org/entity/Q1985786"
EARTH = "http://www.wikidata.org/entity/Q2"

Triple = tuple[ox.NamedNode | ox.BlankNode, ox.NamedNode, ox.NamedNode | ox.BlankNode | ox.Literal]

_TYPE = ox.NamedNode(RDF + "type")
_RANKS = {r: ox.NamedNode(f"{WIKIBASE}{r.capitalize()}Rank") for r in ("normal", "preferred", "deprecated")}

# Every datatype Wikidata uses, and whether its simple value is an IRI (which also makes its
# wdt:/ps:/pq:/pr: predicates owl:ObjectProperty rather than owl:DatatypeProperty).
_DATATYPE_IS_IRI = {
    "wikibase-item": True, "wikibase-property": True, "wikibase-lexeme": True, "wikibase-form": True,
    "wikibase-sense": True, "entity-schema": True, "url": True, "commonsMedia": True, "geo-shape": True,
    "tabular-data": True, "string": False, "external-id": False, "math": False, "musical-notation": False,
    "monolingualtext": False, "time": False, "quantity": False, "globe-coordinate": False,
}
_PLAIN_STRING_TYPES = {"string", "external-id", "math", "musical-notation"}

_ENTITY_ID = re.compile(r"[QPLEM][1-9]\d*(-[FS][1-9]\d*)?")
_PROPERTY_ID = re.compile(r"P[1-9]\d*")
_TIME = re.compile(r"([+-]?)(\d+)-(\d\d)-(\d\d)T(\d\d:\d\d:\d\dZ)")
_DECIMAL = re.compile(r"[+-]?\d+(\.\d+)?")
_HASH = re.compile(r"[0-9a-f]{40}")

# Sites: "{code}{family}" → https://{code}.{family domain}/; a few projects have their own hosts.
_FAMILIES = {"wiki": "wikipedia", "wikiquote": "wikiquote", "wikisource": "wikisource",
             "wikibooks": "wikibooks", "wikinews": "wikinews", "wikiversity": "wikiversity",
             "wikivoyage": "wikivoyage", "wiktionary": "wiktionary"}
_SITE = re.compile(r"([a-z][a-z0-9_]*?)(" + "|".join(sorted(_FAMILIES, key=len, reverse=True)) + ")")
_SPECIAL_SITES = {  # site id → (host, wiki group); their pages are in English
    "commonswiki": ("commons.wikimedia.org", "commons"),
    "specieswiki": ("species.wikimedia.org", "species"),
    "metawiki": ("meta.wikimedia.org", "meta"),
    "mediawikiwiki": ("www.mediawiki.org", "mediawiki"),
    "wikidatawiki": ("www.wikidata.org", "wikidata"),
    "sourceswiki": ("wikisource.org", "sources"),
    "wikifunctionswiki": ("www.wikifunctions.org", "wikifunctions"),
    "wikimaniawiki": ("wikimania.wikimedia.org", "wikimania"),
    "outreachwiki": ("outreach.wikimedia.org", "outreach"),
}
_RENAMED_HOSTS = {"be-x-old": "be-tarask"}
# Wiki subdomains whose content language Wikidata writes with another (canonical BCP 47) code.
_SITE_LANGUAGES = {
    "als": "gsw", "bat-smg": "sgs", "be-x-old": "be-tarask", "bh": "bho", "fiu-vro": "vro",
    "nds-nl": "nds-NL", "no": "nb", "nrm": "fr-x-nrm", "roa-rup": "rup", "roa-tara": "it-x-tara",
    "simple": "en-simple", "zh-classical": "lzh", "zh-min-nan": "nan", "zh-yue": "yue",
}


class _Malformed(ValueError):
    """A problem already located inside the entity (e.g. 'claim Q1$x: ...'); the entity id is added last."""


def entity_to_quads(entity: dict) -> Iterator[ox.Quad]:
    """Quads (default graph) of one parsed entity of the Wikidata JSON dump, in Wikidata's RDF model.

    Items, properties and lexemes (with forms and senses) are supported. The entity is converted
    completely before the first quad is returned, so a malformed one raises ``ValueError`` (naming
    the entity and claim) without having produced anything.

    >>> q = {"type": "item", "id": "Q42", "labels": {"en": {"language": "en", "value": "Douglas Adams"}},
    ...      "claims": {"P31": [{"id": "Q42$1", "rank": "normal", "mainsnak": {"snaktype": "value",
    ...          "property": "P31", "datatype": "wikibase-item",
    ...          "datavalue": {"type": "wikibase-entityid", "value": {"id": "Q5"}}}}]}}
    >>> quads = list(entity_to_quads(q))
    >>> [x.object.value for x in quads if x.predicate.value == WDT + "P31"]
    ['http://www.wikidata.org/entity/Q5']
    >>> sorted(x.object.value.removeprefix(WIKIBASE) for x in quads if x.subject.value == WDS + "Q42-1")
    ['BestRank', 'NormalRank', 'Statement', 'http://www.wikidata.org/entity/Q5']
    """
    if not isinstance(entity, dict) or not isinstance(entity.get("id"), str):
        raise ValueError("not a Wikidata entity: no 'id'")
    eid = entity["id"]
    try:
        triples = list(_entity(entity))
    except _Malformed as e:
        raise ValueError(f"{eid} {e}") from e
    except (KeyError, TypeError, AttributeError, ValueError) as e:
        raise ValueError(f"{eid}: malformed entity ({_reason(e)})") from e
    return iter([ox.Quad(s, p, o) for s, p, o in triples])


def _entity(entity: dict) -> Iterator[Triple]:
    kind, eid = entity.get("type"), entity["id"]
    pattern = {"item": r"Q[1-9]\d*", "property": r"P[1-9]\d*", "lexeme": r"L[1-9]\d*"}.get(kind)
    if pattern is None:
        raise ValueError(f"unsupported entity type {kind!r}")
    if not re.fullmatch(pattern, eid):
        raise ValueError(f"bad {kind} id {eid!r}")
    node = ox.NamedNode(WD + eid)
    yield node, _TYPE, ox.NamedNode(WIKIBASE + kind.capitalize())
    yield from _terms(node, entity)
    claim_sets = [(node, entity.get("claims") or {})]
    if kind == "property":
        yield from _property_declarations(node, eid, entity["datatype"])
    if kind == "lexeme":
        yield from _lexeme(node, entity, claim_sets)
    for subject, claims in claim_sets:
        yield from _claims(subject, claims)
    if kind == "item":
        for link in (entity.get("sitelinks") or {}).values():
            yield from _sitelink(node, link)
    if "redirects" in entity:  # present when the entity was fetched through a redirect
        yield _entity_iri(entity["redirects"]["from"]), ox.NamedNode(OWL + "sameAs"), node
    yield from _document(node, entity, kind, [c for _, claims in claim_sets for c in _statements(claims)])


def _terms(node: ox.NamedNode, entity: dict) -> Iterator[Triple]:
    # Wikidata writes every label three times, so that rdfs, SKOS and schema.org readers all find it.
    for term in (entity.get("labels") or {}).values():
        label = _text(term)
        for predicate in (RDFS + "label", SKOS + "prefLabel", SCHEMA + "name"):
            yield node, ox.NamedNode(predicate), label
    for term in (entity.get("descriptions") or {}).values():
        yield node, ox.NamedNode(SCHEMA + "description"), _text(term)
    for terms in (entity.get("aliases") or {}).values():
        for term in terms:
            yield node, ox.NamedNode(SKOS + "altLabel"), _text(term)


def _property_declarations(node: ox.NamedNode, pid: str, datatype: str) -> Iterator[Triple]:
    if datatype not in _DATATYPE_IS_IRI:
        raise ValueError(f"unknown property datatype {datatype!r}")
    yield node, ox.NamedNode(WIKIBASE + "propertyType"), ox.NamedNode(WIKIBASE + _datatype_name(datatype))
    value_kind = ox.NamedNode(OWL + ("ObjectProperty" if _DATATYPE_IS_IRI[datatype] else "DatatypeProperty"))
    for link, namespace in (("directClaim", WDT), ("claim", P), ("statementProperty", PS),
                            ("qualifier", PQ), ("reference", PR), ("novalue", WDNO)):
        predicate = ox.NamedNode(namespace + pid)
        yield node, ox.NamedNode(WIKIBASE + link), predicate
        if namespace == P:  # entity → statement node
            yield predicate, _TYPE, ox.NamedNode(OWL + "ObjectProperty")
        elif namespace != WDNO:
            yield predicate, _TYPE, value_kind
    # wdno:Pn is the class of things that have no wdt:Pn value at all.
    novalue, restriction = ox.NamedNode(WDNO + pid), _blank("novalue", pid)
    yield novalue, _TYPE, ox.NamedNode(OWL + "Class")
    yield novalue, ox.NamedNode(OWL + "complementOf"), restriction
    yield restriction, _TYPE, ox.NamedNode(OWL + "Restriction")
    yield restriction, ox.NamedNode(OWL + "onProperty"), ox.NamedNode(WDT + pid)
    yield restriction, ox.NamedNode(OWL + "someValuesFrom"), ox.NamedNode(OWL + "Thing")


def _lexeme(node: ox.NamedNode, entity: dict, claim_sets: list) -> Iterator[Triple]:
    """Lemmas, category, language, forms and senses; the forms' and senses' claims go to ``claim_sets``."""
    yield node, _TYPE, ox.NamedNode(ONTOLEX + "LexicalEntry")
    for term in (entity.get("lemmas") or {}).values():
        lemma = _text(term)
        yield node, ox.NamedNode(WIKIBASE + "lemma"), lemma
        yield node, ox.NamedNode(RDFS + "label"), lemma
    yield node, ox.NamedNode(WIKIBASE + "lexicalCategory"), _entity_iri(entity["lexicalCategory"])
    yield node, ox.NamedNode(DCT + "language"), _entity_iri(entity["language"])
    parts = [("F", form, "lexicalForm", "Form", "representations", ONTOLEX + "representation")
             for form in entity.get("forms") or []]
    parts += [("S", sense, "sense", "LexicalSense", "glosses", SKOS + "definition")
              for sense in entity.get("senses") or []]
    for letter, part, link, ontolex_class, texts, text_predicate in parts:
        if not re.fullmatch(rf"{entity['id']}-{letter}[1-9]\d*", part["id"]):
            raise ValueError(f"bad form/sense id {part['id']!r}")
        part_node = ox.NamedNode(WD + part["id"])
        yield node, ox.NamedNode(ONTOLEX + link), part_node
        yield part_node, _TYPE, ox.NamedNode(ONTOLEX + ontolex_class)
        yield part_node, _TYPE, ox.NamedNode(WIKIBASE + ("Form" if letter == "F" else "Sense"))
        for term in (part.get(texts) or {}).values():
            yield part_node, ox.NamedNode(text_predicate), _text(term)
            yield part_node, ox.NamedNode(RDFS + "label"), _text(term)
        for feature in part.get("grammaticalFeatures") or []:
            yield part_node, ox.NamedNode(WIKIBASE + "grammaticalFeature"), _entity_iri(feature)
        claim_sets.append((part_node, part.get("claims") or {}))


def _statements(claims: dict) -> Iterator[dict]:
    for statements in claims.values():
        yield from statements


def _claims(subject: ox.NamedNode, claims: dict) -> Iterator[Triple]:
    for pid, statements in claims.items():
        ranks = {s.get("rank") for s in statements}
        # Truthy (wdt:) values come from the best rank present: preferred, else normal, never deprecated.
        best = "preferred" if "preferred" in ranks else "normal"
        for statement in statements:
            try:
                # Materialised here so that any error is reported with the claim it belongs to.
                triples = list(_statement(subject, pid, statement, best))
            except (KeyError, TypeError, AttributeError, ValueError) as e:
                where = statement.get("id") if isinstance(statement, dict) else None
                raise _Malformed(f"claim {where or pid}: {_reason(e)}") from e
            yield from triples


def _statement(subject: ox.NamedNode, pid: str, statement: dict, best_rank: str) -> Iterator[Triple]:
    guid, rank, mainsnak = statement["id"], statement["rank"], statement["mainsnak"]
    if rank not in _RANKS:
        raise ValueError(f"unknown rank {rank!r}")
    if mainsnak["property"] != pid:
        raise ValueError(f"main snak is about {mainsnak['property']!r}, filed under {pid!r}")
    # Statement IRIs are the GUID with everything but [A-Za-z0-9_-] (the '$') turned into '-'.
    node = ox.NamedNode(WDS + re.sub(r"[^\w-]", "-", guid, flags=re.ASCII))
    yield subject, ox.NamedNode(P + _property_id(pid)), node
    yield node, _TYPE, ox.NamedNode(WIKIBASE + "Statement")
    yield node, ox.NamedNode(WIKIBASE + "rank"), _RANKS[rank]
    yield from _snak(node, PS, mainsnak, guid)
    if rank == best_rank:
        yield node, _TYPE, ox.NamedNode(WIKIBASE + "BestRank")
        yield from _snak(subject, WDT, mainsnak, guid)
    for snaks in (statement.get("qualifiers") or {}).values():
        for snak in snaks:
            yield from _snak(node, PQ, snak, guid)
    for reference in statement.get("references") or []:
        digest = reference["hash"]
        if not isinstance(digest, str) or not _HASH.fullmatch(digest):
            raise ValueError(f"bad reference hash {digest!r}")
        # References are named by their content hash, so identical ones are shared between statements.
        ref_node = ox.NamedNode(WDREF + digest)
        yield node, ox.NamedNode(PROV + "wasDerivedFrom"), ref_node
        yield ref_node, _TYPE, ox.NamedNode(WIKIBASE + "Reference")
        for snaks in reference["snaks"].values():
            for snak in snaks:
                yield from _snak(ref_node, PR, snak, digest)


def _snak(subject: ox.NamedNode, namespace: str, snak: dict, context: str) -> Iterator[Triple]:
    """``subject namespace:Pn value``; novalue makes the subject an instance of ``wdno:Pn`` instead."""
    pid, kind = _property_id(snak["property"]), snak["snaktype"]
    if kind == "novalue":
        yield subject, _TYPE, ox.NamedNode(WDNO + pid)
        return
    if kind == "somevalue":
        # An unknown value is a blank node of its own; hashing where it occurs keeps reloads idempotent.
        value = _blank(subject.value, namespace, context, json.dumps(snak, sort_keys=True))
    elif kind == "value":
        value = _value(snak)
    else:
        raise ValueError(f"unknown snaktype {kind!r}")
    yield subject, ox.NamedNode(namespace + pid), value


def _value(snak: dict) -> ox.NamedNode | ox.Literal:
    datavalue, datatype = snak["datavalue"], snak.get("datatype")
    kind, value = datavalue["type"], datavalue["value"]
    if kind == "wikibase-entityid":
        return _entity_iri(value)
    if kind == "string":
        if not isinstance(value, str):
            raise ValueError(f"string value expected, got {value!r}")
        if datatype == "url":
            try:
                return ox.NamedNode(value)
            except ValueError:  # Wikidata holds some URLs that are not valid IRIs
                return ox.Literal(value)
        if datatype == "commonsMedia":
            return ox.NamedNode(COMMONS_FILE + quote(value, safe=""))
        if datatype in ("geo-shape", "tabular-data"):
            return ox.NamedNode(COMMONS_DATA + _wiki_urlencode(value))
        # A snak of a deleted property has no datatype left; its string is kept as a plain literal.
        if datatype in _PLAIN_STRING_TYPES or datatype is None:
            return ox.Literal(value)
        raise ValueError(f"unknown datatype {datatype!r} for a string value")
    if kind == "monolingualtext":
        return _text({"value": value["text"], "language": value["language"]})
    if kind == "time":
        return _time(value)
    if kind == "quantity":
        amount = value["amount"]
        if not isinstance(amount, str) or not _DECIMAL.fullmatch(amount):
            raise ValueError(f"bad quantity amount {amount!r}")
        return ox.Literal(amount.removeprefix("+"), datatype=ox.NamedNode(XSD + "decimal"))
    if kind == "globecoordinate":
        return _wkt(value)
    raise ValueError(f"unknown value type {kind!r}")


def _time(value: dict) -> ox.Literal:
    """Wikidata's xsd:dateTime for a time value, as Wikibase's RDF export cleans it up.

    Unknown month/day become 01, days past the month's end are clamped, Julian dates of day precision
    are converted to Gregorian, and BCE years with year precision or finer are shifted by one, because
    Wikidata counts 1 BCE as -1 and XSD 1.1 as 0. Years beyond xsd:dateTime's usual range stay as they
    are (e.g. "-13798000000-01-01T00:00:00Z"); a time that has no such form (year 0, an unknown
    calendar) is kept as its plain string, as Wikidata does.
    """
    raw, precision, calendar = value["time"], value["precision"], value["calendarmodel"]
    match = _TIME.fullmatch(raw) if isinstance(raw, str) else None
    if match is None or not isinstance(precision, int) or not 0 <= precision <= 14:
        raise ValueError(f"bad time value {raw!r} (precision {precision!r})")
    bce, year, clock = match[1] == "-", int(match[2]), match[5]
    month, day = min(max(int(match[3]), 1), 12), max(int(match[4]), 1)
    if year == 0:
        return ox.Literal(raw)
    day_precise = precision >= 11
    if calendar == JULIAN and day_precise:
        gregorian = _julian_to_gregorian(-year if bce else year, month, day)
        if gregorian is not None:
            return _datetime(*gregorian, clock)
    elif calendar != GREGORIAN and day_precise:
        return ox.Literal(raw)
    if precision <= 9:
        month = day = 1
    elif precision == 10:
        day = 1
    day = min(day, _days_in_month(year, bce, month))
    if not bce:
        return _datetime(year, month, day, clock)
    return _datetime(1 - year if precision >= 9 else -year, month, day, clock)


def _julian_to_gregorian(year: int, month: int, day: int) -> tuple[int, int, int] | None:
    """Proleptic Gregorian (astronomical year, month, day) of a Julian date given with Wikidata's year.

    None outside the years Wikibase converts; those are then read as Gregorian, as Wikibase does.
    """
    if not -4713 <= year <= 1465072:
        return None
    astronomical = year + 1 if year < 0 else year
    # Julian day number; a day past the month's end simply runs on into the next month.
    shift = (14 - month) // 12
    y, m = astronomical + 4800 - shift, month + 12 * shift - 3
    jdn = day + (153 * m + 2) // 5 + 365 * y + y // 4 - 32083
    if jdn <= 0:
        return None
    # ... and back to a Gregorian calendar date.
    a = jdn + 32044
    b = (4 * a + 3) // 146097
    c = a - 146097 * b // 4
    d = (4 * c + 3) // 1461
    e = c - 1461 * d // 4
    m = (5 * e + 2) // 153
    return 100 * b + d - 4800 + m // 10, m + 3 - 12 * (m // 10), e - (153 * m + 2) // 5 + 1


def _days_in_month(year: int, bce: bool, month: int) -> int:
    if month != 2:
        return 30 if month in (4, 6, 9, 11) else 31
    astronomical = 1 - year if bce else year
    # Wikibase checks years before 4714 BCE as if they were 4713 BCE, a leap year.
    if bce and year >= 4714:
        return 29
    return 29 if astronomical % 4 == 0 and (astronomical % 100 != 0 or astronomical % 400 == 0) else 28


def _datetime(year: int, month: int, day: int, clock: str) -> ox.Literal:
    sign = "-" if year < 0 else ""
    text = f"{sign}{abs(year):04d}-{month:02d}-{day:02d}T{clock}"
    return ox.Literal(text, datatype=ox.NamedNode(XSD + "dateTime"))


def _wkt(value: dict) -> ox.Literal:
    latitude, longitude = value["latitude"], value["longitude"]
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in (latitude, longitude)):
        raise ValueError(f"bad coordinate {latitude!r}, {longitude!r}")
    point = f"Point({_php_number(longitude)} {_php_number(latitude)})"
    globe = value.get("globe") or EARTH
    if globe != EARTH:  # GeoSPARQL: a leading IRI names the reference system (e.g. the Moon)
        point = f"<{globe.replace('>', '%3E')}> {point}"
    return ox.Literal(point, datatype=ox.NamedNode(GEO_WKT))


def _php_number(x: float) -> str:
    """A float as PHP prints it (14 significant digits), which is how Wikidata writes coordinates."""
    text = f"{float(x):.14G}"
    if "E" not in text:
        return text
    mantissa, exponent = text.split("E")
    return f"{mantissa if '.' in mantissa else mantissa + '.0'}E{int(exponent):+d}"


def _sitelink(node: ox.NamedNode, link: dict) -> Iterator[Triple]:
    site, title = link["site"], link["title"]
    host, language, group = _site(site)
    wiki = ox.NamedNode(f"https://{host}/")
    # Page URLs are built like MediaWiki's: spaces become '_', then the title is URL-encoded.
    page = ox.NamedNode(f"https://{host}/wiki/{_wiki_urlencode(title.replace(' ', '_'))}")
    yield page, _TYPE, ox.NamedNode(SCHEMA + "Article")
    yield page, ox.NamedNode(SCHEMA + "about"), node
    yield page, ox.NamedNode(SCHEMA + "inLanguage"), ox.Literal(language)
    yield page, ox.NamedNode(SCHEMA + "isPartOf"), wiki
    yield page, ox.NamedNode(SCHEMA + "name"), _text({"value": title, "language": language})
    for badge in link.get("badges") or []:
        yield page, ox.NamedNode(WIKIBASE + "badge"), _entity_iri(badge)
    yield wiki, ox.NamedNode(WIKIBASE + "wikiGroup"), ox.Literal(group)


def _site(site: str) -> tuple[str, str, str]:
    """(host, content language, wiki group) of a Wikimedia site id such as 'enwiki' or 'zh_yuewiki'."""
    if site in _SPECIAL_SITES:
        host, group = _SPECIAL_SITES[site]
        return host, "en", group
    match = _SITE.fullmatch(site) if isinstance(site, str) else None
    if match is None:
        raise ValueError(f"unknown site {site!r}")
    code, family = match[1].replace("_", "-"), _FAMILIES[match[2]]
    host = f"{_RENAMED_HOSTS.get(code, code)}.{family}.org"
    return host, _SITE_LANGUAGES.get(code, code), family


def _document(node: ox.NamedNode, entity: dict, kind: str, statements: list[dict]) -> Iterator[Triple]:
    """The entity's data page (schema:Dataset): revision, modification time and page counts."""
    doc = ox.NamedNode(ENTITY_DATA + entity["id"])
    yield doc, _TYPE, ox.NamedNode(SCHEMA + "Dataset")
    yield doc, ox.NamedNode(SCHEMA + "about"), node
    if isinstance(entity.get("lastrevid"), int):
        yield doc, ox.NamedNode(SCHEMA + "version"), _integer(entity["lastrevid"])
    if "modified" in entity:
        modified = ox.Literal(entity["modified"], datatype=ox.NamedNode(XSD + "dateTime"))
        yield doc, ox.NamedNode(SCHEMA + "dateModified"), modified
    yield doc, ox.NamedNode(WIKIBASE + "statements"), _integer(len(statements))
    if kind == "item":
        yield doc, ox.NamedNode(WIKIBASE + "sitelinks"), _integer(len(entity.get("sitelinks") or {}))
        identifiers = sum(s["mainsnak"].get("datatype") == "external-id" for s in statements)
        yield doc, ox.NamedNode(WIKIBASE + "identifiers"), _integer(identifiers)


def _text(term: dict) -> ox.Literal:
    value, language = term["value"], term["language"]
    if not isinstance(value, str):
        raise ValueError(f"text expected, got {value!r}")
    try:
        return ox.Literal(value, language=language)
    except (ValueError, TypeError) as e:
        raise ValueError(f"bad language code {language!r}") from e


def _entity_iri(value: dict | str) -> ox.NamedNode:
    """wd:Q5 from 'Q5' or an entity-id value, including the old form that only has 'numeric-id'."""
    if isinstance(value, str):
        eid = value
    elif "id" in value:
        eid = value["id"]
    else:
        prefix = {"item": "Q", "property": "P", "lexeme": "L"}.get(value.get("entity-type"))
        eid = f"{prefix}{value.get('numeric-id')}" if prefix else None
    if not isinstance(eid, str) or not _ENTITY_ID.fullmatch(eid):
        raise ValueError(f"bad entity id {value!r}")
    return ox.NamedNode(WD + eid)


def _property_id(pid: str) -> str:
    if not isinstance(pid, str) or not _PROPERTY_ID.fullmatch(pid):
        raise ValueError(f"bad property id {pid!r}")
    return pid


def _datatype_name(datatype: str) -> str:
    # 'globe-coordinate' → 'GlobeCoordinate', 'commonsMedia' → 'CommonsMedia' (wikibase:propertyType).
    return "".join(word[:1].upper() + word[1:] for word in datatype.split("-"))


def _wiki_urlencode(text: str) -> str:
    # MediaWiki's wfUrlencode: form-encoding that leaves ;@$!*(),/~: readable.
    return quote_plus(text, safe=";@$!*(),/~:")


def _blank(*parts: str) -> ox.BlankNode:
    return ox.BlankNode(hashlib.md5("\x1f".join(parts).encode(), usedforsecurity=False).hexdigest())


def _integer(n: int) -> ox.Literal:
    return ox.Literal(str(n), datatype=ox.NamedNode(XSD + "integer"))


def _reason(error: Exception) -> str:
    return f"missing {error}" if isinstance(error, KeyError) else str(error)
