// From a navigation tool's structured content to nodes and edges.
//
// Each tool's result is told apart by its shape (the models in kg_mcp/tools/*.py), so a result
// reaches the right drawing whichever tool name a host reports. Every function returns
// { nodes, edges, summary }: nodes { id, label, kind, role, title }, edges { source, target, label }.
// kind: entity, literal, blank, group (a count standing for many entities: a hop of follow, a
// relation of a hub) or cut (rows the tool left out). role: start, focus, answer or none.

const LITERAL_CHARS = 40;
const MAX_FAN = 600; // edges from the starts of a follow to its answers before they meet at one node

export function toGraph(data) {
  if (!data || typeof data !== "object") return empty("No structured content to draw.");
  if (Array.isArray(data.branches)) return fromFollow(data);
  if (Array.isArray(data.triples) && data.entity) return fromTraversal(data);
  if (data.view && data.direction && data.entity) return fromSearch(data);
  if (data.direction && Array.isArray(data.entities) && Array.isArray(data.rows)) return fromSearchBatch(data);
  if (Array.isArray(data.relations)) {
    const explored = data.relations.some((r) => Array.isArray(r.neighbours));
    if (explored) return fromExplore(data);
    if (data.entity) return fromRelations(data);
  }
  return empty("This result has no graph to draw.");
}

function empty(summary) {
  return { nodes: [], edges: [], summary };
}

class Builder {
  constructor() {
    this.nodes = new Map();
    this.edges = new Map();
  }

  term(term, role = "none") {
    // An entity keeps its id across results (so a click's search joins the drawn graph); a
    // literal or blank node is a leaf of the edge that reaches it (see leaf).
    const id = term.id;
    const known = this.nodes.get(id);
    if (known) {
      if (rank(role) > rank(known.role)) known.role = role;
      if (!known.label && term.label) known.label = term.label;
      return id;
    }
    this.nodes.set(id, { id, label: term.label || id, kind: "entity", role, title: term.label ? `${term.label} (${id})` : id });
    return id;
  }

  leaf(term, from, relation) {
    if (term.kind === "iri") return this.term(term);
    if (term.kind === "blank") {
      // A blank node: its handle (_:b12) where the KG gives one, which the tools take back, so a
      // click searches it; its inline description ([ p v ; ... ]) as its title.
      const id = term.id || `blank:${from}|${relation}|${term.label || ""}`;
      if (!this.nodes.has(id)) {
        this.nodes.set(id, { id, label: "", kind: "blank", role: "none", title: term.label || "an anonymous (blank) node", handle: Boolean(term.id) });
      }
      return id;
    }
    const id = `literal:${from}|${relation}|${term.id}`;
    if (!this.nodes.has(id)) {
      const tail = term.language ? `@${term.language}` : term.datatype ? ` (${term.datatype})` : "";
      this.nodes.set(id, { id, label: clip(term.id), kind: "literal", role: "none", title: term.id + tail });
    }
    return id;
  }

  group(id, label, title, kind = "group") {
    if (!this.nodes.has(id)) this.nodes.set(id, { id, label, kind, role: "none", title: title || label });
    return id;
  }

  edge(source, target, label) {
    const id = `${source}->${target}:${label}`;
    if (!this.edges.has(id)) this.edges.set(id, { id, source, target, label });
  }

  // An edge read in a direction: outgoing rows point away from the entity, incoming towards it.
  directed(entity, other, label, incoming) {
    if (incoming) this.edge(other, entity, label);
    else this.edge(entity, other, label);
  }

  done(summary) {
    return { nodes: [...this.nodes.values()], edges: [...this.edges.values()], summary };
  }
}

const ROLES = ["none", "answer", "focus", "start"];
function rank(role) {
  return ROLES.indexOf(role);
}

function clip(text) {
  const flat = String(text).replace(/\s+/g, " ");
  return flat.length > LITERAL_CHARS ? flat.slice(0, LITERAL_CHARS - 1) + "…" : flat;
}

function relationName(id, label) {
  return label || id;
}

function count(n, word) {
  const many = word.endsWith("y") ? word.slice(0, -1) + "ies" : word + "s";
  return `${n.toLocaleString("en")} ${n === 1 ? word : many}`;
}

function fromSearch(data) {
  const g = new Builder();
  const center = g.term(data.entity, "focus");
  const incoming = data.direction === "incoming";
  if (data.view === "properties") {
    // A hub: too many rows to list, so each property stands for its rows.
    g.nodes.get(center).hub = true;
    for (const p of data.properties || []) {
      const n = `${p.exact ? "" : "at least "}${count(p.rows, "row")}`;
      const id = g.group(`group:${center}|${data.direction}|${p.property}`, n, `${relationName(p.property, p.propertyLabel)}: ${n} (search with this property to list them)`);
      g.directed(center, id, relationName(p.property, p.propertyLabel), incoming);
    }
    const hidden = (data.properties_total || 0) - (data.properties || []).length;
    if (hidden > 0) g.directed(center, g.group(`cut:${center}|${data.direction}`, `${hidden} more properties`, "", "cut"), "", incoming);
    return g.done(`${data.entity.label || data.entity.id}: ${count(data.total, "row")} ${data.direction}, too many to list: its properties with their counts`);
  }
  for (const row of data.rows || []) {
    const label = relationName(row.property, row.propertyLabel);
    g.directed(center, g.leaf(row.value, center, row.property), label, incoming);
  }
  const left = data.total - data.shown;
  if (left > 0) g.directed(center, g.group(`cut:${center}|${data.direction}`, `${left} more rows`, "rows the tool left out", "cut"), "", incoming);
  return g.done(`${data.entity.label || data.entity.id}: ${count(data.shown, "row")} ${data.direction}${left > 0 ? ` of ${data.total}` : ""}`);
}

function fromSearchBatch(data) {
  const g = new Builder();
  const incoming = data.direction === "incoming";
  const ids = new Map();
  for (const part of data.entities) {
    ids.set(part.entity.id, g.term(part.entity, "focus"));
    if (part.view === "properties") g.nodes.get(part.entity.id).hub = true;
  }
  for (const row of data.rows) {
    const from = ids.get(row.entity) || row.entity;
    g.directed(from, g.leaf(row.value, from, row.property), row.property, incoming);
  }
  return g.done(`${count(data.entities.length, "entity")}: ${count(data.shown, "row")} ${data.direction}${data.truncated ? ` of ${data.total}` : ""}`);
}

function fromRelations(data) {
  const g = new Builder();
  const center = g.term(data.entity, "focus");
  for (const r of data.relations) {
    const backwards = r.relation.startsWith("~");
    const name = backwards ? r.relation.slice(1) : r.relation;
    const n = `${count(r.triples, "triple")}${r.exact ? "" : "+"}`;
    const id = g.group(`group:${center}|${r.relation}`, n, `${relationName(name, r.label)}${backwards ? " (incoming)" : ""}: ${n}`);
    g.directed(center, id, relationName(name, r.label), backwards);
  }
  if (data.total > data.shown) g.edge(center, g.group(`cut:${center}|relations`, `${data.total - data.shown} more relations`, "", "cut"), "");
  return g.done(`${data.entity.label || data.entity.id}: ${count(data.total, "relation")}`);
}

function fromExplore(data) {
  const g = new Builder();
  const centers = Array.isArray(data.entities) ? data.entities : [data.entity];
  for (const e of centers) g.term(e, "focus");
  for (const r of data.relations) {
    const center = r.entity ? r.entity.id : data.entity.id;
    const backwards = r.relation.startsWith("~");
    const name = backwards ? r.relation.slice(1) : r.relation;
    for (const n of r.neighbours) g.directed(center, g.leaf(n, center, r.relation), relationName(name, r.label), backwards);
    if (r.total > r.shown) {
      g.directed(center, g.group(`cut:${center}|${r.relation}`, `${r.total - r.shown} more`, `${relationName(name, r.label)}: ${r.total - r.shown} left out`, "cut"), relationName(name, r.label), backwards);
    }
  }
  const names = centers.map((e) => e.label || e.id).join(", ");
  return g.done(`${names}: ${count(data.relations.length, "relation")} explored`);
}

function fromTraversal(data) {
  const g = new Builder();
  const path = data.path || [];
  path.forEach((t, i) => g.term(t, i === 0 ? "start" : "none"));
  for (let i = 1; i < path.length; i++) {
    const last = i === path.length - 1;
    g.edge(path[i - 1].id, path[i].id, last && data.via ? data.via : "");
  }
  const center = g.term(data.entity, "focus");
  for (const t of data.triples) {
    const s = t.subject.id === center ? center : g.leaf(t.subject, center, t.relation);
    const o = t.object.id === center ? center : g.leaf(t.object, center, t.relation);
    g.edge(s, o, t.relation);
  }
  const left = data.total - data.shown;
  if (left > 0) g.edge(center, g.group(`cut:${center}|triples`, `${left} more triples`, "not among the top-ranked", "cut"), "");
  const where = path.length > 1 ? ` (${path.length - 1} hops from ${path[0].label || path[0].id})` : "";
  return g.done(`${data.entity.label || data.entity.id}${where}: top ${count(data.shown, "triple")} of ${data.total}`);
}

function fromFollow(data) {
  const g = new Builder();
  const answers = (data.entities || []).map((r) => g.term(r.entity, "answer"));
  let last = []; // where the end entities are reached from, for the node of those not listed
  data.branches.forEach((b, bi) => {
    let from = b.starts.map((s) => g.term(s, "start"));
    const hops = b.path.length;
    for (let hop = 1; hop <= hops; hop++) {
      const relation = b.path[hop - 1];
      const cut = b.cut_at_hop === hop;
      if (hop === hops && !cut && data.complete) {
        // The last hop reaches the end entities themselves (those listed); many starts times many
        // answers would be a thicket of edges, so they meet at one node first.
        let label = relation;
        if (from.length * answers.length > MAX_FAN) {
          const meet = g.group(`hop:${bi}|${hop}`, count(data.total, "entity"), `the entities reached by hop ${hop}`);
          for (const f of from) g.edge(f, meet, relation);
          [from, label] = [[meet], ""];
        }
        for (const f of from) for (const a of answers) g.edge(f, a, label);
        last = from.map((f) => [f, label]);
        break;
      }
      if (b.checked_backwards) {
        // Too big to walk forwards: checked backwards from the other paths' end entities.
        for (const f of from) for (const a of answers) g.edge(f, a, b.path.join(" → "));
        break;
      }
      const size = b.sizes[hop - 1];
      const label = cut ? `stopped: ${b.cut_edges ? `≥ ${b.cut_edges.toLocaleString("en")} edges` : "too big"}` : count(size ?? 0, "entity");
      const title = cut ? `hop ${hop} (${relation}) reached too many entities: the walk stopped here` : `after hop ${hop} (${relation}): ${label}`;
      const group = g.group(`hop:${bi}|${hop}`, label, title, cut ? "cut" : "group");
      for (const f of from) g.edge(f, group, relation);
      if (cut) break;
      from = [group];
    }
  });
  if (data.truncated) {
    const more = g.group("cut:answers", `${data.total - data.shown} more answers`, "end entities on the next pages (the result's next_cursor reads them)", "cut");
    for (const [f, label] of last) g.edge(f, more, label);
  }
  const walked = data.branches.map((b) => b.path.join(" → ")).join("; ");
  return g.done(data.complete ? `follow ${walked}: ${count(data.total, "entity")} reached` : `follow ${walked}: stopped (too many entities)`);
}
